"""Webhook events reach exactly the organisations that may open their object: for every event of the world
(tests/fixtures/security.py), each organisation's endpoint receives it if and only if that organisation's API
answers the object (the authorisation matrix's rule), and never with a field the API hides."""

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from market.audit.services import audit_record
from market.budgets.models import BudgetEntry, EntryKind, PrivacyBudget
from market.commerce.models import Listing, Purchase
from market.jobs.models import Job
from market.submissions.models import Submission
from market.webhooks.events import events_from_budget_entry, events_from_job
from market.webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookEventType
from market.webhooks.services import webhook_events_emit
from tests.fixtures.security import MEMBERS

pytestmark = pytest.mark.django_db


def _receivers(event_type: str) -> set[str]:
    by_organisation = {endpoint.organisation_id: name for name, endpoint in _endpoints().items()}
    return {
        by_organisation[organisation_id]
        for organisation_id in WebhookDelivery.objects.filter(event_type=event_type).values_list(
            "endpoint__organisation_id", flat=True
        )
    }


def _endpoints() -> dict:
    return {endpoint.url.rsplit("/", 1)[1]: endpoint for endpoint in WebhookEndpoint.objects.all()}


def _api_answers(world, path: str, contains_id: int | None = None) -> set[str]:
    """The principals whose API answers ``path`` (with ``contains_id`` in the list, for a list)."""
    answered = set()
    for name in MEMBERS:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {world.tokens[name]}")
        response = client.get(path)
        if response.status_code != 200:
            continue
        rows = response.json()
        rows = rows["results"] if isinstance(rows, dict) and "results" in rows else rows
        if contains_id is None or contains_id in [row["id"] for row in rows]:
            answered.add(name)
    return answered


@pytest.fixture
def subscribed(world):
    WebhookDelivery.objects.all().delete()
    WebhookEndpoint.objects.update(events=WebhookEventType.values)
    return world


def test_each_event_reaches_exactly_the_organisations_whose_api_answers_its_object(subscribed):
    world = subscribed
    people = world.people
    job = Job.objects.get(id=world.targets["job"][None]["job_id"])
    submission = Submission.objects.get(organisation=people["silo_a"].organisation)
    listing = Listing.objects.get(id=world.targets["listing"]["published"]["listing_id"])
    purchase = Purchase.objects.get()
    budget = PrivacyBudget.objects.get(id=world.targets["budget"]["silo_a"]["budget_id"])

    audit_record(
        action="submission.validated", organisation=submission.organisation, target=submission
    )
    webhook_events_emit(events_from_job(job))
    audit_record(action="listing.published", actor=people["operator"], target=listing)
    audit_record(action="purchase.created", actor=people["buyer_a"], target=purchase)
    charge = BudgetEntry(
        budget=budget,
        kind=EntryKind.CHARGE,
        epsilon=Decimal("1"),
        unit="party-level",
        composition_rule="additive",
        spent_after=Decimal("1"),
        reserved_after=Decimal("0"),
        epsilon_limit_after=budget.epsilon_limit,
    )
    webhook_events_emit(events_from_budget_entry(charge))

    expected = {
        "submission.validated": _api_answers(world, f"/api/submissions/{submission.id}/"),
        "job.succeeded": _api_answers(world, f"/api/jobs/{job.id}/"),
        "model.published": _api_answers(world, f"/api/listings/{listing.id}/"),
        "purchase.completed": _api_answers(world, "/api/purchases/", contains_id=purchase.id),
        "budget.charged": _api_answers(world, f"/api/budgets/{budget.id}/"),
    }
    received = {event_type: _receivers(event_type) for event_type in expected}
    assert received == expected
    # The world's own answers, spelled out, so that the comparison cannot pass on two empty sets.
    assert expected == {
        "submission.validated": {"silo_a"},
        "job.succeeded": {"silo_a", "silo_b"},
        "model.published": MEMBERS,
        "purchase.completed": {"buyer_a"},
        "budget.charged": {"silo_a"},
    }


def test_a_draft_listing_event_reaches_nobody(subscribed):
    draft = Listing.objects.get(id=subscribed.targets["listing"]["draft"]["listing_id"])
    audit_record(action="listing.published", actor=subscribed.people["operator"], target=draft)
    assert _receivers("model.published") == set()


def test_membership_and_payout_events_reach_only_the_organisation_they_are_about(subscribed):
    people = subscribed.people
    audit_record(
        action="membership.removed",
        actor=people["operator"],
        organisation=people["silo_b"].organisation,
        details={"federation": "adult"},
    )
    audit_record(
        action="wallet.payout_recorded",  # market.commerce.payouts
        organisation=people["silo_a"].organisation,
        details={"amount_cents": 250},
    )
    assert _receivers("membership.changed") == {"silo_b"}
    assert _receivers("payout.recorded") == {"silo_a"}
    payout = WebhookDelivery.objects.get(event_type="payout.recorded")
    assert payout.payload["payout"]["amount_cents"] == 250


def test_refused_actions_make_no_event_but_a_rejected_submission_does(subscribed):
    from market.audit.models import AuditOutcome

    people = subscribed.people
    listing = Listing.objects.get(id=subscribed.targets["listing"]["published"]["listing_id"])
    submission = Submission.objects.get(organisation=people["silo_b"].organisation)
    audit_record(
        action="purchase.created",
        outcome=AuditOutcome.REFUSED,
        actor=people["buyer_b"],
        target=listing,
    )
    audit_record(
        action="submission.validated",
        outcome=AuditOutcome.REFUSED,
        organisation=submission.organisation,
        target=submission,
    )
    assert _receivers("purchase.completed") == set()
    assert _receivers("submission.rejected") == {"silo_b"}
