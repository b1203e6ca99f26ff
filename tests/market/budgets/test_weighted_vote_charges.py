"""A class-weighted FedKT vote at L1 (issue 19): a silo's submission moves s × W votes (W = vote_weight_max), and
its price, reservation, charge and ledger line are exactly the ε of that sensitivity, computed by hand from the
closed-form Gaussian curve. Soft voting, whose sensitivity the accountant does not cover, is refused at L1.
"""

import json

import numpy as np
import pytest

from market.budgets.models import BudgetEntry, EntryKind, PrivacyBudget
from market.budgets.services import epsilon_decimal
from market.errors import InvalidInput
from market.jobs.spending import job_budget_charge, job_budget_reserve
from market.submissions.models import Submission, SubmissionStatus
from tests.fixtures.budgets import job_row, submission_row
from workers.numbers import epsilon_text
from workers.privacy.rdp import RENYI_ORDERS
from workers.privacy.reports import JobPrivacyReport, PrivacyReport

SIGMA, N_QUERIES, DELTA, PARTITIONS, WEIGHT = 120.0, 100, 1e-5, 2, 3
GAUSSIAN = {
    "mechanism": "gaussian",
    "gamma": None,
    "sigma": SIGMA,
    "delta": DELTA,
    "n_queries": N_QUERIES,
}
WEIGHTED = {"vote": "class_weighted", "vote_weight_max": WEIGHT}


def hand_epsilon(shift: int) -> float:
    """Two coordinates shift by Δ per query: RDP(α) = n·α·Δ²/σ², then Canonne-Kamath-Steinke's conversion."""
    alpha = RENYI_ORDERS
    curve = N_QUERIES * alpha * shift**2 / SIGMA**2
    return float(
        np.min(curve + np.log((alpha - 1) / alpha) - (np.log(DELTA) + np.log(alpha)) / (alpha - 1))
    )


@pytest.fixture
def weighted_job(federation_with_data, members, operator):
    """Northwind Hospital holds two valid L1 submissions in the job, Contoso Bank one; the job votes class-weighted."""
    northwind, contoso = members
    used = [
        submission_row(federation_with_data, northwind, tag="a"),
        submission_row(federation_with_data, northwind, tag="b"),
        submission_row(federation_with_data, contoso, tag="a"),
    ]
    Submission.objects.update(status=SubmissionStatus.VALID)
    job = job_row(federation_with_data, used, operator, privacy=GAUSSIAN, partitions=PARTITIONS)
    job.parameters = {**job.parameters, **WEIGHTED}
    job.save(update_fields=["parameters"])
    return job


def ledger(kind: str) -> dict:
    return {
        entry.budget.organisation.name: (entry.epsilon, entry.parameters["vote_shift"])
        for entry in BudgetEntry.objects.filter(kind=kind).select_related("budget__organisation")
    }


def test_a_class_weighted_job_reserves_and_charges_s_times_the_largest_weight(
    weighted_job, operator
):
    # Northwind: 2 submissions × s = 2 × W = 3 → Δ = 12; Contoso: 1 × 2 × 3 → Δ = 6.
    expected = {
        "Northwind Hospital": (epsilon_decimal(hand_epsilon(12)), 12),
        "Contoso Bank": (epsilon_decimal(hand_epsilon(6)), 6),
    }
    job_budget_reserve(job=weighted_job, actor=operator)
    assert ledger(EntryKind.RESERVE) == expected
    weighted_job.refresh_from_db()
    assert weighted_job.privacy_bound["vote_shift"] == 12
    assert weighted_job.privacy_bound["epsilon"] == pytest.approx(hand_epsilon(12), rel=1e-9)
    job_budget_charge(
        job=weighted_job,
        privacy_report=JobPrivacyReport(
            level="L1", data_independent=PrivacyReport(**weighted_job.privacy_bound)
        ),
    )
    assert ledger(EntryKind.CHARGE) == expected


def test_the_launchers_price_of_a_class_weighted_job_is_what_the_job_reserves(
    client, operator, federation_with_data, weighted_job
):
    parameters = {
        "partitions": PARTITIONS,
        **WEIGHTED,
        "query_count": N_QUERIES,
        "privacy": {"mechanism": "gaussian", "sigma": SIGMA, "delta": DELTA},
    }
    client.force_login(operator)
    page = client.get(
        "/federations/adult-income/jobs/price/",
        {
            "kind": "fedkt",
            "privacy_level": "L1",
            "parameters": json.dumps(parameters),
            "submissions": weighted_job.submissions.values_list("id", flat=True),
        },
    )
    assert page.status_code == 200
    job_budget_reserve(job=weighted_job, actor=operator)
    html = page.content.decode()
    held = {"Northwind Hospital": 2, "Contoso Bank": 1}
    for name, (epsilon, _) in ledger(EntryKind.RESERVE).items():
        limit = PrivacyBudget.objects.get(organisation__name=name).epsilon_limit
        assert (
            f'<td data-label="Silo">{name}</td><td data-label="Submissions">{held[name]}</td>'
            f'<td data-label="Remaining ε">{epsilon_text(limit)}</td>'
            f'<td data-label="This job alone ε">{epsilon_text(epsilon)}</td>' in html
        )
    assert (
        f'<td data-label="This job alone ε">{epsilon_text(hand_epsilon(PARTITIONS))}</td>'
        not in html
    )  # not priced as an unweighted vote


def test_soft_votes_are_refused_at_l1_with_a_sentence(federation_with_data, operator_api):
    from market.jobs.parameters import job_parameters_validate

    n_public = federation_with_data.public_datasets.first().n_rows
    with pytest.raises(InvalidInput, match="Soft voting cannot run at L1"):
        job_parameters_validate(
            kind="fedkt",
            privacy_level="L1",
            parameters={"vote": "soft"},
            federation=federation_with_data,
            n_public=n_public,
        )
    assert (
        job_parameters_validate(
            kind="fedkt",
            privacy_level="L0",
            parameters={"vote": "soft"},
            federation=federation_with_data,
            n_public=n_public,
        )["vote"]
        == "soft"
    )


def test_the_price_api_with_the_vote_weight_quotes_what_the_job_reserves(
    weighted_job, operator, operator_api
):
    body = {
        "privacy": GAUSSIAN,
        "partitions": PARTITIONS,
        "vote_weight": WEIGHT,
        "submissions": list(weighted_job.submissions.values_list("id", flat=True)),
    }
    quote = operator_api.post(
        "/api/federations/adult-income/budget-price/", body, format="json"
    ).json()
    job_budget_reserve(job=weighted_job, actor=operator)
    reserved = ledger(EntryKind.RESERVE)
    quoted = {
        silo["organisation"]: (silo["needed"], silo["vote_shift"], silo["submissions"])
        for silo in quote["silos"]
    }
    assert quoted == {
        name: (str(epsilon), shift, shift // (PARTITIONS * WEIGHT))
        for name, (epsilon, shift) in reserved.items()
    }
    assert quote["cost"]["vote_shift"] == PARTITIONS * WEIGHT  # one submission's, weighted


def test_an_l1_class_weighted_job_without_a_query_queries_fewer_rows_than_an_unweighted_one(
    federation_with_data,
):
    from market.jobs.parameters import job_parameters_validate

    def default_query(parameters):
        validated = job_parameters_validate(
            kind="fedkt",
            privacy_level="L1",
            parameters=parameters,
            federation=federation_with_data,
            n_public=federation_with_data.public_datasets.first().n_rows,
        )
        return validated["privacy"]["n_queries"]

    # Each query costs more when a submission moves s × W votes, so fewer fit the same share of the limit.
    assert default_query({"vote": "class_weighted", "vote_weight_max": 4}) < default_query({})
