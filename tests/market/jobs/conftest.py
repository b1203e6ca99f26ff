"""Fixtures of the job tests: a federation with three silos, each with a validated FedKT submission of s = 2
students (logistic regressions trained on halves of its own slice of Adult), exported to ONNX."""

import numpy as np
import pytest

from tests.market.submissions.helpers import submit

SILOS = ("sam-silo", "bea-bank", "cal-clinic")


@pytest.fixture(scope="session")
def fedkt_student_files(adult_training) -> list[dict[str, bytes]]:
    """Per silo, two student models (one per partition) as ONNX bytes."""
    from sklearn.linear_model import LogisticRegression

    from workers.modelio.export import export_sklearn_onnx

    features, labels = adult_training
    files = []
    for silo, rows in enumerate(np.array_split(np.arange(len(labels)), len(SILOS))):
        students = {}
        for partition, half in enumerate(np.array_split(rows, 2)):
            model = LogisticRegression(max_iter=300, C=0.5 + silo + partition).fit(
                features[half], labels[half]
            )
            students[f"student-{partition}.onnx"] = export_sklearn_onnx(model, features.shape[1])
        files.append(students)
    return files


@pytest.fixture
def third_silo_user(db):
    from market.accounts.services import organisation_create, user_create

    clinic = organisation_create(name="Fabrikam Clinic")
    return user_create(username="cal-clinic", password="clinic-password", organisation=clinic)


@pytest.fixture
def fedkt_submissions(
    federation_with_data, silo_user, other_silo_user, third_silo_user, fedkt_student_files
):
    """Three valid FedKT submissions (L1, s = 2), one per silo, validated by the real validation service."""
    from market.federations.membership import federation_join
    from market.submissions.models import Submission, SubmissionStatus
    from market.submissions.validation import submission_validate
    from tests.conftest import api_client_for

    ids = []
    for user, files in zip((silo_user, other_silo_user, third_silo_user), fedkt_student_files):
        federation_join(federation=federation_with_data, user=user)
        response = submit(
            api_client_for(user),
            files,
            model_family="logistic_regression",
            n_local_examples=666,
            privacy_level="L0",
        )
        assert response.status_code == 202, response.json()
        ids.append(response.json()["id"])
    for submission_id in ids:
        submission_validate(submission_id=submission_id)
    submissions = list(Submission.objects.filter(id__in=ids).order_by("id"))
    assert [s.status for s in submissions] == [SubmissionStatus.VALID] * 3, [
        s.rejection_reason for s in submissions
    ]
    return submissions


@pytest.fixture
def record_submissions(
    federation_with_data, silo_user, other_silo_user, third_silo_user, fedkt_student_files
):
    """Three valid submissions of s = 2 students, each fitted on its own half of its silo's rows (the fixtures'
    students are), declared with ``disjoint_partitions``, in a federation whose members accept both units."""
    from market.federations.membership import federation_join
    from market.federations.models import Federation
    from market.submissions.models import Submission, SubmissionStatus
    from market.submissions.validation import submission_validate
    from tests.conftest import api_client_for

    Federation.objects.filter(id=federation_with_data.id).update(privacy_units=["party", "record"])
    ids = []
    for user, files in zip((silo_user, other_silo_user, third_silo_user), fedkt_student_files):
        federation_join(federation=federation_with_data, user=user)
        response = submit(
            api_client_for(user),
            files,
            model_family="logistic_regression",
            n_local_examples=666,
            privacy_level="L0",
            partitions=2,
            disjoint_partitions="true",
        )
        assert response.status_code == 202, response.json()
        assert response.json()["disjoint_partitions"] is True
        ids.append(response.json()["id"])
    for submission_id in ids:
        submission_validate(submission_id=submission_id)
    submissions = list(Submission.objects.filter(id__in=ids).order_by("id"))
    assert [s.status for s in submissions] == [SubmissionStatus.VALID] * 3
    return submissions


#: A quick FedKT job with the paper's vote named (an L0 job that names none chooses with ``auto``; a job that is
#: not about the vote names one, which validate does not store: the stored parameters stay these three).
FAST_FEDKT = {
    "partitions": 2,
    "query": 0.25,
    "final_model": {"family": "logistic_regression"},
    "vote": "consistent_hard",
}
