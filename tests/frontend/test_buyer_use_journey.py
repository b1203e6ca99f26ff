"""A buyer's whole journey in a real Chromium against a live server: ask for credits (an operator approves),
find a model, buy it, download the raw-column ONNX package, and run it with onnxruntime alone on the
federation's raw CSV rows to get exactly the platform's predictions; then try a row in the page's form."""

import csv
import io
import json
import os
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime
import pytest

from market.accounts.services import user_token
from market.audit.models import AuditEvent
from market.commerce.models import CreditRequest, CreditRequestStatus, Wallet
from market.commerce.wallets import credit_request_approve
from tests.conftest import api_client_for
from tests.fixtures.commerce import BUYER_PASSWORD
from tests.frontend.journey_helpers import DESKTOP, screenshots, sign_in


def onnxruntime_on_csv(model_bytes: bytes, csv_text: str) -> tuple[np.ndarray, list[str]]:
    """The README's snippet: the csv module, numpy and onnxruntime, nothing of Onefold."""
    session = onnxruntime.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    inputs = {}
    for graph_input in session.get_inputs():
        values = [row[graph_input.name] for row in rows]
        if graph_input.type == "tensor(double)":
            inputs[graph_input.name] = np.array(
                [float(value) if value else np.nan for value in values]
            )[:, None]
        else:
            inputs[graph_input.name] = np.array(values, dtype=object)[:, None]
    probabilities, labels = session.run(["probabilities", "label"], inputs)
    return probabilities, [str(label) for label in labels]


@pytest.mark.browser
def test_buyer_gets_credits_buys_and_runs_the_raw_column_onnx_with_the_platforms_predictions(
    live_server,
    transactional_db,
    operator,
    buyer_user,
    published_listing,
    adult_evaluation_csv,
    page,
    tmp_path,
    monkeypatch,
):
    script_errors, failed_requests = [], []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.on(
        "response",
        lambda response: (
            failed_requests.append(f"{response.status} {response.url}")
            if response.status >= 400
            else None
        ),
    )
    page.set_viewport_size(DESKTOP)
    listing = published_listing(name="Adult income forest", price_cents=1250)
    sign_in(page, live_server.url, buyer_user.username, BUYER_PASSWORD)

    # Add credits: a pending request, which an operator approves once the invoice is paid.
    page.get_by_role("link", name="Wallet", exact=True).click()
    page.get_by_label("Amount (credits)").fill("50")
    page.get_by_label("Purchase order or note (optional)").fill("PO-2026-118")
    page.get_by_role("button", name="Request credits").click()
    page.locator("#credit-requests").filter(has_text="Pending").wait_for()
    credit_request = CreditRequest.objects.get()
    assert (credit_request.amount_cents, credit_request.status) == (
        5000,
        CreditRequestStatus.PENDING,
    )
    assert (
        Wallet.objects.filter(organisation=buyer_user.organisation, balance_cents__gt=0).count()
        == 0
    )
    credit_request_approve(
        credit_request=credit_request, actor=operator, payment_reference="BANK-1"
    )
    page.reload()
    assert page.locator("#wallet-balance").inner_text() == "50.00 credits"

    # Find and buy.
    page.get_by_role("link", name="Models", exact=True).click()
    page.get_by_role("textbox", name="Search").fill("forest")
    page.get_by_role("button", name="Search").click()
    page.get_by_role("link", name="Adult income forest").click()
    page.get_by_role("link", name="Buy").click()
    page.get_by_role("button", name="Confirm purchase").click()
    page.get_by_role("link", name="Use this model").click()

    # Downloads named with their size and purpose; the raw-column ONNX first.
    choices = page.locator("#download-choices li")
    assert choices.first.get_by_role("button").inner_text() == "Download ONNX, raw columns"
    assert "KiB" in choices.first.locator(".download-size").inner_text()
    assert choices.count() == 1 + listing.global_model.files.count()
    screenshots(page, "buyer-use-model")

    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download ONNX, raw columns").click()
    download = download_info.value
    raw_name = f"onefold-global-model-{listing.global_model_id}.raw.onnx"
    assert download.suggested_filename == f"{raw_name}.zip"
    with zipfile.ZipFile(Path(download.path())) as package:
        assert sorted(package.namelist()) == sorted([raw_name, "README.md", "feature-spec.json"])
        readme = package.read("README.md").decode()
        model_bytes = package.read(raw_name)
        spec = json.loads(package.read("feature-spec.json"))
    assert readme.startswith("---\nlicense: other\n")
    assert "library_name: onnx" in readme and "pipeline_tag: tabular-classification" in readme
    assert "# Adult income forest" in readme and "onnxruntime.InferenceSession" in readme
    assert spec == listing.global_model.job.public_dataset.feature_spec

    # onnxruntime alone on the federation's raw CSV rows (the evaluation rows, label column included and ignored)
    # gives the platform's own predictions for the same CSV.
    csv_text = "\n".join(adult_evaluation_csv.decode().splitlines()[:41]) + "\n"
    probabilities, labels = onnxruntime_on_csv(model_bytes, csv_text)
    response = api_client_for(buyer_user).post(
        f"/api/global-models/{listing.global_model_id}/predict/",
        data=csv_text.encode(),
        content_type="text/csv",
    )
    assert response.status_code == 200, response.content
    platform = response.json()
    assert labels == platform["classes"]
    np.testing.assert_allclose(probabilities, np.array(platform["probabilities"]), atol=2e-6)

    # The page's Python snippet and curl line, run exactly as shown, in a folder holding the unzipped model and
    # rows.csv: the same predictions again.
    (tmp_path / raw_name).write_bytes(model_bytes)
    (tmp_path / "rows.csv").write_text(csv_text)
    snippet = page.locator("#use-snippet").inner_text()
    assert f'InferenceSession("{raw_name}")' in snippet
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(snippet, namespace)  # noqa: S102 (the page's own snippet, run as a buyer would)
    np.testing.assert_allclose(namespace["probabilities"], probabilities, atol=1e-9)
    assert [str(label) for label in namespace["labels"]] == labels
    curl_line = page.locator("#curl-line").inner_text()
    assert curl_line.startswith("curl ") and live_server.url in curl_line
    answer = subprocess.run(
        ["bash", "-c", curl_line],
        cwd=tmp_path,
        env={**os.environ, "ONEFOLD_TOKEN": user_token(user=buyer_user)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(answer.stdout)["classes"] == platform["classes"]
    assert (
        page.get_by_role("link", name="API tokens page").get_attribute("href")
        == "/security/tokens/"
    )

    # The try-it form goes through the same prediction service (and is audited like it).
    first = next(csv.DictReader(io.StringIO(csv_text)))
    page.get_by_label("age", exact=True).fill(first["age"])
    page.get_by_role("button", name="Predict").click()
    page.locator("#try-predicted").wait_for()
    assert page.locator("#try-probabilities tbody tr").count() == 2
    # (the API call above, the curl line's and the form's)
    assert AuditEvent.objects.filter(action="model.predicted", actor=buyer_user).count() == 3
    screenshots(page, "buyer-try-model")

    with page.expect_download() as spec_info:
        page.get_by_role("link", name="Feature specification (JSON)").click()
    assert json.loads(Path(spec_info.value.path()).read_text()) == spec
    assert script_errors == [] and failed_requests == []
