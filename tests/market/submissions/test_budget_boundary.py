"""An L2 submission at the edge of its silo's budget: the exact remainder is accepted, a millionth more is refused by
the service with the budget's sentence and a "budget.refused" audit event, and nothing is charged or stored."""

import json
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from market.audit.models import AuditEvent
from market.budgets.ledger import BudgetAmounts
from market.budgets.models import BudgetEntry, PrivacyBudget
from market.constraints import violated_constraint
from market.submissions.models import Submission
from market.submissions.services import UploadedModel, submission_create
from tests.market.submissions.helpers import BOUND, L2_PARAMETERS, stored_files, submit


def upload_l2(user, federation, model_files, *, name: str, epsilon: float) -> Submission:
    return submission_create(
        federation=federation,
        user=user,
        models=[UploadedModel(name, model_files[name])],
        model_family="random_forest",
        n_local_examples=2000,
        local_validation_score=0.81,
        label_distribution=None,
        privacy_level="L2",
        privacy_parameters=L2_PARAMETERS,
        declared_epsilon=epsilon,
    )


def post_l2(api, model_files, *, name: str, epsilon: float):
    return submit(
        api,
        {name: model_files[name]},
        privacy_level="L2",
        declared_epsilon=epsilon,
        privacy_parameters=json.dumps(L2_PARAMETERS),
    )


def budget_of(user) -> PrivacyBudget:
    return PrivacyBudget.objects.get(organisation=user.organisation)


@pytest.mark.parametrize(
    "first_epsilon",
    [2.5, 3.3, 2.123456789, BOUND],
    ids=["after-2.5", "after-3.3", "after-more-decimals-than-stored", "after-an-rdp-spend"],
)
def test_the_exact_remainder_is_accepted_and_a_millionth_more_is_refused_with_nothing_charged(
    silo_api, silo_user, federation_with_data, model_files, media_root, first_epsilon
):
    upload_l2(
        silo_user, federation_with_data, model_files, name="forest.onnx", epsilon=first_epsilon
    )
    before = budget_of(silo_user)
    remainder = before.remaining
    files_before = stored_files(media_root)

    response = post_l2(
        silo_api, model_files, name="boosted.json", epsilon=float(remainder + Decimal("0.000001"))
    )
    assert response.status_code == 409
    assert response.json()["detail"].startswith(
        f"Northwind Hospital's privacy budget in 'adult-income' has ε = {remainder} left, but this submission's "
        f"declared ε needs ε = {remainder + Decimal('0.000001')} more (example-level)."
    )
    assert "already submitted" not in response.json()["detail"]
    after = budget_of(silo_user)
    assert (after.spent, after.reserved, BudgetEntry.objects.count()) == (before.spent, 0, 1)
    assert before.spent == Decimal(repr(first_epsilon)).quantize(
        Decimal("0.000001"), rounding="ROUND_CEILING"
    )
    assert Submission.objects.count() == 1 and stored_files(media_root) == files_before
    event = AuditEvent.objects.get(action="budget.refused")
    assert (event.outcome, event.actor_id, event.details["silos"][0]["remaining"]) == (
        "refused",
        silo_user.id,
        str(remainder),
    )

    upload_l2(
        silo_user, federation_with_data, model_files, name="boosted.json", epsilon=float(remainder)
    )
    assert budget_of(silo_user).remaining == 0 and BudgetEntry.objects.count() == 2


def test_a_spend_only_the_database_refuses_gets_the_budget_sentence_not_the_duplicate_one(
    silo_api, silo_user, federation_with_data, model_files, monkeypatch
):
    upload_l2(silo_user, federation_with_data, model_files, name="forest.onnx", epsilon=8.0)
    # The service's own check is blinded, so the budget's CHECK constraint is what refuses the write.
    monkeypatch.setattr(BudgetAmounts, "committed", property(lambda amounts: Decimal(0)))
    response = post_l2(silo_api, model_files, name="boosted.json", epsilon=2.5)
    assert response.status_code == 409
    assert response.json()["detail"].startswith(
        "Northwind Hospital's privacy budget in 'adult-income' has ε = 2.000000 left"
    )
    assert AuditEvent.objects.filter(action="budget.refused", actor=silo_user).count() == 1
    assert (
        budget_of(silo_user).spent,
        BudgetEntry.objects.count(),
        Submission.objects.count(),
    ) == (Decimal(8), 1, 1)


def test_a_duplicate_is_recognised_by_its_constraints_name(
    silo_user, federation_with_data, model_files
):
    first = upload_l2(silo_user, federation_with_data, model_files, name="forest.onnx", epsilon=2.5)
    with pytest.raises(IntegrityError) as raised, transaction.atomic():
        Submission.objects.create(
            federation=federation_with_data,
            organisation=silo_user.organisation,
            submitted_by=silo_user,
            public_dataset=first.public_dataset,
            model_family="random_forest",
            n_local_examples=1,
            local_validation_score=0.5,
            content_sha256=first.content_sha256,
        )
    assert violated_constraint(raised.value) == "no_duplicate_submission"
