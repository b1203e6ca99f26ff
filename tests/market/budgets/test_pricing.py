import pytest

from market.errors import InvalidInput
from market.jobs.privacy_costs import job_privacy_cost

PRIVACY = {"mechanism": "laplace", "gamma": 0.04, "sigma": None, "delta": 1e-5, "n_queries": 100}


def test_a_kind_that_adds_no_server_noise_has_no_l1_price():
    with pytest.raises(InvalidInput) as refusal:
        job_privacy_cost(kind="ensemble", parameters={"privacy": PRIVACY})
    assert str(refusal.value) == (
        "Jobs of kind 'ensemble' add no server noise: they run at L0 or on L2 submissions and cost no "
        "L1 budget."
    )


def test_the_job_kind_prices_an_l1_job():
    parameters = {"partitions": 3, "teachers": 5, "privacy": PRIVACY}
    cost = job_privacy_cost(kind="fedkt", parameters=parameters)
    assert cost.report.vote_shift == 3 and cost.report.n_queries == 100
