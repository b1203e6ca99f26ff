"""A DP-SGD submission through the web UI, in Chromium against a live server and a real Celery worker: the toolkit
trains an MLP with Opacus and writes metadata.json, the silo uploads both through the upload page, sees the
submission refused with the market's sentence while it declares less than its parameters spend, then validated
(without a reload) with its declared ε and DP-SGD parameters, and finds the charge on its budget page and in its
ledger. Desktop and 390 px phone widths; docs/dp-sgd.md shows the validated upload and the
ledger (docs/screenshots/silo-dp-sgd-*), the other pages' screenshots go to test-artifacts/."""

import json

import pytest

from frontend.templatetags.number_tags import epsilon as epsilon_text
from market.budgets.ledger import epsilon_decimal
from market.budgets.models import BudgetEntry
from market.submissions.models import Submission, SubmissionStatus
from tests.frontend.journey_helpers import ARTIFACTS, DESKTOP, screenshots, sign_in
from workers.privacy.declarations import party_side_bound
from workers.silo.cli import main as toolkit


@pytest.fixture
def dp_sgd_model(pulled, silo_csv, capsys):  # noqa: F811
    """What `train --local --student mlp --privacy-level L2 --target-epsilon 3` writes: the network and its
    metadata.json (400 training rows, 2 epochs of Poisson batches of 50)."""
    arguments = [
        "train", "adult-income", "--data", silo_csv, "--pulled", pulled, "--local",
        "--student", "mlp", "--student-param", "hidden_sizes=[16]", "--student-param", "epochs=2",
        "--student-param", "batch_size=50", "--privacy-level", "L2", "--target-epsilon", "3",
        "--max-grad-norm", "1.5", "--json",
    ]  # fmt: skip
    assert toolkit([str(argument) for argument in arguments]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return pulled / "local-model"


@pytest.mark.worker
@pytest.mark.browser
def test_silo_uploads_a_dp_sgd_model_sees_its_epsilon_and_the_charge_on_its_budget(
    live_server, celery_worker, federation_with_data, dp_sgd_model, page
):
    metadata = json.loads((dp_sgd_model / "metadata.json").read_text())
    assert (metadata["files"], metadata["privacy_parameters"]["mechanism"]) == (
        ["local-model.safetensors"],
        "dp_sgd",
    )
    recomputed = party_side_bound(metadata["privacy_parameters"], n_local_examples=400)[0]
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
    page.set_viewport_size(DESKTOP)

    sign_in(page, live_server.url, "sam-silo", "silo-password")
    page.get_by_role("link", name="Federations", exact=True).click()
    page.get_by_role("link", name="Adult income").click()
    page.get_by_role("link", name="Upload models").first.click()
    page.wait_for_url(f"{live_server.url}/federations/adult-income/upload/")
    page.get_by_label("metadata.json from onefold train").set_input_files(
        files=[
            {
                "name": "metadata.json",
                "mimeType": "application/json",
                "buffer": (dp_sgd_model / "metadata.json").read_bytes(),
            }
        ]
    )
    page.get_by_text(
        "Filled in from metadata.json; now choose its model files: local-model.safetensors."
    ).wait_for()
    assert page.get_by_label("Model family").input_value() == "mlp"
    assert page.get_by_label("Privacy level").input_value() == "L2"
    assert page.get_by_label("Feature view").input_value() == "one_hot"
    assert page.locator("#party-privacy").is_visible()
    assert (
        json.loads(page.get_by_label("Privacy parameters").input_value())
        == metadata["privacy_parameters"]
    )
    assert float(page.get_by_label("Declared ε").input_value()) == metadata["declared_epsilon"]
    page.set_input_files(
        "#field-files",
        files=[
            {
                "name": "local-model.safetensors",
                "mimeType": "application/octet-stream",
                "buffer": (dp_sgd_model / "local-model.safetensors").read_bytes(),
            }
        ],
    )
    screenshots(page, "silo-dp-sgd-upload", ARTIFACTS)
    page.evaluate("window.notReloaded = true")

    # Declaring less than the parameters spend is refused with the market's sentence; nothing is stored or charged.
    page.get_by_label("Declared ε").fill("2.5")
    page.get_by_role("button", name="Upload").click()
    page.locator("#form-error").filter(has_text="You declared ε = 2.5").wait_for()
    assert page.locator("#form-error").inner_text() == (
        f"You declared ε = 2.5, but these parameters spend ε = {epsilon_decimal(recomputed.epsilon).normalize():f} (example-level, "
        f"{recomputed.n_queries} DP-SGD steps at sample rate {recomputed.sample_rate:.4g}, the market's RDP accountant, "
        "δ = 1e-05, rounded up to the millionth); declare at least that."
    )
    assert (Submission.objects.count(), BudgetEntry.objects.count()) == (0, 0)

    page.get_by_label("Declared ε").fill(repr(metadata["declared_epsilon"]))
    page.get_by_role("button", name="Upload").click()

    page.locator(
        '#submission-status [data-status="valid"], #submission-status [data-status="rejected"]'
    ).wait_for()
    assert page.locator("#submission-status .badge").inner_text() == "Valid"
    assert page.evaluate("window.notReloaded") is True
    submission = Submission.objects.get()
    assert (submission.status, submission.privacy_level, submission.model_family) == (
        SubmissionStatus.VALID,
        "L2",
        "mlp",
    )
    shown_epsilon = epsilon_text(submission.declared_epsilon)
    declaration = metadata["privacy_parameters"]
    assert page.locator("#privacy-declaration").inner_text() == (
        f"L2: the declared ε = {shown_epsilon} (example-level, δ = 0.00001) was charged to the privacy budget of "
        f"Northwind Hospital when the upload was accepted. DP-SGD: noise multiplier "
        f"{epsilon_text(declaration['noise_multiplier'])}, clipping norm 1.5, batch size 50, 2 epochs "
        f"({recomputed.n_queries} steps at sample rate {epsilon_text(recomputed.sample_rate)}, the market's RDP "
        "accountant)."
    )
    screenshots(page, "silo-dp-sgd-validated")

    [charge] = BudgetEntry.objects.all()
    assert (charge.kind, charge.spender_id_of("submission")) == ("charge", submission.id)
    page.get_by_role("link", name="Budget", exact=True).click()
    page.get_by_role("link", name="Adult income").click()
    silo_row = page.locator(".budget-table tbody tr").filter(has_text="Northwind Hospital")
    assert silo_row.locator("[data-budget-spent]").inner_text() == epsilon_text(charge.epsilon)
    assert epsilon_text(charge.epsilon) == shown_epsilon
    screenshots(page, "silo-dp-sgd-budget", ARTIFACTS)

    page.get_by_role("link", name="Ledger", exact=True).click()
    [line] = page.locator(".ledger-table tbody tr").all()
    assert line.locator("td").nth(2).inner_text() == "Charge"
    assert line.locator("td").nth(3).inner_text() == shown_epsilon
    assert line.locator("td").nth(7).inner_text().strip() == f"Submission #{submission.id}"
    screenshots(page, "silo-dp-sgd-ledger")
    assert script_errors == []
    assert failed_requests == [
        f"400 POST {live_server.url}/api/submissions/"
    ]  # only the under-claim
