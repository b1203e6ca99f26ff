"""Creating and cancelling jobs: validation sentences, permissions, budget reservation, the outbox and audit."""

from decimal import Decimal

import pytest

from market.audit.models import AuditEvent
from market.jobs.models import Job, JobOutbox, JobStatus
from tests.conftest import api_client_for, run_at_once
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import post_job


def test_job_create_stores_parameters_with_defaults_and_an_unpublished_outbox_row(
    operator, fedkt_submissions
):
    federation = fedkt_submissions[0].federation
    response = post_job(
        operator, federation, kind="fedkt", privacy_level="L0", parameters={"query": 100}, seed=3
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["parameters"] == {
        "partitions": 2,
        "query_count": 100,
        "final_model": {"family": "random_forest", "n_estimators": 100, "max_depth": 8},
        "vote": "auto",  # an L0 FedKT job that names no vote chooses on half of the evaluation split
        "vote_weight_max": 4,
        "query_selection": "random",
        "semi_supervised": "none",
    }
    assert body["submissions"] == [s.id for s in fedkt_submissions]
    assert body["status"] == "queued"
    assert body["progress"] == {
        "stage": "waiting for a worker",
        "done": 0,
        "total": 3,
        "percent": 0,
    }
    assert body["seed"] == 3 and body["global_model"] is None
    assert (
        JobOutbox.objects.filter(job_id=body["id"], published_at__isnull=True).count() == 1
    )  # on commit: not yet
    assert AuditEvent.objects.filter(action="job.created").count() == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"kind": "ensemble", "privacy_level": "L1"},
            "Server noise (L1) is only available for FedKT jobs",
        ),
        (
            {"parameters": {"partitions": 1}},
            "holds 2 FedKT student(s), but a FedKT job with s = 1 takes 1 to 1 students per submission",
        ),
        ({"parameters": {"query": 5000}}, "The server can query 1 to 2000 public examples"),
        ({"parameters": {"query": 1.5}}, "A query fraction must lie in (0, 1], not 1.5."),
        (
            {"parameters": {"final_model": {"family": "svm"}}},
            "'final_model' must be a mapping with a 'family' of",
        ),
        ({"parameters": {"query": 1}}, "'query': 1 is ambiguous (one public row, or all of them?)"),
        (
            {"parameters": {"query_count": 1}},
            "These settings query 1 public row(s), too few to train a model on 2 "
            "classes; query at least 10",
        ),
        (
            {"parameters": {"final_model": {"family": "random_forest", "n_estimators": 10**12}}},
            "'final_model.n_estimators' must be a whole number from 1 to 1000, not 1000000000000.",
        ),
        (
            {
                "kind": "ensemble",
                "parameters": {"selection": {"strategy": "data", "threshold": 10**6}},
            },
            "No member has a number of local examples of at least 1e+06; lower the threshold",
        ),
        ({"parameters": {"gamma": 0.1}}, "Unknown parameter(s) for a fedkt job: gamma."),
        (
            {"parameters": {**FAST_FEDKT, "partitions": 1}},
            "holds 2 FedKT student(s), but a FedKT job with s = 1 takes 1 to 1 students per submission",
        ),
        ({"parameters": {"privacy": {"gamma": 1}}}, "Only L1 jobs take privacy parameters"),
        (
            {"privacy_level": "L1", "parameters": {"privacy": {"gamma": -1}}},
            "'privacy.gamma' must be a positive number",
        ),
        ({"submissions": [999999]}, "Submission #999999 does not belong to 'adult-income'."),
        ({"submissions": []}, 'Give "submissions" as "all" or a non-empty list of submission ids.'),
    ],
)
def test_job_create_refuses_bad_input_with_a_sentence_and_writes_nothing(
    operator, fedkt_submissions, changes, message
):
    payload = {"kind": "fedkt", "privacy_level": "L0", "parameters": FAST_FEDKT, **changes}
    response = post_job(operator, fedkt_submissions[0].federation, **payload)
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not Job.objects.exists() and not JobOutbox.objects.exists()
    assert AuditEvent.objects.filter(action="job.refused").count() == 1


@pytest.mark.parametrize(
    "kind, message",
    [
        (
            "fd",
            "Jobs of kind 'fd' cannot run here; choose one of cpfl, distill, ensemble, fedkt, stack. "
            "Federated distillation is an exchange between silos (/api/exchanges/), not a job.",
        ),
        (
            "fedtk",
            "Jobs of kind 'fedtk' cannot run here; choose one of cpfl, distill, ensemble, fedkt, stack.",
        ),
    ],
)
def test_job_create_refuses_a_kind_the_registry_does_not_hold_and_writes_nothing(
    operator, fedkt_submissions, kind, message
):
    response = post_job(
        operator, fedkt_submissions[0].federation, kind=kind, privacy_level="L0", parameters={}
    )
    assert response.status_code == 400
    assert response.json() == {"kind": [message]}
    assert not Job.objects.exists() and not JobOutbox.objects.exists()


def test_job_create_refuses_a_submission_that_is_not_valid(operator, fedkt_submissions):
    from market.submissions.models import Submission, SubmissionStatus

    Submission.objects.filter(id=fedkt_submissions[0].id).update(status=SubmissionStatus.REJECTED)
    response = post_job(
        operator,
        fedkt_submissions[0].federation,
        kind="fedkt",
        privacy_level="L0",
        submissions=[s.id for s in fedkt_submissions],
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith(
        f"Submission #{fedkt_submissions[0].id} is rejected, not valid"
    )
    all_valid = post_job(
        operator,
        fedkt_submissions[0].federation,
        kind="fedkt",
        privacy_level="L0",
        submissions="all",
    ).json()
    assert all_valid["submissions"] == [s.id for s in fedkt_submissions[1:]]


def test_silos_may_not_launch_jobs_and_buyers_only_where_the_federation_allows(
    fedkt_submissions, silo_user
):
    from market.accounts.services import organisation_create, user_create

    federation = fedkt_submissions[0].federation
    buyer = user_create(
        username="bo-buyer",
        password="buyer-password",
        organisation=organisation_create(name="Buyer Ltd"),
    )
    buyer.organisation.is_buyer = True
    buyer.organisation.save()
    assert post_job(silo_user, federation, kind="fedkt", privacy_level="L0").status_code == 403
    assert post_job(buyer, federation, kind="fedkt", privacy_level="L0").status_code == 403
    federation.buyers_may_launch_jobs = True
    federation.save()
    assert post_job(silo_user, federation, kind="fedkt", privacy_level="L0").status_code == 403
    assert post_job(buyer, federation, kind="fedkt", privacy_level="L0").status_code == 201
    assert Job.objects.count() == 1


def test_an_l1_job_reserves_every_silos_budget_and_is_refused_with_409_when_one_would_overspend(
    operator, fedkt_submissions
):
    from market.budgets.models import PrivacyBudget

    federation = fedkt_submissions[0].federation
    small = {**FAST_FEDKT, "query": 20, "privacy": {"gamma": 0.02}}
    created = post_job(operator, federation, kind="fedkt", privacy_level="L1", parameters=small)
    assert created.status_code == 201, created.json()
    job = Job.objects.get(id=created.json()["id"])
    assert job.privacy_bound["n_queries"] == 20
    reserved = {budget.organisation_id: budget.reserved for budget in PrivacyBudget.objects.all()}
    assert set(reserved) == {s.organisation_id for s in fedkt_submissions}
    assert all(amount > 0 for amount in reserved.values())

    refused = post_job(
        operator,
        federation,
        kind="fedkt",
        privacy_level="L1",
        parameters={**FAST_FEDKT, "query": 2000, "privacy": {"gamma": 1.0}},
    )
    assert refused.status_code == 409
    assert "privacy budget" in refused.json()["detail"]
    assert Job.objects.count() == 1
    assert {b.organisation_id: b.reserved for b in PrivacyBudget.objects.all()} == reserved
    assert AuditEvent.objects.filter(action="job.refused").count() == 1


def test_cancelling_a_queued_l1_job_releases_its_reservation(operator, fedkt_submissions):
    from market.budgets.models import PrivacyBudget

    federation = fedkt_submissions[0].federation
    job_id = post_job(
        operator,
        federation,
        kind="fedkt",
        privacy_level="L1",
        parameters={**FAST_FEDKT, "query": 20, "privacy": {"gamma": 0.02}},
    ).json()["id"]
    response = api_client_for(operator).post(f"/api/jobs/{job_id}/cancel/")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert all(budget.reserved == Decimal(0) for budget in PrivacyBudget.objects.all())
    again = api_client_for(operator).post(f"/api/jobs/{job_id}/cancel/")
    assert again.status_code == 409
    assert AuditEvent.objects.filter(action="job.cancelled").count() == 1


def test_a_silo_sees_the_jobs_that_used_its_submissions_but_cannot_cancel_them(
    operator, fedkt_submissions, silo_user
):
    job_id = post_job(
        operator, fedkt_submissions[0].federation, kind="fedkt", privacy_level="L0"
    ).json()["id"]
    silo = api_client_for(silo_user)
    assert [job["id"] for job in silo.get("/api/jobs/").json()] == [job_id]
    assert silo.post(f"/api/jobs/{job_id}/cancel/").status_code == 403
    assert Job.objects.get(id=job_id).status == JobStatus.QUEUED


@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_to_start_the_same_job_claim_it_once(
    operator, fedkt_submissions, settings
):
    from market.jobs.models import JobChunk
    from workers.celery_app import app
    from workers.runner import job_start

    settings.ONEFOLD_JOB_CHUNK_SIZE = 1
    job_id = post_job(
        operator, fedkt_submissions[0].federation, kind="fedkt", privacy_level="L0"
    ).json()["id"]
    app.control.purge()
    run_at_once(lambda _: job_start(job_id=job_id), [1, 2, 3])
    app.control.purge()
    job = Job.objects.get(id=job_id)
    assert (job.status, job.attempts) == (JobStatus.RUNNING, 1)
    assert JobChunk.objects.filter(job=job).count() == 3
    assert sum("Claimed by worker" in entry.message for entry in job.log_entries.all()) == 1


@pytest.mark.django_db(transaction=True)
def test_workers_racing_for_the_same_chunk_claim_it_once(operator, fedkt_submissions):
    from market.jobs.chunks import job_chunk_claim
    from market.jobs.models import JobChunk

    job_id = post_job(
        operator, fedkt_submissions[0].federation, kind="fedkt", privacy_level="L0"
    ).json()["id"]
    from datetime import timedelta

    from django.utils import timezone

    Job.objects.filter(id=job_id).update(
        status=JobStatus.RUNNING, lease_expires_at=timezone.now() + timedelta(hours=1)
    )
    chunk = JobChunk.objects.create(
        job_id=job_id, index=0, submission_ids=[fedkt_submissions[0].id]
    )
    claims = run_at_once(
        lambda racer: job_chunk_claim(chunk_id=chunk.id, worker=f"racer-{racer}"), [1, 2, 3, 4]
    )
    assert sorted(claims) == [False, False, False, True]
    chunk.refresh_from_db()
    assert (chunk.status, chunk.attempts) == ("running", 1)


@pytest.mark.parametrize(
    "parameters, message",
    [
        ({"query": 1, "privacy": {"gamma": 0.02}}, "'query': 1 is ambiguous"),
        (
            {"query_count": 1, "privacy": {"gamma": 0.02}},
            "These settings query 1 public row(s), too few to train a model",
        ),
        (
            {"final_model": {"family": "random_forest", "n_estimators": 10**12}},
            "'final_model.n_estimators' must be a whole number from 1 to 1000, not 1000000000000.",
        ),
    ],
)
def test_an_l1_job_that_cannot_train_a_model_is_refused_before_any_budget_is_reserved(
    operator, fedkt_submissions, parameters, message
):
    from market.budgets.models import BudgetEntry, PrivacyBudget

    response = post_job(
        operator,
        fedkt_submissions[0].federation,
        kind="fedkt",
        privacy_level="L1",
        parameters=parameters,
    )
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not Job.objects.exists() and not JobOutbox.objects.exists()
    assert not BudgetEntry.objects.exists()
    assert all(
        budget.reserved == Decimal(0) and budget.spent == Decimal(0)
        for budget in PrivacyBudget.objects.all()
    )


def test_a_job_whose_estimated_work_exceeds_the_setting_is_refused_with_a_sentence(
    operator, fedkt_submissions, settings
):
    settings.ONEFOLD_JOB_MAX_WORK = 1_000_000
    heavy = {
        **FAST_FEDKT,
        "final_model": {"family": "random_forest", "n_estimators": 1000, "max_depth": 64},
    }
    response = post_job(
        operator,
        fedkt_submissions[0].federation,
        kind="fedkt",
        privacy_level="L0",
        parameters=heavy,
    )
    assert response.status_code == 400
    # 3 submissions × 2 students × 2000 public rows + 1000 trees × depth 64 × 500 queried rows
    assert response.json()["detail"].startswith(
        "This job would need about 3.2e+07 row-passes of work"
    )
    assert "above this market's limit of 1e+06" in response.json()["detail"]
    assert not Job.objects.exists()
    light = post_job(
        operator,
        fedkt_submissions[0].federation,
        kind="fedkt",
        privacy_level="L0",
        parameters=FAST_FEDKT,
    )
    assert light.status_code == 201, light.json()
