"""A price quote tells a silo whether a job fits its own budget only: whether it fits every silo's would let it
binary-search the smallest remainder of the others (the budget-price API and the job launcher's price share
market.budgets.selectors.price_quote_visible)."""

from market.budgets.ledger import budgets_ensure
from market.budgets.models import PrivacyBudget
from tests.market.budgets.conftest import LAPLACE

PRICE_URL = "/api/federations/adult-income/budget-price/"


def test_a_silo_is_told_whether_the_job_fits_its_own_budget_not_everyones(operator_api, silo_api, members,
                                                                           federation_with_data, other_silo_user):
    budgets_ensure(federation=federation_with_data)
    PrivacyBudget.objects.filter(federation=federation_with_data,
                                 organisation=other_silo_user.organisation).update(epsilon_limit="0.000001")
    body = {"privacy": LAPLACE, "partitions": 2}
    assert operator_api.post(PRICE_URL, body, format="json").json()["fits"] is False
    own = silo_api.post(PRICE_URL, body, format="json").json()
    assert own["fits"] is True and [silo["organisation"] for silo in own["silos"]] == ["Northwind Hospital"]
