"""Events derived where their change commits: a job's end, a budget charge and its thresholds, a cancellation
made once; each to the endpoints whose organisation may see it, and none for a change that rolled back."""

from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone

from market.budgets.models import PrivacyBudget
from market.jobs.models import JobStatus
from market.jobs.spending import job_budget_reserve
from market.webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookEventType

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoints(members):  # noqa: F811
    return {
        user.username: WebhookEndpoint.objects.create(
            organisation=user.organisation,
            url=f"https://hooks.example.org/{user.username}",
            events=WebhookEventType.values,
            secret="whsec_x",
        )
        for user in members
    }


def _received(endpoint) -> list[str]:
    return sorted(endpoint.deliveries.values_list("event_type", flat=True))


def test_a_failed_job_after_its_release_charges_each_silo_and_tells_each_only_of_its_own_budget(
    make_job,  # noqa: F811
    operator,
    endpoints,
    members,  # noqa: F811
):
    from market.jobs.lifecycle import job_end

    job = make_job()
    job_budget_reserve(job=job, actor=operator)
    reserved = PrivacyBudget.objects.get(organisation=members[0].organisation).reserved
    # The first silo's limit leaves room for the charge only: it passes 80 % (not 100 %).
    PrivacyBudget.objects.filter(organisation=members[0].organisation).update(
        epsilon_limit=reserved * Decimal("1.1")
    )
    job.noise_drawn_at = job.released_at = timezone.now()
    job.save(update_fields=["noise_drawn_at", "released_at"])

    assert job_end(job_id=job.id, status=JobStatus.FAILED, reason="The worker ran out of memory.")

    first, second = (endpoints[user.username] for user in members)
    assert _received(first) == ["budget.charged", "budget.threshold_reached", "job.failed"]
    assert _received(second) == ["budget.charged", "job.failed"]
    for endpoint, user in ((first, members[0]), (second, members[1])):
        charged = endpoint.deliveries.get(event_type="budget.charged").payload
        assert charged["budget"]["id"] == user.organisation.privacy_budgets.get().id
        assert charged["charge"] == {
            "epsilon": str(reserved),
            "delta": "0.00001",
            "unit": "party-level",
            "job": job.id,
            "submission": None,
        }
    threshold = first.deliveries.get(event_type="budget.threshold_reached").payload
    assert threshold["threshold"] == 0.8
    failed = first.deliveries.get(event_type="job.failed").payload["job"]
    assert (failed["id"], failed["status"], failed["failure_reason"]) == (
        job.id,
        "failed",
        "The worker ran out of memory.",
    )


def test_a_composed_charge_past_no_new_threshold_sends_no_second_threshold_reached(
    endpoints,
    composed_charges,  # noqa: F811
    members,  # noqa: F811
):
    # made in the fixture's order: the first charge passes 80 %, the second (composed by RDP) passes nothing new
    for user in members:
        deliveries = endpoints[user.username].deliveries.order_by("id")
        assert [delivery.event_type for delivery in deliveries] == [
            "budget.charged",
            "budget.threshold_reached",
            "budget.charged",
        ]
        assert deliveries.get(event_type="budget.threshold_reached").payload["threshold"] == 0.8
        assert [
            delivery.payload["charge"]["job"]
            for delivery in deliveries.filter(event_type="budget.charged")
        ] == [job.id for job in composed_charges]


def test_cancelling_a_queued_job_sends_one_job_cancelled(make_job, operator, endpoints):  # noqa: F811
    from market.jobs.services import job_cancel

    job = make_job(privacy_level="L0")
    job_cancel(job=job, user=operator)

    assert WebhookDelivery.objects.filter(event_type="job.cancelled").count() == 2  # one per silo
    assert all(_received(endpoint) == ["job.cancelled"] for endpoint in endpoints.values())


def test_a_change_that_rolls_back_sends_nothing(make_job, operator, endpoints):  # noqa: F811
    from market.jobs.services import job_cancel

    job = make_job(privacy_level="L0")
    with pytest.raises(RuntimeError), transaction.atomic():
        job_cancel(job=job, user=operator)
        raise RuntimeError("the request failed after the cancellation")

    assert not WebhookDelivery.objects.exists()


def test_an_inactive_endpoint_or_one_that_did_not_choose_the_event_gets_nothing(
    make_job,  # noqa: F811
    operator,
    endpoints,
):
    from market.jobs.services import job_cancel

    first, second = endpoints.values()
    WebhookEndpoint.objects.filter(id=first.id).update(is_active=False)
    WebhookEndpoint.objects.filter(id=second.id).update(events=["job.succeeded"])
    job_cancel(job=make_job(privacy_level="L0"), user=operator)

    assert not WebhookDelivery.objects.exists()
