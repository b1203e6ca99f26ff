"""A buyer's "add credits": a pending request that changes no balance until an operator approves it, which tops the
wallet up once (the request is the payment's reference); every step is audited."""

import pytest

from market.audit.models import AuditEvent, AuditOutcome
from market.commerce.models import CreditRequest, CreditRequestStatus, Wallet, WalletEntry
from market.commerce.wallets import (
    credit_request_approve,
    credit_request_create,
    credit_request_decline,
)
from market.errors import Conflict, InvalidInput, PermissionDenied


def balance_of(organisation) -> int:
    wallet = Wallet.objects.filter(organisation=organisation).first()
    return wallet.balance_cents if wallet else 0


def test_a_credit_request_credits_nothing_until_an_operator_approves_it_once(buyer_user, operator):
    credit_request = credit_request_create(user=buyer_user, amount_cents=2500, note="PO-118")
    assert (credit_request.status, balance_of(buyer_user.organisation)) == (
        CreditRequestStatus.PENDING,
        0,
    )

    approved = credit_request_approve(
        credit_request=credit_request, actor=operator, payment_reference="BANK-1"
    )
    assert approved.status == CreditRequestStatus.APPROVED and approved.decided_by == operator
    assert balance_of(buyer_user.organisation) == 2500
    assert WalletEntry.objects.get().reference == f"credit-request-{credit_request.id}"
    with pytest.raises(Conflict, match="already approved"):
        credit_request_approve(
            credit_request=credit_request, actor=operator, payment_reference="BANK-1"
        )
    assert balance_of(buyer_user.organisation) == 2500 and WalletEntry.objects.count() == 1
    assert list(
        AuditEvent.objects.filter(action__startswith="wallet.")
        .order_by("id")
        .values_list("action", "outcome")
    ) == [
        ("wallet.credit_requested", AuditOutcome.SUCCESS),
        ("wallet.topped_up", AuditOutcome.SUCCESS),
        ("wallet.credit_request_approved", AuditOutcome.SUCCESS),
    ]


def test_a_declined_request_credits_nothing_and_cannot_be_approved_later(buyer_user, operator):
    credit_request = credit_request_create(user=buyer_user, amount_cents=900)
    credit_request_decline(credit_request=credit_request, actor=operator)
    with pytest.raises(Conflict, match="already declined"):
        credit_request_approve(
            credit_request=credit_request, actor=operator, payment_reference="BANK-1"
        )
    assert balance_of(buyer_user.organisation) == 0 and not WalletEntry.objects.exists()


def test_only_operators_decide_and_only_organisations_ask(buyer_user, operator):
    credit_request = credit_request_create(user=buyer_user, amount_cents=900)
    with pytest.raises(PermissionDenied):
        credit_request_approve(
            credit_request=credit_request, actor=buyer_user, payment_reference="BANK-1"
        )
    with pytest.raises(PermissionDenied):
        credit_request_create(user=operator, amount_cents=900)
    with pytest.raises(InvalidInput, match="between 0.01 and"):
        credit_request_create(user=buyer_user, amount_cents=0)
    assert CreditRequest.objects.get().status == CreditRequestStatus.PENDING
    assert balance_of(buyer_user.organisation) == 0
