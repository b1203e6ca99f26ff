"""The silo's upload journey in a real Chromium, against a live server and a real Celery worker."""

from pathlib import Path

import pytest

from market.submissions.models import Submission, SubmissionStatus
from tests.conftest import scaled_milliseconds

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

# Builds a DataTransfer holding one file, as the browser does when a file is dropped.
DROPPED_FILE_SCRIPT = """([name, text]) => {
    const dataTransfer = new DataTransfer();
    dataTransfer.items.add(new File([text], name, {type: "application/json"}));
    return dataTransfer;
}"""


@pytest.mark.browser
@pytest.mark.worker
def test_silo_uploads_students_and_sees_them_validated_without_reload(
    live_server, celery_worker, federation_with_data, student_model_files, page
):
    script_errors, failed_requests = [], []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.on(
        "response",
        lambda response: (
            failed_requests.append(f"{response.status} {response.request.method} {response.url}")
            if response.status >= 400
            else None
        ),
    )

    page.goto(f"{live_server.url}/sign-in/")
    page.get_by_label("Username").fill("sam-silo")
    page.get_by_label("Password").fill("silo-password")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Federations", exact=True).click()
    page.get_by_role("link", name="Adult income").click()
    page.get_by_role("link", name="Download onefold-adult-income.zip").wait_for()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "federation-detail.png", full_page=True)
    page.get_by_role("link", name="Upload models").first.click()
    page.wait_for_url(f"{live_server.url}/federations/adult-income/upload/")

    # Sent empty, the API's field errors appear next to their fields.
    page.get_by_role("button", name="Upload").click()
    page.locator("#error-files").filter(has_text="This field is required.").wait_for()
    assert page.locator("#form-error").inner_text() == "Please correct the fields marked below."
    assert page.locator("#progress-block").is_hidden()
    assert page.locator("#field-n_local_examples").get_attribute("aria-invalid") == "true"
    page.screenshot(path=ARTIFACTS / "upload-errors.png", full_page=True)

    # One student through the file input, the other dropped on the drop zone.
    page.set_input_files(
        "#field-files",
        files=[
            {
                "name": "student-partition-0.json",
                "mimeType": "application/json",
                "buffer": student_model_files[0],
            }
        ],
    )
    dropped = page.evaluate_handle(
        DROPPED_FILE_SCRIPT, ["student-partition-1.json", student_model_files[1].decode()]
    )
    page.dispatch_event("#drop-zone", "drop", {"dataTransfer": dropped})
    assert page.locator("#file-list li").all_inner_texts()[0].startswith("student-partition-0.json")
    assert page.locator("#file-list li").all_inner_texts()[1].startswith("student-partition-1.json")

    page.get_by_label("Model family").select_option("xgboost")
    page.get_by_label("Local training examples").fill("1000")
    page.get_by_label("Local validation score").fill("0.84")
    page.get_by_label("Label distribution").fill("[760, 240]")
    page.evaluate("window.notReloaded = true")
    page.get_by_role("button", name="Upload").click()

    page.locator("#upload-progress-text").filter(has_text="100 %").wait_for(
        timeout=scaled_milliseconds(30_000)
    )
    assert page.locator("#upload-progress").get_attribute("value") == "100"
    # The worker validates in a sandboxed child; the status partial polls until the status is final.
    page.locator(
        '#submission-status [data-status="valid"], #submission-status [data-status="rejected"]'
    ).wait_for(timeout=scaled_milliseconds(90_000))
    assert page.locator("#submission-status .badge").inner_text() == "Valid"
    assert page.locator("#error-files").is_hidden() and page.locator("#form-error").is_hidden()

    page.screenshot(path=ARTIFACTS / "upload-journey.png", full_page=True)
    assert page.evaluate("window.notReloaded") is True
    submission = Submission.objects.get()
    assert submission.status == SubmissionStatus.VALID
    assert [model_file.original_name for model_file in submission.model_files.all()] == [
        "student-partition-0.json",
        "student-partition-1.json",
    ]
    assert submission.label_distribution == [760, 240]
    assert (
        page.locator("#submission-result-heading").inner_text()
        == f"Submission #{submission.id} uploaded"
    )
    assert script_errors == []
    assert failed_requests == [
        f"400 POST {live_server.url}/api/submissions/"
    ]  # only the deliberately empty upload

    page.get_by_role("link", name="See all your submissions").click()
    row = page.locator(f"#submission-{submission.id}")
    assert row.locator(".badge").inner_text() == "Valid"
    page.screenshot(path=ARTIFACTS / "submission-list.png", full_page=True)
