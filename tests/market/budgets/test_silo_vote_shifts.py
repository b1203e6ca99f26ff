"""A silo with k submissions in one L1 job moves k·s votes per query, and is reserved, charged and priced for that.

Gaussian noise makes the expected amounts exact without the new accountant argument: its curve depends on
shift/σ only, so a silo moving k·s votes under noise σ spends what one submission spends under noise σ/k.
"""

import json
from decimal import Decimal

import pytest

from market.budgets.models import BudgetEntry, EntryKind, PrivacyBudget
from market.budgets.services import epsilon_decimal
from market.jobs.privacy_costs import budget_calibrate, budget_price_job
from market.jobs.spending import job_budget_charge, job_budget_reserve
from market.submissions.models import SubmissionStatus
from tests.fixtures.budgets import job_row, submission_row
from workers.numbers import epsilon_text
from workers.privacy.costs import fedkt_l1_cost
from workers.privacy.reports import JobPrivacyReport, PrivacyReport

SIGMA = 120.0
GAUSSIAN = {"mechanism": "gaussian", "gamma": None, "sigma": SIGMA, "delta": 1e-5, "n_queries": 100}
PARTITIONS = 2


def one_submission_epsilon(*, sigma: float) -> Decimal:
    """What a silo with a single submission spends under noise σ (the accountant's default shift s)."""
    cost = fedkt_l1_cost(
        mechanism="gaussian",
        gamma=None,
        sigma=sigma,
        delta=1e-5,
        n_queries=100,
        partitions=PARTITIONS,
    )
    return epsilon_decimal(cost.report.epsilon)


@pytest.fixture
def third_silo(db, federation_with_data):
    from market.accounts.services import organisation_create, user_create
    from market.federations.membership import federation_join

    user = user_create(
        username="fabian-fabrikam",
        password="fabrikam-password",
        organisation=organisation_create(name="Fabrikam Clinic", is_silo=True),
    )
    federation_join(federation=federation_with_data, user=user)
    return user


@pytest.fixture
def silos_with_one_two_and_three_submissions(federation_with_data, members, third_silo):
    """Northwind Hospital holds 1 valid L1 submission, Contoso Bank 2, Fabrikam Clinic 3."""
    holdings = {}
    for user, count in zip([*members, third_silo], (1, 2, 3)):
        holdings[user.organisation.name] = [
            submission_row(federation_with_data, user, tag=f"s{index}") for index in range(count)
        ]
    from market.budgets.services import budgets_ensure
    from market.submissions.models import Submission

    Submission.objects.update(status=SubmissionStatus.VALID)
    budgets_ensure(federation=federation_with_data)
    return holdings


def entries(kind: str) -> dict[str, Decimal]:
    return {
        entry.budget.organisation.name: entry.epsilon
        for entry in BudgetEntry.objects.filter(kind=kind).select_related("budget__organisation")
    }


EXPECTED = {"Northwind Hospital": 1, "Contoso Bank": 2, "Fabrikam Clinic": 3}


def test_each_silo_is_reserved_and_charged_for_the_votes_all_its_submissions_move(
    federation_with_data, operator, silos_with_one_two_and_three_submissions
):
    submissions = [s for held in silos_with_one_two_and_three_submissions.values() for s in held]
    job = job_row(
        federation_with_data, submissions, operator, privacy=GAUSSIAN, partitions=PARTITIONS
    )
    job_budget_reserve(job=job, actor=operator)
    expected = {
        name: one_submission_epsilon(sigma=SIGMA / count) for name, count in EXPECTED.items()
    }
    assert entries(EntryKind.RESERVE) == expected
    assert (
        expected["Contoso Bank"] > 2 * expected["Northwind Hospital"]
    )  # the old charge of s was far too low
    job.refresh_from_db()
    assert (job.privacy_bound["vote_shift"], epsilon_decimal(job.privacy_bound["epsilon"])) == (
        3 * PARTITIONS,
        expected["Fabrikam Clinic"],
    )  # the job's bound is its most exposed silo's

    job_budget_charge(
        job=job,
        privacy_report=JobPrivacyReport(
            level="L1", data_independent=PrivacyReport(**job.privacy_bound)
        ),
    )
    assert entries(EntryKind.CHARGE) == expected
    spent = dict(PrivacyBudget.objects.values_list("organisation__name", "spent"))
    assert spent == expected and set(PrivacyBudget.objects.values_list("reserved", flat=True)) == {
        0
    }
    vote_shifts = {
        entry.budget.organisation.name: entry.parameters["vote_shift"]
        for entry in BudgetEntry.objects.filter(kind=EntryKind.CHARGE).select_related(
            "budget__organisation"
        )
    }
    assert vote_shifts == {name: count * PARTITIONS for name, count in EXPECTED.items()}


def test_a_silo_whose_submissions_would_overspend_it_refuses_the_job_with_nothing_reserved(
    federation_with_data, operator, silos_with_one_two_and_three_submissions
):
    from market.budgets.services import BudgetExceeded

    # Fabrikam's limit fits one submission's spend but not three.
    PrivacyBudget.objects.filter(organisation__name="Fabrikam Clinic").update(
        epsilon_limit=one_submission_epsilon(sigma=SIGMA / 2)
    )
    job = job_row(
        federation_with_data,
        silos_with_one_two_and_three_submissions["Fabrikam Clinic"],
        operator,
        privacy=GAUSSIAN,
        partitions=PARTITIONS,
    )
    with pytest.raises(BudgetExceeded, match="Fabrikam Clinic's privacy budget"):
        job_budget_reserve(job=job, actor=operator)
    assert BudgetEntry.objects.count() == 0


def test_the_price_dry_run_and_the_api_agree_with_the_reservation(
    federation_with_data, operator, operator_api, silos_with_one_two_and_three_submissions
):
    submissions = [s for held in silos_with_one_two_and_three_submissions.values() for s in held]
    body = {
        "privacy": GAUSSIAN,
        "partitions": PARTITIONS,
        "submissions": [s.id for s in submissions],
    }
    quote = operator_api.post(
        "/api/federations/adult-income/budget-price/", body, format="json"
    ).json()
    priced = {
        silo["organisation"]: (silo["submissions"], silo["needed"]) for silo in quote["silos"]
    }
    assert BudgetEntry.objects.count() == 0  # a dry run
    assert (
        quote["cost"]["vote_shift"] == PARTITIONS
    )  # one submission's: it says nothing of who holds how many

    job = job_row(
        federation_with_data, submissions, operator, privacy=GAUSSIAN, partitions=PARTITIONS
    )
    job_budget_reserve(job=job, actor=operator)
    reserved = entries(EntryKind.RESERVE)
    assert priced == {name: (EXPECTED[name], str(reserved[name])) for name in EXPECTED}
    # Listing a silo once per submission prices the same; an unknown submission is a 400 with a sentence.
    by_organisation = budget_price_job(
        federation=federation_with_data,
        organisations=[s.organisation_id for s in submissions],
        kind="fedkt",
        parameters={"partitions": PARTITIONS, "privacy": GAUSSIAN},
    )
    assert [silo["epsilon"] for silo in by_organisation["silos"]] == [
        silo["epsilon"] for silo in quote["silos"]
    ]
    unknown = operator_api.post(
        "/api/federations/adult-income/budget-price/",
        {**body, "submissions": [999999]},
        format="json",
    )
    assert unknown.status_code == 400 and unknown.json()["detail"] == (
        "Submission(s) #999999 do not belong to 'adult-income'."
    )


def test_calibration_finds_noise_that_fits_the_silo_with_three_submissions(
    federation_with_data, operator, silos_with_one_two_and_three_submissions
):
    fabrikam = silos_with_one_two_and_three_submissions["Fabrikam Clinic"]
    PrivacyBudget.objects.filter(organisation__name="Fabrikam Clinic").update(
        epsilon_limit=Decimal("2")
    )
    result = budget_calibrate(
        federation=federation_with_data,
        organisations=[s.organisation_id for s in fabrikam],
        kind="fedkt",
        parameters={"partitions": PARTITIONS, "privacy": GAUSSIAN},
        solve_for="noise",
    )
    alone = budget_calibrate(
        federation=federation_with_data,
        organisations=[fabrikam[0].organisation_id],
        kind="fedkt",
        parameters={"partitions": PARTITIONS, "privacy": GAUSSIAN},
        solve_for="noise",
    )
    assert result["value"] == pytest.approx(
        3 * alone["value"], rel=1e-9
    )  # Δ/σ fixed: three times the noise
    assert result["price"]["fits"] is True


def test_the_launchers_price_charges_each_silo_for_all_its_submissions(
    client, operator, federation_with_data, silos_with_one_two_and_three_submissions
):
    from market.jobs.parameters import job_parameters_validate

    parameters = {
        "partitions": PARTITIONS,
        "privacy": {"mechanism": "gaussian", "sigma": SIGMA, "delta": 1e-5},
    }
    client.force_login(operator)
    page = client.get(
        "/federations/adult-income/jobs/price/",
        {"kind": "fedkt", "privacy_level": "L1", "parameters": json.dumps(parameters)},
    )
    assert page.status_code == 200
    validated = job_parameters_validate(
        kind="fedkt",
        privacy_level="L1",
        parameters=parameters,
        federation=federation_with_data,
        n_public=federation_with_data.public_datasets.first().n_rows,
    )
    submissions = [s for held in silos_with_one_two_and_three_submissions.values() for s in held]
    job = job_row(
        federation_with_data,
        submissions,
        operator,
        privacy=validated["privacy"],
        partitions=PARTITIONS,
    )
    job_budget_reserve(job=job, actor=operator)
    html = page.content.decode()
    for name, epsilon in entries(EntryKind.RESERVE).items():
        limit = PrivacyBudget.objects.get(organisation__name=name).epsilon_limit
        assert (
            f'<td data-label="Silo">{name}</td><td data-label="Submissions">{EXPECTED[name]}</td>'
            f'<td data-label="Remaining ε">{epsilon_text(limit)}</td>'
            f'<td data-label="This job alone ε">{epsilon_text(epsilon)}</td>' in html
        )


def test_a_silo_prices_its_own_submissions_and_cannot_probe_anothers(
    silo_api, silo_user, silos_with_one_two_and_three_submissions
):
    own = silos_with_one_two_and_three_submissions["Northwind Hospital"][0]
    other = silos_with_one_two_and_three_submissions["Contoso Bank"][0]
    body = {"privacy": GAUSSIAN, "partitions": PARTITIONS}
    quote = silo_api.post(
        "/api/federations/adult-income/budget-price/",
        {**body, "submissions": [own.id]},
        format="json",
    ).json()
    assert [(silo["organisation"], silo["submissions"]) for silo in quote["silos"]] == [
        ("Northwind Hospital", 1)
    ]
    probe = silo_api.post(
        "/api/federations/adult-income/budget-price/",
        {**body, "submissions": [other.id]},
        format="json",
    )
    assert probe.status_code == 400 and probe.json()["detail"] == (
        f"Submission(s) #{other.id} do not belong to 'adult-income'."
    )
