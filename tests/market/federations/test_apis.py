import io
import json
import tracemalloc

import numpy as np
import pytest

from market.accounts.services import user_create
from market.federations.models import EvaluationSplit, Federation, PublicDataset
from tests.conftest import api_client_for, csv_bytes, run_at_once
from tests.workers.helpers import zeros_npz

FEDERATION = {
    "name": "Adult income",
    "description": "Census income.",
    "class_labels": ["<=50K", ">50K"],
    "label_column": "income",
    "allowed_privacy_levels": ["L1", "L2"],
    "default_privacy_level": "L1",
    "default_parameters": {"gamma": 0.04},
}


def stored_files(media_root) -> list:
    return [path for path in media_root.rglob("*") if path.is_file()] if media_root.exists() else []


def upload(api, url, data: bytes, name="data.csv"):
    file = io.BytesIO(data)
    file.name = name
    return api.post(url, {"file": file}, format="multipart")


def test_operator_creates_a_federation(operator_api):
    response = operator_api.post("/api/federations/", FEDERATION, format="json")
    assert response.status_code == 201
    assert response.json()["slug"] == "adult-income"
    assert response.json()["allowed_privacy_levels"] == ["L1", "L2"]


def test_silo_cannot_create_a_federation(silo_api):
    response = silo_api.post("/api/federations/", FEDERATION, format="json")
    assert response.status_code == 403
    assert response.json() == {"detail": "Only market operators can create federations."}
    assert not Federation.objects.exists()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"class_labels": ["yes", "yes"]}, "distinct"),
        ({"default_privacy_level": "L0"}, "must be one of the allowed levels"),
        ({"name": "!!!"}, "at least one letter"),
    ],
)
def test_federation_create_explains_bad_input(operator_api, change, message):
    response = operator_api.post("/api/federations/", {**FEDERATION, **change}, format="json")
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not Federation.objects.exists()


def test_federation_create_refuses_a_duplicate_name(operator_api, federation):
    response = operator_api.post("/api/federations/", FEDERATION, format="json")
    assert response.status_code == 409
    assert Federation.objects.count() == 1


def test_unknown_privacy_level_is_a_field_error(operator_api):
    response = operator_api.post(
        "/api/federations/", {**FEDERATION, "allowed_privacy_levels": ["L9"]}, format="json"
    )
    assert response.status_code == 400
    assert "allowed_privacy_levels" in response.json()


def test_silo_joins_once_and_joining_again_changes_nothing(silo_api, federation):
    first = silo_api.post("/api/federations/adult-income/join/")
    again = silo_api.post("/api/federations/adult-income/join/")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["is_member"] is True
    assert federation.members.count() == 1


def test_operator_without_silo_cannot_join(operator_api, federation):
    assert operator_api.post("/api/federations/adult-income/join/").status_code == 403


def test_unknown_federation_is_404(silo_api, db):
    response = silo_api.get("/api/federations/nope/")
    assert response.status_code == 404
    assert response.json() == {"detail": "There is no federation 'nope'."}


def test_public_dataset_upload_infers_spec_encodes_and_drops_labels(
    operator_api, federation, adult_frame
):
    with_labels = csv_bytes(adult_frame.iloc[:500])
    response = upload(operator_api, "/api/federations/adult-income/public-dataset/", with_labels)
    assert response.status_code == 201
    body = response.json()
    assert (body["n_rows"], body["source_format"]) == (500, "csv")
    names = [column["name"] for column in body["feature_spec"]["columns"]]
    assert "income" not in names and "age" in names
    assert body["n_features"] == len(body["feature_spec"]["feature_names"])


def test_public_dataset_upload_reads_parquet(operator_api, federation, adult_frame):
    buffer = io.BytesIO()
    adult_frame.iloc[:300].to_parquet(buffer)
    response = upload(
        operator_api,
        "/api/federations/adult-income/public-dataset/",
        buffer.getvalue(),
        "renamed.csv",
    )
    assert response.status_code == 201
    assert response.json()["source_format"] == "parquet"


@pytest.mark.parametrize(
    "data, message",
    [
        (b"age,workclass\n30,Private\n31,Private,extra,fields\n", "malformed"),
        (b"age,workclass\n", "no rows"),
        (b"\xff\xfe\x00\x01", "UTF-8"),
    ],
)
def test_public_dataset_upload_explains_bad_files_and_leaves_nothing(
    operator_api, federation, media_root, data, message
):
    response = upload(operator_api, "/api/federations/adult-income/public-dataset/", data)
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not PublicDataset.objects.exists()
    assert stored_files(media_root) == []


def test_a_small_npz_of_zeros_unpacking_past_the_memory_budget_is_refused_before_loading(
    operator_api, federation, media_root, settings
):
    """0.4 MB that unpack to 392 MB, inside every row, column, cell and archive limit (issue 32, item 14)."""
    assert (
        settings.ONEFOLD_TABLE_MAX_MEMORY_BYTES == 256 * 1024**2
    )  # the default: 4 × the 64 MiB upload limit
    data = zeros_npz((490_000, 100))
    tracemalloc.start()
    try:
        response = upload(
            operator_api, "/api/federations/adult-income/public-dataset/", data, name="x.npz"
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (response.status_code, response.json()) == (
        400,
        {
            "detail": "The NPZ arrays take 373.8 MB once unpacked; the market reads at most 256.0 MB of values "
            "from one table. Send fewer rows or columns, or a CSV file."
        },
    )
    assert (
        peak < 20 * 1024**2
    )  # nothing was unpacked (numpy reports its allocations to tracemalloc)
    assert not PublicDataset.objects.exists()
    assert stored_files(media_root) == []


def test_public_dataset_upload_refuses_an_empty_file(operator_api, federation):
    response = upload(operator_api, "/api/federations/adult-income/public-dataset/", b"")
    assert response.status_code == 400
    assert response.json() == {"file": ["The submitted file is empty."]}


def test_public_dataset_upload_refuses_a_duplicate(operator_api, federation, adult_public_csv):
    assert (
        upload(
            operator_api, "/api/federations/adult-income/public-dataset/", adult_public_csv
        ).status_code
        == 201
    )
    response = upload(
        operator_api, "/api/federations/adult-income/public-dataset/", adult_public_csv
    )
    assert response.status_code == 409
    assert PublicDataset.objects.count() == 1


def test_silo_cannot_upload_public_data(silo_api, federation, adult_public_csv):
    assert (
        upload(
            silo_api, "/api/federations/adult-income/public-dataset/", adult_public_csv
        ).status_code
        == 403
    )


def test_member_downloads_encoded_features_and_spec(silo_api, federation_with_data):
    metadata = silo_api.get("/api/federations/adult-income/public-dataset/").json()
    features = silo_api.get("/api/federations/adult-income/public-dataset/features.npz")
    assert features.status_code == 200
    with np.load(io.BytesIO(features.content), allow_pickle=False) as arrays:
        assert arrays.files == ["features"]
        assert arrays["features"].shape == (2000, metadata["n_features"])
        assert arrays["features"].dtype == np.float32
    spec = silo_api.get("/api/federations/adult-income/public-dataset/feature-spec.json")
    assert json.loads(spec.content) == metadata["feature_spec"]


@pytest.mark.parametrize("path", ["", "features.npz", "feature-spec.json"])
def test_non_member_cannot_download_public_data(other_silo_api, federation_with_data, path):
    response = other_silo_api.get(f"/api/federations/adult-income/public-dataset/{path}")
    assert response.status_code == 403
    advice = (
        " A buyer reads the feature specification of a model it bought at "
        "/api/global-models/<id>/feature-spec.json."
        if path == "feature-spec.json"
        else ""
    )
    assert response.json() == {
        "detail": f"Your organisation is not a member of 'adult-income'; join it first.{advice}"
    }


def test_public_data_requires_a_token(client, federation_with_data):
    assert (
        client.get("/api/federations/adult-income/public-dataset/features.npz").status_code == 401
    )


def test_evaluation_split_is_encoded_and_only_operators_read_its_labels(
    operator_api, silo_api, federation_with_data
):
    assert (
        operator_api.get("/api/federations/adult-income/evaluation-split/").json()["n_rows"] == 500
    )
    data = operator_api.get("/api/federations/adult-income/evaluation-split/data.npz")
    with np.load(io.BytesIO(data.content), allow_pickle=False) as arrays:
        assert set(arrays["labels"].tolist()) <= {0, 1}
        assert arrays["features"].shape[0] == 500
    for path in ["", "data.npz"]:
        response = silo_api.get(f"/api/federations/adult-income/evaluation-split/{path}")
        assert response.status_code == 403
        assert response.json() == {"detail": "Only market operators can read evaluation splits."}


def test_evaluation_split_without_label_column_is_refused(
    operator_api, federation_with_data, adult_frame, media_root
):
    before = stored_files(media_root)
    response = upload(
        operator_api,
        "/api/federations/adult-income/evaluation-split/",
        csv_bytes(adult_frame.iloc[2600:2700].drop(columns=["income"])),
    )
    assert response.status_code == 400
    assert response.json() == {
        "detail": "The evaluation split has no 'income' column; it needs the federation's label column."
    }
    assert EvaluationSplit.objects.count() == 1
    assert stored_files(media_root) == before


def test_evaluation_split_with_unknown_label_is_refused(
    operator_api, federation_with_data, adult_frame
):
    rows = adult_frame.iloc[2600:2700].assign(income="maybe")
    response = upload(
        operator_api, "/api/federations/adult-income/evaluation-split/", csv_bytes(rows)
    )
    assert response.status_code == 400
    assert "'maybe'" in response.json()["detail"]


def test_evaluation_split_needs_public_data_first(operator_api, federation, adult_evaluation_csv):
    response = upload(
        operator_api, "/api/federations/adult-income/evaluation-split/", adult_evaluation_csv
    )
    assert response.status_code == 404
    assert "has no public dataset yet" in response.json()["detail"]


def test_upload_larger_than_the_limit_is_stopped_with_413(
    operator_api, federation, settings, adult_public_csv, media_root
):
    settings.ONEFOLD_MAX_UPLOAD_BYTES = 10_000
    response = upload(
        operator_api, "/api/federations/adult-income/public-dataset/", adult_public_csv
    )
    assert response.status_code == 413
    assert "larger than the" in response.json()["detail"]
    assert not PublicDataset.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_members_of_one_silo_joining_at_once_make_one_membership(federation, silo_user):
    colleague = user_create(
        username="sam-colleague", password="colleague-password", organisation=silo_user.organisation
    )
    statuses = run_at_once(
        lambda user: api_client_for(user).post("/api/federations/adult-income/join/").status_code,
        [silo_user, colleague],
    )
    assert sorted(statuses) == [200, 201]
    assert federation.members.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_same_public_file_uploaded_twice_at_once_makes_one_version_and_one_409(
    federation, operator, adult_public_csv, media_root
):
    statuses = run_at_once(
        lambda client: (
            upload(
                client, "/api/federations/adult-income/public-dataset/", adult_public_csv
            ).status_code
        ),
        [api_client_for(operator), api_client_for(operator)],
    )
    assert sorted(statuses) == [201, 409]
    assert PublicDataset.objects.count() == 1
    assert len(stored_files(media_root)) == 1
