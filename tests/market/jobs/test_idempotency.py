"""Job creation with an Idempotency-Key: a client retrying a request that timed out gets the first job back, and
no silo's privacy budget is reserved twice."""

from datetime import UTC

import pytest

from market.budgets.models import BudgetEntry, PrivacyBudget
from market.jobs.models import Job, JobIdempotencyKey
from tests.conftest import api_client_for, run_at_once
from tests.fixtures.jobs import FAST_FEDKT

L1_JOB = {
    "kind": "fedkt",
    "privacy_level": "L1",
    "seed": 7,
    "parameters": {**FAST_FEDKT, "query": 20, "privacy": {"gamma": 0.02}},
}


def post_job(client, federation, payload: dict, key: str | None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(
        f"/api/federations/{federation.slug}/jobs/", payload, format="json", **headers
    )


def budgets() -> dict:
    return {
        budget.organisation_id: (budget.reserved, budget.spent)
        for budget in PrivacyBudget.objects.all()
    }


def test_a_repeated_key_with_the_same_body_returns_the_first_job_and_reserves_nothing_again(
    operator, fedkt_submissions
):
    federation, client = fedkt_submissions[0].federation, api_client_for(operator)
    first = post_job(client, federation, L1_JOB, "launch-7f3a")
    assert first.status_code == 201, first.json()
    assert first["Idempotent-Replayed"] == "false"
    reserved = budgets()
    entries = BudgetEntry.objects.count()
    assert entries == 3 and all(amount > 0 for amount, _ in reserved.values())

    again = post_job(client, federation, L1_JOB, "launch-7f3a")
    assert (again.status_code, again["Idempotent-Replayed"]) == (201, "true")
    assert again.json()["id"] == first.json()["id"]
    assert Job.objects.count() == 1
    assert budgets() == reserved and BudgetEntry.objects.count() == entries


def test_a_key_reused_for_another_request_is_refused_and_changes_nothing(
    operator, fedkt_submissions
):
    federation, client = fedkt_submissions[0].federation, api_client_for(operator)
    first_id = post_job(client, federation, L1_JOB, "launch-7f3a").json()["id"]
    reserved, entries = budgets(), BudgetEntry.objects.count()
    other = post_job(client, federation, {**L1_JOB, "seed": 8}, "launch-7f3a")
    assert (other.status_code, other.json()["detail"]) == (
        422,
        f"The Idempotency-Key 'launch-7f3a' was already used for another request (job #{first_id}, FedKT at "
        f"L1 in Adult income, launched {Job.objects.get().created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC); "
        "send a new key for a new job.",
    )
    assert (
        Job.objects.count() == 1
        and budgets() == reserved
        and BudgetEntry.objects.count() == entries
    )


def test_keys_belong_to_the_person_who_sent_them_and_no_key_means_a_new_job_each_time(
    operator, fedkt_submissions
):
    federation, client = fedkt_submissions[0].federation, api_client_for(operator)
    l0_job = {**L1_JOB, "privacy_level": "L0", "parameters": FAST_FEDKT}
    assert (
        post_job(client, federation, l0_job, None).json()["id"]
        != post_job(client, federation, l0_job, None).json()["id"]
    )
    too_long = post_job(client, federation, l0_job, "k" * 201)
    assert (too_long.status_code, too_long.json()["detail"]) == (
        400,
        "The Idempotency-Key header must be 1 to 200 characters long.",
    )
    assert Job.objects.count() == 2 and not JobIdempotencyKey.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_same_key_sent_twice_at_once_makes_one_job_and_one_reservation(
    operator, fedkt_submissions
):
    federation = fedkt_submissions[0].federation
    answers = run_at_once(
        lambda client: post_job(client, federation, L1_JOB, "launch-at-once"),
        [api_client_for(operator), api_client_for(operator)],
    )
    assert [answer.status_code for answer in answers] == [201, 201]
    assert answers[0].json()["id"] == answers[1].json()["id"]
    assert sorted(answer["Idempotent-Replayed"] for answer in answers) == ["false", "true"]
    assert Job.objects.count() == 1 and BudgetEntry.objects.count() == 3
