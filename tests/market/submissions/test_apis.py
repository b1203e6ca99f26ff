import json

import pytest

from market.submissions.models import ModelFile, Submission, SubmissionOutbox, SubmissionStatus
from tests.conftest import api_client_for, run_at_once
from tests.market.submissions.helpers import stored_files, submit


@pytest.mark.parametrize(
    "name", ["forest.onnx", "boosted.json", "boosted.ubj", "network.safetensors"]
)
def test_member_submits_a_model_in_each_accepted_format(
    silo_api, federation_with_data, model_files, name
):
    response = submit(silo_api, {name: model_files[name]})
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["status"] == "pending"
    assert body["model_files"][0]["original_name"] == name
    assert body["model_files"][0]["info"]["classes"] == [0, 1]


def test_submission_with_several_files_and_l2_declaration(
    silo_api, federation_with_data, model_files
):
    response = submit(
        silo_api,
        {"a.onnx": model_files["forest.onnx"], "b.json": model_files["boosted.json"]},
        privacy_level="L2",
        declared_epsilon=2.5,
        label_distribution=json.dumps([1500, 500]),
        privacy_parameters=json.dumps(L2_PARAMETERS),
    )
    assert response.status_code == 202, response.json()
    assert [file["format"] for file in response.json()["model_files"]] == ["onnx", "xgboost-json"]
    assert response.json()["declared_epsilon"] == 2.5
    report = response.json()["privacy_report"]
    assert (report["unit"], report["mechanism"], report["n_queries"], report["data_dependent"]) == (
        "example-level",
        "laplace",
        60,
        False,
    )
    assert report["epsilon"] == pytest.approx(1.8425, abs=1e-4)


L2_PARAMETERS = {"gamma": 0.04, "delta": 1e-5, "partitions": 2, "teachers": 5, "queries": 30}


@pytest.mark.parametrize(
    "parameters, epsilon, message",
    [
        (L2_PARAMETERS, 1.0, "You declared ε = 1, but these parameters spend ε = 1.842"),
        ({**L2_PARAMETERS, "queries": None}, 2.5, "are not valid"),
        (
            {key: value for key, value in L2_PARAMETERS.items() if key != "queries"},
            2.5,
            "'queries'",
        ),
        ({**L2_PARAMETERS, "sigma": 30.0}, 2.5, "one noise parameter"),
        ({**L2_PARAMETERS, "gamma": -1}, 2.5, "are not valid"),
        ({**L2_PARAMETERS, "delta": 2}, 2.5, "are not valid"),
    ],
)
def test_l2_declarations_are_checked_against_the_privacy_accountant(
    silo_api, federation_with_data, model_files, parameters, epsilon, message
):
    response = submit(
        silo_api,
        {"forest.onnx": model_files["forest.onnx"]},
        privacy_level="L2",
        declared_epsilon=epsilon,
        privacy_parameters=json.dumps(parameters),
    )
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not Submission.objects.exists()


@pytest.mark.parametrize(
    "changes, status, message",
    [
        ({"model_family": "quantum_forest"}, 400, "is not a model family Onefold knows"),
        ({"privacy_level": "L2"}, 400, "must declare the positive ε"),
        ({"declared_epsilon": 1.0}, 400, "Only L2 submissions declare an ε"),
        ({"label_distribution": json.dumps([10, 20])}, 400, "adds up to 30 examples"),
        ({"label_distribution": json.dumps([2000])}, 400, "must list 2 non-negative"),
        ({"privacy_parameters": "[1]"}, 400, "JSON object"),
        ({"local_validation_score": 1.5}, 400, "less than or equal to 1"),
        ({"federation": "nope"}, 404, "There is no federation 'nope'."),
    ],
)
def test_submission_create_explains_bad_metadata_and_stores_nothing(
    silo_api, federation_with_data, model_files, media_root, changes, status, message
):
    response = submit(silo_api, {"forest.onnx": model_files["forest.onnx"]}, **changes)
    assert response.status_code == status
    assert message in json.dumps(response.json(), ensure_ascii=False)
    assert not Submission.objects.exists() and not ModelFile.objects.exists()
    assert stored_files(media_root) == []


def test_submission_refuses_a_privacy_level_the_federation_does_not_allow(
    silo_api, federation_with_data, model_files
):
    federation_with_data.allowed_privacy_levels = ["L1", "L2"]
    federation_with_data.save()
    response = submit(silo_api, {"forest.onnx": model_files["forest.onnx"]}, privacy_level="L0")
    assert response.status_code == 400
    assert response.json() == {"detail": "The federation allows privacy levels L1, L2, not L0."}


def test_model_expecting_another_number_of_features_is_refused(silo_api, federation_with_data):
    from sklearn.ensemble import RandomForestClassifier

    from workers.modelio.export import export_sklearn_onnx

    forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(
        [[0.0] * 14, [1.0] * 14], [0, 1]
    )
    response = submit(silo_api, {"narrow.onnx": export_sklearn_onnx(forest, 14)})
    assert response.status_code == 400
    assert "14" in response.json()["detail"] and "'narrow.onnx'" in response.json()["detail"]
    assert not Submission.objects.exists()


def test_model_predicting_classes_the_federation_lacks_is_refused(
    silo_api, federation_with_data, adult_training
):
    from xgboost import XGBClassifier

    from workers.modelio.export import export_xgboost_json

    features, labels = adult_training
    three_classes = XGBClassifier(n_estimators=2, max_depth=2).fit(
        features[:300], labels[:300] + (features[:300, 0] > 1)
    )
    response = submit(silo_api, {"three.json": export_xgboost_json(three_classes)})
    assert response.status_code == 400
    assert "class" in response.json()["detail"]


def test_duplicate_submission_is_refused(silo_api, federation_with_data, model_files, media_root):
    assert submit(silo_api, {"forest.onnx": model_files["forest.onnx"]}).status_code == 202
    files_after_first = stored_files(media_root)
    response = submit(silo_api, {"again.onnx": model_files["forest.onnx"]})
    assert response.status_code == 409
    assert response.json() == {
        "detail": "Your organisation already submitted exactly these model files to this federation."
    }
    assert Submission.objects.count() == 1 and stored_files(media_root) == files_after_first


def test_non_member_cannot_submit(other_silo_api, federation_with_data, model_files):
    response = submit(other_silo_api, {"forest.onnx": model_files["forest.onnx"]})
    assert response.status_code == 403
    assert not Submission.objects.exists()


def test_submission_without_files_is_refused(silo_api, federation_with_data):
    response = submit(silo_api, {})
    assert response.status_code == 400
    assert "files" in response.json()


def test_missing_token_is_401(client, federation_with_data):
    assert client.get("/api/submissions/").status_code == 401


def test_silo_never_reads_another_silos_submissions(
    silo_api, other_silo_api, operator_api, federation_with_data, model_files
):
    submission_id = submit(silo_api, {"forest.onnx": model_files["forest.onnx"]}).json()["id"]
    assert [row["id"] for row in silo_api.get("/api/submissions/").json()["results"]] == [
        submission_id
    ]
    assert other_silo_api.get("/api/submissions/").json()["count"] == 0
    response = other_silo_api.get(f"/api/submissions/{submission_id}/")
    assert response.status_code == 404
    assert response.json() == {
        "detail": f"There is no submission #{submission_id} that your organisation can see."
    }
    assert (
        operator_api.get(f"/api/submissions/{submission_id}/").json()["organisation"]
        == "Northwind Hospital"
    )
    assert [
        row["id"]
        for row in operator_api.get("/api/submissions/?federation=adult-income").json()["results"]
    ] == [submission_id]


def test_submission_list_pages_newest_first(silo_api, federation_with_data, model_files):
    ids = [submit(silo_api, {name: data}).json()["id"] for name, data in model_files.items()]
    first_page = silo_api.get("/api/submissions/?limit=3").json()
    assert first_page["count"] == 4
    assert [row["id"] for row in first_page["results"]] == ids[::-1][:3]
    assert [row["id"] for row in silo_api.get(first_page["next"]).json()["results"]] == [ids[0]]


def test_submission_is_queued_for_validation_on_commit_through_the_outbox(
    silo_api, federation_with_data, model_files, django_capture_on_commit_callbacks, monkeypatch
):
    queued = []
    monkeypatch.setattr(
        "workers.tasks.submission_validate_task.apply_async",
        lambda args, **options: queued.append(args),
    )
    with django_capture_on_commit_callbacks(execute=True):
        submission_id = submit(silo_api, {"forest.onnx": model_files["forest.onnx"]}).json()["id"]
    assert queued == [(submission_id,)]
    assert SubmissionOutbox.objects.get(submission_id=submission_id).published_at is not None
    assert Submission.objects.get(id=submission_id).status == SubmissionStatus.PENDING


@pytest.mark.django_db(transaction=True)
def test_the_same_files_submitted_twice_at_once_make_one_submission_and_one_409(
    federation_with_data, silo_user, model_files, media_root
):
    statuses = run_at_once(
        lambda client: submit(client, {"forest.onnx": model_files["forest.onnx"]}).status_code,
        [api_client_for(silo_user), api_client_for(silo_user)],
    )
    assert sorted(statuses) == [202, 409]
    assert Submission.objects.count() == 1 and ModelFile.objects.count() == 1
    assert len(stored_files(media_root)) == 1
