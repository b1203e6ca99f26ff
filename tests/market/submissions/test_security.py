"""Hostile and tampered uploads at the web layer: refused before anything is stored or loaded."""

import pytest

from market.submissions.models import Submission
from tests.market.submissions.helpers import stored_files, submit
from tests.workers.modelio.payloads import (
    ACCEPTED_EXTENSIONS,
    TAMPERINGS,
    hostile_payloads,
    tamper_onnx_tree,
    tamper_xgboost_json,
    tamper_xgboost_ubjson,
)


@pytest.mark.parametrize("extension", ACCEPTED_EXTENSIONS)
def test_pickles_under_every_accepted_extension_are_refused_and_never_run(
    silo_api, federation_with_data, tmp_path, media_root, extension
):
    marker = tmp_path / "pwned"
    for kind, payload in hostile_payloads(marker).items():
        response = submit(silo_api, {f"model{extension}": payload})
        assert response.status_code == 415, (kind, response.json())
        assert "refuses" in response.json()["detail"] or "not" in response.json()["detail"], kind
    assert not marker.exists()
    assert not Submission.objects.exists() and stored_files(media_root) == []


TAMPERED_FORMATS = {
    "boosted.json": ("boosted.json", tamper_xgboost_json),
    "boosted.ubj": ("boosted.ubj", tamper_xgboost_ubjson),
    "forest.onnx": ("forest.onnx", tamper_onnx_tree),
}


@pytest.mark.parametrize("kind", TAMPERINGS)
@pytest.mark.parametrize("source", TAMPERED_FORMATS)
def test_tampered_trees_are_refused_with_a_reason(
    silo_api, federation_with_data, model_files, source, kind
):
    name, tamper = TAMPERED_FORMATS[source]
    response = submit(silo_api, {name: tamper(model_files[source], kind)})
    assert response.status_code == 400
    assert response.json()["detail"].startswith(f"'{name}': ")
    assert not Submission.objects.exists()
