"""The silo's whole journey in Chromium, against a live server and a real Celery worker: land on its home, upload
students by reading the toolkit's metadata.json, see its budget and its earnings. Screenshots at 1280 px and 390 px
go to docs/screenshots/ (the README embeds them)."""

import json
from pathlib import Path

import pytest

from market.commerce.purchases import purchase_create
from market.submissions.models import Submission, SubmissionStatus
from tests.conftest import scaled_milliseconds

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
WIDTHS = {"desktop": 1280, "phone": 390}

# What `onefold train` writes beside the students (workers/silo/training_command.py)
METADATA = {
    "federation": "adult-income",
    "model_family": "xgboost",
    "files": ["student-1.json", "student-2.json", "own-model.json"],
    "n_local_examples": 2000,
    "local_validation_score": 0.83,
    "label_distribution": [1520, 480],
    "privacy_level": "L0",
    "privacy_parameters": {},
    "declared_epsilon": None,
    "feature_view": "one_hot",
    "partitions": 2,
    "teachers": 5,
    "own_model": {"file": "own-model.json", "validation_score": 0.85},
}


def screenshots(page, name: str):
    """The page as it is now at both widths (phone first at the top of the page, then back to desktop)."""
    for label, width in (("phone", WIDTHS["phone"]), ("desktop", WIDTHS["desktop"])):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate("document.documentElement.scrollWidth") <= width, (
            f"{name} overflows at {width} px"
        )
        page.screenshot(path=SCREENSHOTS / f"silo-{name}-{label}.png", full_page=label == "desktop")


@pytest.mark.worker
@pytest.mark.browser
def test_silo_uploads_from_metadata_json_and_sees_its_budget_and_earnings(
    live_server,
    celery_worker,
    federation_with_data,
    student_model_files,
    buyer_user,
    silo_user,
    other_silo_user,
    published_listing,
    top_up,
    page,
):
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    listing = published_listing(
        name="Adult income forest", price_cents=1250, privacy_level="L0"
    )  # an L1 sale is split equally (docs/budgets.md)
    top_up(buyer_user.organisation, 5000)
    purchase_create(listing=listing, user=buyer_user, idempotency_key="silo-journey-1")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": WIDTHS["desktop"], "height": 900})

    page.goto(f"{live_server.url}/sign-in/")
    page.get_by_label("Username").fill("sam-silo")
    page.get_by_label("Password").fill("silo-password")
    page.get_by_role("button", name="Sign in").click()
    page.locator("#home-silo").wait_for()
    screenshots(page, "home")

    page.get_by_role("link", name="Upload models to Adult income").click()
    page.wait_for_url(f"{live_server.url}/federations/adult-income/upload/")
    page.get_by_label("metadata.json from onefold train").set_input_files(
        files=[
            {
                "name": "metadata.json",
                "mimeType": "application/json",
                "buffer": json.dumps(METADATA).encode(),
            }
        ]
    )
    page.get_by_text(
        "Filled in from metadata.json; now choose its model files: student-1.json, student-2.json, "
        "own-model.json (own-model.json is your own model, uploaded beside the students)."
    ).wait_for()
    assert page.get_by_label("Model family").input_value() == "xgboost"
    assert page.get_by_label("Local training examples").input_value() == "2000"
    assert page.get_by_label("Label distribution").input_value() == "[1520,480]"
    assert page.get_by_label("Privacy level").input_value() == "L0"
    assert (
        page.get_by_label("Feature view").input_value() == "one_hot"
    )  # the one control, filled in too
    page.set_input_files(
        "#field-files",
        files=[
            {"name": name, "mimeType": "application/json", "buffer": data}
            # the own model: a third XGBoost model (the first student's file will do for the page)
            for name, data in zip(METADATA["files"], [*student_model_files, student_model_files[0]])
        ],
    )
    screenshots(page, "upload-from-metadata")
    page.get_by_role("button", name="Upload").click()
    page.locator(
        '#submission-status [data-status="valid"], #submission-status [data-status="rejected"]'
    ).wait_for(timeout=scaled_milliseconds(90_000))
    assert page.locator("#submission-status .badge").inner_text() == "Valid"
    assert page.evaluate("document.activeElement.id") == "submission-result-heading"
    submission = Submission.objects.get()
    assert (
        submission.status,
        submission.n_local_examples,
        submission.privacy_level,
        submission.label_distribution,
    ) == (SubmissionStatus.VALID, 2000, "L0", [1520, 480])
    files = list(submission.model_files.all())
    assert (files[-1].original_name, files[-1].info["role"]) == ("own-model.json", "own")
    assert (submission.own_model_validation_score, submission.partitions, submission.teachers) == (
        0.85,
        2,
        5,
    )
    screenshots(page, "upload-validated")

    page.get_by_role("link", name="Budget", exact=True).click()
    page.get_by_role("link", name="Adult income").click()
    page.locator("#budget-summary").wait_for()
    assert page.locator(".budget-table tbody th").all_inner_texts() == ["Northwind Hospital"]
    screenshots(page, "budget")

    page.get_by_role("link", name="Earnings", exact=True).click()
    assert (
        page.locator("#earnings-total").inner_text() == "7.88 credits"
    )  # 0.7 × (12.50 − 1.25 fee)
    screenshots(page, "earnings")
    assert script_errors == []
