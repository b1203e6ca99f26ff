"""Downloads through signed links, loaded by a buyer with public libraries only; predictions through the API."""

import importlib
import subprocess
import sys
import time

import numpy as np
import pytest
from django.core import signing

from market.audit.models import AuditEvent
from market.commerce.purchases import purchase_create
from market.storage import sha256_of
from tests.conftest import api_client_for, csv_bytes, scaled_timeout
from tests.fixtures.commerce import BUYER_LOADER, download, raw_rows


@pytest.mark.parametrize(
    "family, formats",
    [
        ("random_forest", ["skops", "onnx"]),
        ("xgboost", ["xgboost-json", "onnx"]),
        ("mlp", ["safetensors", "onnx"]),
        ("ensemble", ["bundle"]),
    ],
)
def test_every_downloaded_format_predicts_like_the_platform_with_public_libraries_only(
    family, formats, published_listing, buyer_user, buyer_api, top_up, adult_evaluation, tmp_path
):
    listing = published_listing(family=family, price_cents=100)
    top_up(buyer_user.organisation, 100)
    purchase_create(listing=listing, user=buyer_user)
    raw, features, _ = adult_evaluation
    rows = raw.iloc[:200]
    platform = buyer_api.post(
        f"/api/global-models/{listing.global_model_id}/predict/",
        {"rows": raw_rows(rows)},
        format="json",
    )
    assert platform.status_code == 200, platform.json()
    platform_probabilities = np.asarray(platform.json()["probabilities"])
    np.save(tmp_path / "features.npy", features[:200])

    for model_format in formats:
        model_path = tmp_path / f"model.{model_format}"
        model_path.write_bytes(download(buyer_api, listing.global_model_id, model_format))
        finished = subprocess.run(
            [
                sys.executable,
                "-I",
                "-c",
                BUYER_LOADER,
                model_format,
                str(model_path),
                str(tmp_path / "features.npy"),
                str(tmp_path / "out.npy"),
            ],
            capture_output=True,
            text=True,
            timeout=scaled_timeout(180),
            cwd=tmp_path,
        )
        assert finished.returncode == 0, finished.stderr
        assert finished.stdout.strip() == "[]"  # no Onefold or Django module was imported
        downloaded = np.load(tmp_path / "out.npy")
        np.testing.assert_allclose(
            downloaded, platform_probabilities, atol=1e-5, err_msg=model_format
        )
    assert platform.json()["classes"] == [
        ["<=50K", ">50K"][index] for index in platform_probabilities.argmax(axis=1)
    ]


def test_a_download_asked_with_the_old_spelling_of_a_format_gets_that_file(
    published_listing, buyer_user, buyer_api
):
    listing = published_listing(family="xgboost", price_cents=0)
    purchase_create(listing=listing, user=buyer_user)
    stored = listing.global_model.files.get(format="xgboost-json")
    assert sha256_of(download(buyer_api, listing.global_model_id, "xgboost_json")) == stored.sha256


def test_a_file_stored_with_the_old_spelling_of_its_format_is_migrated_to_the_one_spelling(
    published_listing, buyer_user, buyer_api
):
    from django.apps import apps

    migration = importlib.import_module(
        "market.jobs.migrations.0006_global_model_formats_spelt_one_way"
    )
    listing = published_listing(family="xgboost", price_cents=0)
    purchase_create(listing=listing, user=buyer_user)
    listing.global_model.files.filter(format="xgboost-json").update(format="xgboost_json")

    migration.spell_formats_one_way(apps, None)

    stored = listing.global_model.files.get(format="xgboost-json")
    assert sha256_of(download(buyer_api, listing.global_model_id, "xgboost-json")) == stored.sha256


def test_predict_accepts_csv_and_names_the_bad_row_and_column(
    published_listing, buyer_user, buyer_api, top_up, adult_evaluation
):
    listing = published_listing(price_cents=0)
    purchase_create(listing=listing, user=buyer_user)
    raw, _, _ = adult_evaluation
    url = f"/api/global-models/{listing.global_model_id}/predict/"

    from_csv = buyer_api.post(
        url, csv_bytes(raw.iloc[:5]), content_type="text/csv"
    )  # label column is ignored
    from_json = buyer_api.post(url, {"rows": raw_rows(raw.iloc[:5])}, format="json")
    assert from_csv.status_code == 200, from_csv.json()
    assert from_csv.json() == from_json.json()
    assert from_csv.json()["class_labels"] == ["<=50K", ">50K"]

    rows = raw_rows(raw.iloc[:3])
    rows[1]["age"] = "forty"
    assert buyer_api.post(url, {"rows": rows}, format="json").json() == {
        "detail": "Row 2, column 'age': expected a number, got 'forty'."
    }
    del rows[1]["age"]
    assert (
        buyer_api.post(url, {"rows": rows}, format="json")
        .json()["detail"]
        .startswith("Row 2, column 'age': missing")
    )
    bad_csv = raw.iloc[:4].copy().astype(object)
    bad_csv.loc[3, "hours-per-week" if "hours-per-week" in raw.columns else raw.columns[0]] = "many"
    response = buyer_api.post(url, csv_bytes(bad_csv), content_type="text/csv")
    assert response.status_code == 400 and response.json()["detail"].startswith("Row 4, column '")
    assert buyer_api.post(url, {"rows": []}, format="json").status_code == 400
    event = AuditEvent.objects.filter(action="model.predicted").first()
    assert event.details == {"rows": 5}


def test_predict_honours_the_deployments_caps_on_a_models_structure(
    published_listing, buyer_user, buyer_api, adult_evaluation, settings
):
    listing = published_listing(price_cents=0)  # a random forest of 20 trees
    purchase_create(listing=listing, user=buyer_user)
    url = f"/api/global-models/{listing.global_model_id}/predict/"
    rows = {"rows": raw_rows(adult_evaluation[0].iloc[:1])}
    settings.ONEFOLD_MODEL_MAX_TREES = 10
    response = buyer_api.post(url, rows, format="json")
    assert response.status_code == 503
    assert "20 trees" in response.json()["detail"] and "10" in response.json()["detail"]


def test_predict_with_an_ensemble_bundle_runs_its_members_under_the_deployments_sandbox(
    published_listing, buyer_user, buyer_api, adult_evaluation, settings
):
    listing = published_listing(price_cents=0, family="ensemble")  # a 20-tree forest and a booster
    purchase_create(listing=listing, user=buyer_user)
    url = f"/api/global-models/{listing.global_model_id}/predict/"
    rows = {"rows": raw_rows(adult_evaluation[0].iloc[:1])}
    assert buyer_api.post(url, rows, format="json").status_code == 200
    settings.ONEFOLD_SANDBOX_WALL_SECONDS = 0
    response = buyer_api.post(url, rows, format="json")
    assert response.status_code == 503
    assert "did not finish predicting within 0 seconds" in response.json()["detail"]
    settings.ONEFOLD_SANDBOX_WALL_SECONDS, settings.ONEFOLD_MODEL_MAX_TREES = 120, 10
    response = buyer_api.post(url, rows, format="json")
    assert response.status_code == 503
    assert "20 trees" in response.json()["detail"] and "10" in response.json()["detail"]


def test_predict_is_throttled(published_listing, buyer_user, buyer_api, adult_evaluation, settings):
    from django.core.cache import cache

    cache.clear()
    settings.ONEFOLD_PREDICT_RATE = "2/minute"
    listing = published_listing(price_cents=0)
    purchase_create(listing=listing, user=buyer_user)
    url = f"/api/global-models/{listing.global_model_id}/predict/"
    rows = {"rows": raw_rows(adult_evaluation[0].iloc[:1])}
    statuses = [buyer_api.post(url, rows, format="json").status_code for _ in range(3)]
    cache.clear()
    assert statuses == [200, 200, 429]


def test_nobody_downloads_or_predicts_with_what_they_did_not_buy(
    published_listing, buyer_user, buyer_api, silo_api, operator_api, top_up, adult_evaluation
):
    listing = published_listing(price_cents=100)
    unbought = published_listing(price_cents=100, family="xgboost")
    top_up(buyer_user.organisation, 100)
    purchase_create(listing=listing, user=buyer_user)
    rows = {"rows": raw_rows(adult_evaluation[0].iloc[:1])}

    for api in (silo_api,):  # a contributing silo has not bought the model
        assert (
            api.post(
                f"/api/global-models/{listing.global_model_id}/download-links/",
                {"format": "onnx"},
                format="json",
            ).status_code
            == 404
        )
        assert (
            api.post(
                f"/api/global-models/{listing.global_model_id}/predict/", rows, format="json"
            ).status_code
            == 404
        )
    assert (
        buyer_api.post(
            f"/api/global-models/{unbought.global_model_id}/download-links/",
            {"format": "onnx"},
            format="json",
        ).status_code
        == 404
    )
    assert (
        buyer_api.post(
            f"/api/global-models/{unbought.global_model_id}/predict/", rows, format="json"
        ).status_code
        == 404
    )
    missing = buyer_api.post(
        "/api/global-models/999999/download-links/", {"format": "onnx"}, format="json"
    )
    assert (missing.status_code, missing.json()["detail"]) == (
        404,
        "There is no global model #999999 that your organisation has bought.",
    )
    assert (
        operator_api.post(
            f"/api/global-models/{unbought.global_model_id}/download-links/",
            {"format": "onnx"},
            format="json",
        ).status_code
        == 201
    )
    assert (
        buyer_api.post(
            f"/api/global-models/{listing.global_model_id}/download-links/",
            {"format": "pickle"},
            format="json",
        ).status_code
        == 400
    )


def download_url(api, global_model_id: int) -> str:
    response = api.post(
        f"/api/global-models/{global_model_id}/download-links/", {"format": "onnx"}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()["url"].replace("http://testserver", "")


def test_signed_links_cannot_be_tampered_with_or_used_after_expiry(
    published_listing, buyer_user, buyer_api, top_up, settings, client
):
    listing = published_listing(price_cents=100)
    top_up(buyer_user.organisation, 100)
    purchase_create(listing=listing, user=buyer_user)
    url = download_url(buyer_api, listing.global_model_id)
    token = url.rstrip("/").rsplit("/", 1)[1]
    payload = signing.TimestampSigner(salt="onefold.commerce.download").unsign_object(token)

    assert buyer_api.get(url).status_code == 200
    forged = signing.TimestampSigner(
        salt="onefold.commerce.download", key="guessed-key"
    ).sign_object({**payload, "file": payload["file"] + 1})
    assert buyer_api.get(f"/api/downloads/{forged}/").status_code == 403
    tampered = url.replace(token, token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
    assert buyer_api.get(tampered).status_code == 403
    public_media = client.get(f"/media/{listing.global_model.files.get(format='onnx').stored_name}")
    assert public_media.status_code == 404
    settings.ONEFOLD_DOWNLOAD_LINK_TTL_SECONDS = 1
    time.sleep(2.1)
    expired = buyer_api.get(url)
    assert expired.status_code == 403 and "expired" in expired.json()["detail"]


def test_a_link_serves_only_the_signed_in_buyer_it_was_made_for_and_the_audit_names_who_tried(
    published_listing, buyer_user, buyer_api, top_up, operator, operator_api, client
):
    from market.accounts.services import user_create

    listing = published_listing(price_cents=100)
    top_up(buyer_user.organisation, 100)
    purchase_create(listing=listing, user=buyer_user)
    colleague = user_create(
        username="finn-fabrikam",
        password="colleague-password",
        organisation=buyer_user.organisation,
    )
    url = download_url(buyer_api, listing.global_model_id)

    assert client.get(url).status_code == 401  # no bearer token: the link alone opens nothing
    for other in (colleague, operator):  # entitled to the model, but the link is not theirs
        refused = api_client_for(other).get(url)
        assert (refused.status_code, refused.json()["detail"]) == (
            403,
            "This download link was made for another account; sign in as its buyer, or ask for a link of your "
            "own from your purchases.",
        )
    assert buyer_api.get(url).status_code == 200
    events = AuditEvent.objects.filter(action="model.downloaded").order_by("id")
    assert [(event.actor_id, event.outcome) for event in events] == [
        (colleague.id, "refused"),
        (operator.id, "refused"),
        (buyer_user.id, "success"),
    ]
    assert events.last().object_id == str(listing.global_model_id)
    assert events.last().organisation_id == buyer_user.organisation_id


def test_a_link_stops_working_at_once_when_its_user_leaves_the_buying_organisation(
    published_listing, buyer_user, buyer_api, top_up
):
    from market.accounts.models import User
    from market.accounts.services import organisation_create

    listing = published_listing(price_cents=100)
    top_up(buyer_user.organisation, 100)
    purchase_create(listing=listing, user=buyer_user)
    url = download_url(buyer_api, listing.global_model_id)
    assert buyer_api.get(url).status_code == 200
    elsewhere = organisation_create(name="Elsewhere Analytics", is_silo=False, is_buyer=True)
    User.objects.filter(id=buyer_user.id).update(organisation=elsewhere)
    refused = buyer_api.get(url)
    assert (refused.status_code, refused.json()["detail"]) == (
        404,
        f"There is no global model #{listing.global_model_id} that your organisation has bought.",
    )
    assert (
        AuditEvent.objects.filter(
            action="model.downloaded", outcome="refused", actor=buyer_user, organisation=elsewhere
        ).count()
        == 1
    )


def test_a_packaged_raw_column_download_carries_the_model_card_and_runs_on_raw_rows(
    published_listing, buyer_user, buyer_api, top_up, adult_evaluation
):
    import io
    import zipfile

    import onnxruntime

    listing = published_listing(price_cents=100)
    top_up(buyer_user.organisation, 100)
    purchase_create(listing=listing, user=buyer_user)
    link = buyer_api.post(
        f"/api/global-models/{listing.global_model_id}/download-links/",
        {"format": "raw_onnx", "package": True},
        format="json",
    )
    response = buyer_api.get(link.json()["url"].replace("http://testserver", ""))
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as package:
        raw_name = f"onefold-global-model-{listing.global_model_id}.raw.onnx"
        assert sorted(package.namelist()) == sorted([raw_name, "README.md", "feature-spec.json"])
        readme, model = package.read("README.md").decode(), package.read(raw_name)
    assert readme.startswith("---\nlicense: other\n") and f"# {listing.name}" in readme
    raw, _, _ = adult_evaluation
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    rows = raw.iloc[:20]
    inputs = {
        graph_input.name: (
            rows[[graph_input.name]].to_numpy(dtype=np.float64)
            if graph_input.type == "tensor(double)"
            else rows[[graph_input.name]].fillna("").astype(str).to_numpy(dtype=object)
        )
        for graph_input in session.get_inputs()
    }
    probabilities, labels = session.run(["probabilities", "label"], inputs)
    platform = buyer_api.post(
        f"/api/global-models/{listing.global_model_id}/predict/",
        {"rows": raw_rows(rows)},
        format="json",
    ).json()
    np.testing.assert_allclose(probabilities, np.array(platform["probabilities"]), atol=2e-6)
    assert list(labels) == platform["classes"]
    assert (
        AuditEvent.objects.filter(
            action="model.downloaded",
            actor=buyer_user,
            details__format="raw_onnx",
            details__package=True,
        ).count()
        == 1
    )


def test_an_ensemble_with_an_xgboost_member_has_a_raw_column_onnx_that_predicts_like_the_platform(
    published_listing, buyer_user, buyer_api, top_up, adult_evaluation
):
    import onnxruntime

    # the bundle holds a random forest as ONNX (weight 0.25) and a booster as XGBoost JSON (0.75)
    listing = published_listing(price_cents=100, family="ensemble")
    top_up(buyer_user.organisation, 100)
    purchase_create(listing=listing, user=buyer_user)
    model = download(buyer_api, listing.global_model_id, "raw_onnx")
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    raw, _, _ = adult_evaluation
    rows = raw.iloc[:40]
    inputs = {
        graph_input.name: (
            rows[[graph_input.name]].to_numpy(dtype=np.float64)
            if graph_input.type == "tensor(double)"
            else rows[[graph_input.name]].fillna("").astype(str).to_numpy(dtype=object)
        )
        for graph_input in session.get_inputs()
    }
    probabilities, labels = session.run(["probabilities", "label"], inputs)
    platform = buyer_api.post(
        f"/api/global-models/{listing.global_model_id}/predict/",
        {"rows": raw_rows(rows)},
        format="json",
    ).json()
    np.testing.assert_allclose(probabilities, np.array(platform["probabilities"]), atol=2e-6)
    assert list(labels) == platform["classes"]
    # both members are in the graph, the booster as its ONNX twin's tree ensemble
    classifiers = [node for node in onnx_graph_nodes(model) if node.endswith("Classifier")]
    assert sorted(classifiers) == ["TreeEnsembleClassifier", "TreeEnsembleClassifier"]


def onnx_graph_nodes(data: bytes) -> list[str]:
    import onnx

    return [node.op_type for node in onnx.load_from_string(data).graph.node]


def test_the_audit_records_the_digest_of_the_bytes_each_download_delivered(
    published_listing, buyer_user, buyer_api, top_up
):
    import hashlib

    from market.jobs.models import GlobalModelFile

    listing = published_listing(price_cents=100)
    top_up(buyer_user.organisation, 100)
    purchase_create(listing=listing, user=buyer_user)
    delivered = {}
    for file_format, package in (("onnx", False), ("raw_onnx", False), ("onnx", True)):
        link = buyer_api.post(
            f"/api/global-models/{listing.global_model_id}/download-links/",
            {"format": file_format, "package": package},
            format="json",
        ).json()["url"]
        response = buyer_api.get(link.replace("http://testserver", ""))
        content = b"".join(response.streaming_content)
        delivered[(file_format, package)] = hashlib.sha256(content).hexdigest()
        assert response["X-Content-SHA256"] == delivered[(file_format, package)]
    recorded = {
        (event.details["format"], event.details["package"]): event.details["sha256"]
        for event in AuditEvent.objects.filter(action="model.downloaded", outcome="success")
    }
    assert recorded == delivered
    stored = GlobalModelFile.objects.get(global_model_id=listing.global_model_id, format="onnx")
    assert delivered[("onnx", False)] == stored.sha256
    assert stored.sha256 not in (delivered[("raw_onnx", False)], delivered[("onnx", True)])
