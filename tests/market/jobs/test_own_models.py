"""A silo's own model (issue 31) beside its FedKT students: stored last and marked, refused where it cannot be used,
used by L0 ensembles and the silo baselines, never in a FedKT vote, and left out of L1 jobs with a statement."""

import numpy as np
import onnxruntime
import pytest

from market.budgets.models import BudgetEntry
from market.jobs.models import Job, JobLogEntry
from market.storage import arrays_from_npz, artifact_read, sha256_of
from market.submissions.models import ModelFile, Submission
from tests.conftest import api_client_for
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import launch, succeeded
from tests.market.submissions.helpers import stored_files, submit
from workers.algorithms.auto_fusion import evaluation_halves
from workers.modelio.bundle import bundle_read


@pytest.fixture(scope="session")
def own_model_files(adult_training) -> list[bytes]:
    """Per silo of the job fixtures, a random forest on all of its slice of Adult, as ONNX."""
    from sklearn.ensemble import RandomForestClassifier

    from workers.modelio.export import export_sklearn_onnx

    features, labels = adult_training
    return [
        export_sklearn_onnx(
            RandomForestClassifier(n_estimators=10, max_depth=6, random_state=silo).fit(
                features[rows], labels[rows]
            ),
            features.shape[1],
        )
        for silo, rows in enumerate(np.array_split(np.arange(len(labels)), 3))
    ]


def _with_own_model(students: dict, own: bytes) -> dict:
    # the own model is listed first: the market stores it last whatever the upload order
    return {"own-model.onnx": own, **students}


@pytest.fixture
def own_model_submissions(
    federation_with_data,
    silo_user,
    other_silo_user,
    third_silo_user,
    fedkt_student_files,
    own_model_files,
):
    """Three valid L0 submissions of two students and the silo's own model each."""
    from market.federations.membership import federation_join
    from market.submissions.validation import submission_validate

    ids = []
    users = (silo_user, other_silo_user, third_silo_user)
    for user, students, own in zip(users, fedkt_student_files, own_model_files):
        federation_join(federation=federation_with_data, user=user)
        response = submit(
            api_client_for(user),
            _with_own_model(students, own),
            model_family="logistic_regression",
            n_local_examples=666,
            privacy_level="L0",
            own_model_file="own-model.onnx",
            own_model_validation_score=0.83,
            partitions=2,
            teachers=5,
        )
        assert response.status_code == 202, response.json()
        ids.append(response.json()["id"])
    for submission_id in ids:
        submission_validate(submission_id=submission_id)
    submissions = list(Submission.objects.filter(id__in=ids).order_by("id"))
    assert [s.status for s in submissions] == ["valid"] * 3, [
        s.rejection_reason for s in submissions
    ]
    return submissions


def test_an_own_model_is_stored_last_marked_as_the_own_model_and_shown_with_its_score(
    own_model_submissions,
):
    submission = own_model_submissions[0]
    files = list(ModelFile.objects.filter(submission=submission).order_by("position"))
    assert [f.original_name for f in files] == [
        "student-0.onnx",
        "student-1.onnx",
        "own-model.onnx",
    ]
    assert [f.info.get("role") for f in files] == [None, None, "own"]
    body = api_client_for(submission.submitted_by).get(f"/api/submissions/{submission.id}/").json()
    assert (body["own_model_validation_score"], body["partitions"], body["teachers"]) == (
        0.83,
        2,
        5,
    )
    assert body["model_files"][2]["info"]["role"] == "own"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"privacy_level": "L1"},
            "Your own model is trained without noise, so only an L0 submission may carry one, not a L1 one: "
            "upload your students without 'own-model.onnx', or submit at L0.",
        ),
        (
            {"own_model_file": "forest.onnx"},
            "own_model_file names 'forest.onnx', which is not one of the uploaded files (own-model.onnx, "
            "student-0.onnx, student-1.onnx).",
        ),
        (
            {"own_model_validation_score": None},
            "Declare your own model's accuracy on your held-out rows as own_model_validation_score.",
        ),
        (
            {"partitions": 3},
            "You declared s = 3 partitions but uploaded 2 student file(s); FedKT trains one student per "
            "partition.",
        ),
    ],
)
def test_an_upload_with_an_own_model_it_may_not_carry_is_refused_with_a_sentence_and_nothing_stored(
    federation_with_data,
    silo_user,
    fedkt_student_files,
    own_model_files,
    settings,
    changes,
    message,
):
    from pathlib import Path

    fields = {
        "privacy_level": "L0",
        "own_model_file": "own-model.onnx",
        "own_model_validation_score": 0.8,
        "partitions": 2,
        **changes,
    }
    response = submit(
        api_client_for(silo_user),
        _with_own_model(fedkt_student_files[0], own_model_files[0]),
        **{name: value for name, value in fields.items() if value is not None},
    )
    assert response.status_code == 400, response.json()
    assert message in str(response.json())
    assert not Submission.objects.exists() and not ModelFile.objects.exists()
    assert not BudgetEntry.objects.exists()
    assert stored_files(Path(settings.MEDIA_ROOT)) == []


def test_a_federation_that_does_not_accept_own_models_refuses_one(
    federation_with_data, silo_user, fedkt_student_files, own_model_files
):
    federation_with_data.accepts_own_models = False
    federation_with_data.save()
    assert (
        api_client_for(silo_user)
        .get(f"/api/federations/{federation_with_data.slug}/")
        .json()["accepts_own_models"]
        is False
    )
    response = submit(
        api_client_for(silo_user),
        _with_own_model(fedkt_student_files[0], own_model_files[0]),
        privacy_level="L0",
        own_model_file="own-model.onnx",
        own_model_validation_score=0.8,
    )
    assert response.status_code == 400
    assert "'adult-income' does not accept silos' own models" in str(response.json())
    assert not Submission.objects.exists()


def _own_model_metrics(submission, split, rows) -> float:
    own = ModelFile.objects.get(submission=submission, info__role="own")
    session = onnxruntime.InferenceSession(artifact_read(own.stored_name))
    predicted = session.run(None, {"features": split["features"][rows].astype(np.float32)})[0]
    return float(np.mean(predicted == split["labels"][rows]))


def test_an_l0_ensemble_bundles_the_silos_own_models_and_the_baselines_say_they_measured_them(
    eager_celery, operator, own_model_submissions, django_capture_on_commit_callbacks
):
    federation = own_model_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="ensemble",
        privacy_level="L0",
        parameters={},
        seed=1,
    )
    job = succeeded(body)
    model = job.global_model
    split = arrays_from_npz(job.evaluation_split.data_file)
    report = evaluation_halves(split["labels"], seed=job.seed)[
        1
    ]  # every kind reports on it (issue 39)
    for (
        submission
    ) in own_model_submissions:  # each silo measured with its own model, computed independently
        measured = model.submission_metrics[str(submission.id)]
        assert measured["measured_with"] == "own_model"
        assert measured["accuracy"] == pytest.approx(_own_model_metrics(submission, split, report))
    assert model.baselines["best_single_silo"]["measured_with"] == "own_model"
    assert model.baselines["average_silo"]["measured_with"] == {"own_model": 3, "students": 0}
    bundle = model.files.get(format="bundle")
    manifest, members = bundle_read(artifact_read(bundle.stored_name))
    own = {
        ModelFile.objects.get(submission=submission, info__role="own").sha256
        for submission in own_model_submissions
    }
    assert {sha256_of(member.data) for member in members} == own  # the students are not shipped
    assert [entry["weight"] for entry in manifest["members"]] == pytest.approx([1 / 3] * 3)


def test_an_l0_fedkt_job_votes_with_the_students_only_and_records_each_silos_design(
    eager_celery, operator, own_model_submissions, django_capture_on_commit_callbacks
):
    federation = own_model_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L0",
        parameters=FAST_FEDKT,
        seed=7,
    )
    job = succeeded(body)
    assert "teachers" not in job.parameters
    designs = job.global_model.lineage["fusion"]["silo_designs"]
    assert designs == {
        str(submission.id): {"students": 2, "teachers": 5} for submission in own_model_submissions
    }


def test_an_l1_job_leaves_the_own_models_out_says_so_and_charges_what_the_students_alone_cost(
    eager_celery,
    operator,
    own_model_submissions,
    fedkt_submissions,
    django_capture_on_commit_callbacks,
):
    federation = own_model_submissions[0].federation
    parameters = {**FAST_FEDKT, "query": 20, "privacy": {"gamma": 0.02}}

    def run(submissions):
        body = launch(
            operator,
            federation,
            django_capture_on_commit_callbacks,
            kind="fedkt",
            privacy_level="L1",
            parameters=parameters,
            submissions=[submission.id for submission in submissions],
            seed=3,
        )
        return succeeded(body)

    with_own = run(own_model_submissions)
    log = list(JobLogEntry.objects.filter(job=with_own).values_list("message", flat=True))
    assert (
        "3 submission(s) carry their silo's own model, which this L1 job does not use: an own model is "
        "trained without noise, so only L0 jobs use it. Their FedKT students vote, and their silo "
        "baselines are their students'." in log
    )
    metrics = with_own.global_model.submission_metrics
    assert {metrics[str(s.id)]["measured_with"] for s in own_model_submissions} == {"students"}
    assert with_own.global_model.baselines["best_single_silo"]["measured_with"] == "students"
    without_own = run(fedkt_submissions)  # the same students, uploaded without own models
    report, reference = (
        job.global_model.privacy_report["data_independent"] for job in (with_own, without_own)
    )
    assert report["epsilon"] == reference["epsilon"] and report["partitions"] == 2
    assert Job.objects.count() == 2
