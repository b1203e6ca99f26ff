"""A price quote tells a silo whether a job fits its own budget only: whether it fits every silo's would let it
binary-search the smallest remainder of the others (the budget-price API and the job launcher's price share
market.budgets.selectors.price_quote_visible)."""

from market.budgets.ledger import budgets_ensure
from market.budgets.models import PrivacyBudget
from tests.fixtures.budgets import LAPLACE

PRICE_URL = "/api/federations/adult-income/budget-price/"


def test_a_silo_is_told_whether_the_job_fits_its_own_budget_not_everyones(
    operator_api, silo_api, members, federation_with_data, other_silo_user
):
    budgets_ensure(federation=federation_with_data)
    PrivacyBudget.objects.filter(
        federation=federation_with_data, organisation=other_silo_user.organisation
    ).update(epsilon_limit="0.000001")
    body = {"privacy": LAPLACE, "partitions": 2}
    assert operator_api.post(PRICE_URL, body, format="json").json()["fits"] is False
    own = silo_api.post(PRICE_URL, body, format="json").json()
    assert own["fits"] is True and [silo["organisation"] for silo in own["silos"]] == [
        "Northwind Hospital"
    ]


def test_a_silo_reads_a_refusal_that_named_its_budget_without_another_silos_remainder(
    silo_api, operator_api, members, federation_with_data, silo_user, other_silo_user
):
    from market.budgets.ledger import BudgetExceeded
    from market.budgets.services import budget_refusal_record

    shortfalls = [
        {
            "organisation_id": user.organisation_id,
            "organisation": user.organisation.name,
            "budget_id": index,
            "needed": "2.500000",
            "remaining": remaining,
        }
        for index, (user, remaining) in enumerate(
            ((other_silo_user, "0.123456"), (silo_user, "1.000000"))
        )
    ]
    refused = BudgetExceeded(
        "Contoso Bank's privacy budget in 'adult-income' has ε = 0.123456 left, but job #9 "
        "needs ε = 2.500000 more (party-level) (1 other silo(s) too).",
        details={"federation": "adult-income", "silos": shortfalls},
    )
    budget_refusal_record(error=refused, actor=None, target=federation_with_data)
    url = "/api/federations/adult-income/budget-refusals/"
    assert [refusal["message"] for refusal in silo_api.get(url).json()] == [
        "Your privacy budget in 'adult-income' has ε = 1.000000 left, but this needs ε = 2.500000 more. Add more "
        "noise, query fewer public rows, or ask an operator."
    ]
    assert operator_api.get(url).json()[0]["message"] == str(refused)
