"""An upload with an Idempotency-Key is stored once: the same key and files return the first submission."""

import json

import pytest

from market.budgets.models import PrivacyBudget
from market.submissions.models import Submission
from tests.market.submissions.helpers import submit


@pytest.mark.django_db
def test_the_same_key_and_files_return_the_first_submission_and_other_files_under_it_are_refused(
    silo_api, federation_with_data, model_files
):
    first = submit(silo_api, {"forest.onnx": model_files["forest.onnx"]}, idempotency_key="k-1")
    assert first.status_code == 202, first.json()
    assert first["Idempotent-Replayed"] == "false"
    again = submit(silo_api, {"forest.onnx": model_files["forest.onnx"]}, idempotency_key="k-1")
    assert again.status_code == 200, again.json()
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    other = submit(silo_api, {"boosted.json": model_files["boosted.json"]}, idempotency_key="k-1")
    assert other.status_code == 422
    assert "already used for another upload" in other.json()["detail"]
    assert Submission.objects.count() == 1
    too_long = submit(
        silo_api, {"boosted.json": model_files["boosted.json"]}, idempotency_key="k" * 201
    )
    assert too_long.status_code == 400


@pytest.mark.django_db
def test_an_l2_upload_sent_twice_with_its_key_is_charged_once(
    silo_api, silo_user, federation_with_data, model_files
):
    from tests.market.submissions.helpers import BOUND, L2_PARAMETERS

    epsilon = BOUND
    sent = [
        submit(
            silo_api,
            {"forest.onnx": model_files["forest.onnx"]},
            privacy_level="L2",
            declared_epsilon=epsilon,
            privacy_parameters=json.dumps(L2_PARAMETERS),
            idempotency_key="nightly-7",
        )
        for _ in range(2)
    ]
    assert [answer.status_code for answer in sent] == [202, 200]
    budget = PrivacyBudget.objects.get(organisation=silo_user.organisation)
    assert float(budget.spent) == pytest.approx(epsilon)
