"""Models read the view of the federation's features that fits their family (issue 19): submissions declare
it, the validation, the job's members, the global model and the prediction API each use the right one, and
uploads from before views existed keep reading the one-hot view."""

import io
import json
import zipfile

import numpy as np
import onnxruntime
import pytest

from market.storage import arrays_from_npz, artifact_read
from tests.conftest import api_client_for
from tests.market.jobs.helpers import launch, succeeded
from tests.market.submissions.helpers import submit
from workers.algorithms.auto_fusion import evaluation_halves


@pytest.fixture
def ordinal_students(federation_with_data, adult_training) -> dict[str, bytes]:
    """Two decision-tree students fitted on the ordinal view of the federation's features."""
    from sklearn.tree import DecisionTreeClassifier

    from workers.features import features_in_view
    from workers.modelio.export import export_sklearn_onnx

    features, labels = adult_training
    ordinal = features_in_view(
        features, federation_with_data.public_datasets.get().feature_spec, "ordinal"
    )
    assert ordinal.shape[1] == 14
    return {
        f"student-{half}.onnx": export_sklearn_onnx(
            DecisionTreeClassifier(max_depth=6, random_state=half).fit(ordinal[rows], labels[rows]),
            ordinal.shape[1],
        )
        for half, rows in enumerate(np.array_split(np.arange(len(labels)), 2))
    }


def test_an_ordinal_upload_declared_one_hot_is_refused_and_declared_ordinal_is_validated(
    federation_with_data, third_silo_user, ordinal_students
):
    from market.federations.membership import federation_join
    from market.submissions.models import Submission, SubmissionStatus
    from workers.submission_validation import submission_validate

    federation_join(federation=federation_with_data, user=third_silo_user)
    api = api_client_for(third_silo_user)
    refused = submit(api, ordinal_students, model_family="other_sklearn", privacy_level="L0")
    assert refused.status_code == 400
    assert "14" in refused.json()["detail"] and "98" in refused.json()["detail"]
    accepted = submit(
        api,
        ordinal_students,
        model_family="other_sklearn",
        privacy_level="L0",
        feature_view="ordinal",
    )
    assert accepted.status_code == 202, accepted.json()
    assert [file["info"]["feature_view"] for file in accepted.json()["model_files"]] == [
        "ordinal",
        "ordinal",
    ]
    submission_validate(submission_id=accepted.json()["id"])
    assert Submission.objects.get(id=accepted.json()["id"]).status == SubmissionStatus.VALID


@pytest.fixture
def mixed_submissions(fedkt_submissions, third_silo_user, ordinal_students):
    """Two old one-hot submissions (no declared view) and one ordinal submission."""
    from market.submissions.models import Submission
    from workers.submission_validation import submission_validate

    one_hot = fedkt_submissions[:2]
    response = submit(
        api_client_for(third_silo_user),
        ordinal_students,
        model_family="other_sklearn",
        privacy_level="L0",
        feature_view="ordinal",
    )
    assert response.status_code == 202, response.json()
    submission_validate(submission_id=response.json()["id"])
    return [*one_hot, Submission.objects.get(id=response.json()["id"])]


def predicted_by_api(operator, model, rows) -> np.ndarray:
    from market.commerce.predictions import model_predict

    records = json.loads(rows.to_json(orient="records"))
    return np.asarray(
        model_predict(user=operator, global_model_id=model.id, rows=records)["probabilities"]
    )


def test_a_forest_global_model_over_mixed_members_reads_the_ordinal_view_everywhere(
    eager_celery, operator, mixed_submissions, adult_frame, django_capture_on_commit_callbacks
):  # noqa: F811
    from workers.features import encode_features, features_in_view

    federation = mixed_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L0",
        submissions=[s.id for s in mixed_submissions],
        seed=3,
        parameters={
            "partitions": 2,
            "query": 0.5,
            "final_model": {"family": "random_forest", "n_estimators": 10},
            "vote": "consistent_hard",
        },
    )
    job = succeeded(body)
    model = job.global_model
    assert (model.lineage["feature_view"], model.n_features) == ("ordinal", 14)
    assert (
        api_client_for(operator).get(f"/api/global-models/{model.id}/").json()["feature_view"]
        == "ordinal"
    )
    session = onnxruntime.InferenceSession(
        artifact_read(model.files.get(format="onnx").stored_name)
    )
    spec = job.public_dataset.feature_spec
    split = arrays_from_npz(job.evaluation_split.data_file)
    probabilities = session.run(
        None, {"features": features_in_view(split["features"], spec, "ordinal")}
    )[1]
    report = evaluation_halves(split["labels"], seed=job.seed)[
        1
    ]  # every kind reports on it (issue 39)
    correct = probabilities[report].argmax(axis=1) == split["labels"][report]
    assert abs(correct.mean() - model.metrics["accuracy"]) < 1e-9
    rows = adult_frame.iloc[2500:2510].drop(columns=["income"])
    local = session.run(None, {"features": encode_features(rows, spec, view="ordinal")})[1]
    np.testing.assert_allclose(predicted_by_api(operator, model, rows), local, atol=1e-5)


def test_an_ensemble_of_mixed_members_records_each_members_view_and_predicts_through_the_api(
    eager_celery, operator, mixed_submissions, adult_frame, django_capture_on_commit_callbacks
):  # noqa: F811
    federation = mixed_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="ensemble",
        privacy_level="L0",
        submissions=[s.id for s in mixed_submissions],
        parameters={},
        seed=1,
    )
    job = succeeded(body)
    with zipfile.ZipFile(
        io.BytesIO(artifact_read(job.global_model.files.get().stored_name))
    ) as archive:
        manifest = json.loads(archive.read("manifest.json"))
    assert [member["feature_view"] for member in manifest["members"]] == ["one_hot"] * 4 + [
        "ordinal"
    ] * 2
    probabilities = predicted_by_api(
        operator, job.global_model, adult_frame.iloc[2500:2510].drop(columns=["income"])
    )
    assert probabilities.shape == (10, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, atol=1e-5)
