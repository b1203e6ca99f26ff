"""The invariant checks themselves: they pass on a consistent market and name what is broken otherwise."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from market.audit.services import audit_record
from tests.security.invariants import audit_violations, invariant_violations, job_violations


def test_a_consistent_market_has_no_violations(silo_user, federation):
    audit_record(action="token.created", actor=silo_user)
    assert invariant_violations() == []


def test_a_running_job_without_a_live_lease_is_reported(
    federation_with_data, operator, invariants_not_checked
):
    from market.jobs.models import Job

    job = Job.objects.create(
        federation=federation_with_data,
        kind="fedkt",
        privacy_level="L0",
        parameters={},
        seed=0,
        evaluation_split=federation_with_data.evaluation_splits.get(),
        public_dataset=federation_with_data.public_datasets.get(),
        requested_by=operator,
        status="running",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    assert job_violations() == [
        f"job #{job.id} is running without a live lease (lease expires {job.lease_expires_at})"
    ]
    Job.objects.filter(id=job.id).update(lease_expires_at=timezone.now() + timedelta(minutes=2))
    assert job_violations() == []


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the audit trigger exists on PostgreSQL only"
)
def test_a_broken_audit_chain_is_reported(silo_user, invariants_not_checked):
    event = audit_record(action="token.created", actor=silo_user)
    with connection.cursor() as cursor:
        cursor.execute(
            "SET CONSTRAINTS ALL IMMEDIATE"
        )  # no pending foreign-key checks, or ALTER TABLE refuses
        cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER audit_auditevent_append_only")
        cursor.execute(
            "UPDATE audit_auditevent SET action = 'token.revoked' WHERE id = %s", [event.id]
        )
    assert audit_violations() == [
        f"the audit chain is broken: Entry {event.id} does not match its hash: "
        "it was edited after it was written."
    ]


def test_a_wallet_that_disagrees_with_its_ledger_is_reported(silo_user, invariants_not_checked):
    from market.commerce.models import Wallet
    from tests.security.invariants import wallet_violations

    wallet = Wallet.objects.create(organisation=silo_user.organisation, balance_cents=500)
    assert wallet_violations() == [f"wallet #{wallet.id} holds 500 cents but its ledger sums to 0"]
