"""The defaults a job takes when it names none: an L1 job's must fit a new member's privacy budget."""

import pytest

from market.jobs.models import Job
from market.jobs.parameters import (
    L1_DEFAULT_SHARE_OF_LIMIT,
    job_parameter_defaults,
    job_parameters_validate,
)
from market.jobs.privacy_costs import job_privacy_cost
from workers.algorithms import kind_choices
from workers.algorithms.fedkt_fusion import DEFAULT_QUERY_SELECTION, DEFAULT_SEMI_SUPERVISED
from workers.algorithms.schema import MIN_TRAINING_ROWS
from workers.privacy.settings import DEFAULT_GNMAX_NOISE_RATIO

DEMO_PUBLIC_ROWS = (
    3000  # the demo's public data, on which all rows at γ = 0.04 cost ε 46.6 per silo
)


def _price(parameters: dict) -> float:
    return job_privacy_cost(kind="fedkt", parameters=parameters).report.epsilon


@pytest.fixture
def plain_federation(federation_with_data):
    """A federation created with the server's defaults: no default parameters, a new member's ε limit of 10."""
    federation_with_data.default_parameters = {}
    federation_with_data.save()
    return federation_with_data


def test_the_server_default_l1_job_is_gnmax_fitting_half_of_a_new_members_default_budget(
    plain_federation,
):
    defaults = job_parameter_defaults(
        kind="fedkt", federation=plain_federation, n_public=DEMO_PUBLIC_ROWS, privacy_level="L1"
    )
    assert float(plain_federation.default_epsilon_limit) == 10.0
    assert plain_federation.members.count() == 1  # one silo: a query holds at most s = 2 votes
    privacy = defaults["privacy"]
    assert privacy["mechanism"] == "gaussian" and privacy["gamma"] is None
    assert defaults["query_count"] == privacy["n_queries"] and "query_fraction" not in defaults
    # σ = 0.3 × 2 votes would leave fewer than the 10 rows a model needs: 10 rows, with the least σ that fits.
    assert (
        privacy["n_queries"] == MIN_TRAINING_ROWS
        and privacy["sigma"] > DEFAULT_GNMAX_NOISE_RATIO * 2
    )
    assert (
        _price(defaults)
        <= 10.0 * L1_DEFAULT_SHARE_OF_LIMIT
        < _price({**defaults, "privacy": {**privacy, "sigma": privacy["sigma"] * 0.99}})
    )


def test_a_larger_federation_gets_noise_in_proportion_to_its_votes_and_the_most_queries_that_fit(
    plain_federation,
):
    from market.accounts.services import organisation_create
    from market.federations.models import Membership

    for index in range(49):
        Membership.objects.create(
            federation=plain_federation, organisation=organisation_create(name=f"Silo {index}")
        )
    defaults = job_parameter_defaults(
        kind="fedkt", federation=plain_federation, n_public=DEMO_PUBLIC_ROWS, privacy_level="L1"
    )
    privacy = defaults["privacy"]
    assert privacy["sigma"] == pytest.approx(DEFAULT_GNMAX_NOISE_RATIO * 50 * 2)
    at_most = _price(defaults)
    assert (
        at_most
        <= 10.0 * L1_DEFAULT_SHARE_OF_LIMIT
        < _price({**defaults, "privacy": {**privacy, "n_queries": privacy["n_queries"] + 1}})
    )
    assert privacy["n_queries"] > 100


def test_a_named_laplace_mechanism_keeps_its_default_gamma_and_the_queries_that_fit(
    plain_federation,
):
    from market.jobs.parameters import job_parameters_validate

    defaults = job_parameters_validate(
        kind="fedkt",
        privacy_level="L1",
        parameters={"privacy": {"mechanism": "laplace"}},
        federation=plain_federation,
        n_public=DEMO_PUBLIC_ROWS,
    )
    assert defaults["privacy"] == {
        "mechanism": "laplace",
        "gamma": 0.04,
        "sigma": None,
        "delta": 1e-5,
        "n_queries": 89,
    }
    assert defaults["query_count"] == 89 and "query_fraction" not in defaults
    assert (
        _price(defaults)
        <= 10.0 * L1_DEFAULT_SHARE_OF_LIMIT
        < _price({**defaults, "privacy": {**defaults["privacy"], "n_queries": 90}})
    )
    everything = {**defaults, "privacy": {**defaults["privacy"], "n_queries": DEMO_PUBLIC_ROWS}}
    assert _price(everything) == pytest.approx(
        46.648, abs=1e-3
    )  # what the Laplace default was before it was calibrated: it could never run


def test_an_l1_default_that_already_fits_is_kept_and_l0_keeps_every_row(federation_with_data):
    l1 = job_parameter_defaults(
        kind="fedkt", federation=federation_with_data, n_public=2000, privacy_level="L1"
    )
    assert (
        l1["query_fraction"] == 0.01 and l1["privacy"]["n_queries"] == 20
    )  # the federation's own default
    federation_with_data.default_parameters = {}
    federation_with_data.save()
    l0 = job_parameter_defaults(
        kind="fedkt", federation=federation_with_data, n_public=2000, privacy_level="L0"
    )
    assert l0 == {
        "partitions": 2,
        "query_fraction": 1.0,
        "final_model": {"family": "random_forest", "n_estimators": 100, "max_depth": 8},
        "vote": "auto",  # L0's default vote, stored explicitly
        "vote_weight_max": 4,
        "query_selection": DEFAULT_QUERY_SELECTION,
        "semi_supervised": DEFAULT_SEMI_SUPERVISED,
    }


def test_auto_is_the_l0_default_vote_only_where_the_evaluation_split_allows_it(
    federation_with_data,
):
    def default_vote(level, **given):
        validated = job_parameters_validate(
            kind="fedkt",
            privacy_level=level,
            parameters=given,
            federation=federation_with_data,
            n_public=2000,
        )
        return validated.get("vote", "consistent_hard")

    assert default_vote("L0") == "auto"
    assert (
        default_vote("L1") == "consistent_hard"
    )  # the only vote an L1 job is charged for as it is
    assert default_vote("L2") == "consistent_hard"
    assert default_vote("L0", vote="soft") == "soft"  # a named vote is kept
    assert default_vote("L0", vote="consistent_hard") == "consistent_hard"
    split = federation_with_data.evaluation_splits.get()
    split.class_counts = [sum(split.class_counts) - 1, 1]
    split.save()  # one row of the second class: a half would miss it
    assert default_vote("L0") == "consistent_hard"


def test_a_larger_limit_lets_the_default_l1_job_query_more_rows_up_to_all_of_them(plain_federation):
    plain_federation.default_epsilon_limit = 40
    plain_federation.default_parameters = {"gamma": 0.04}  # this federation's noise: Laplace
    plain_federation.save()
    defaults = job_parameter_defaults(
        kind="fedkt", federation=plain_federation, n_public=DEMO_PUBLIC_ROWS, privacy_level="L1"
    )
    assert 89 < defaults["query_count"] < DEMO_PUBLIC_ROWS and _price(defaults) <= 20.0
    plain_federation.default_epsilon_limit = 100
    plain_federation.save()
    defaults = job_parameter_defaults(
        kind="fedkt", federation=plain_federation, n_public=DEMO_PUBLIC_ROWS, privacy_level="L1"
    )
    assert (
        defaults["query_fraction"] == 1.0 and defaults["privacy"]["n_queries"] == DEMO_PUBLIC_ROWS
    )


def test_the_job_models_kinds_are_the_engine_registrys():
    assert list(Job._meta.get_field("kind").choices) == kind_choices()
    assert "fd" not in dict(Job._meta.get_field("kind").choices)


def test_a_stack_runs_at_l0_and_on_l2_submissions_and_is_refused_at_l1(federation_with_data):
    from market.errors import InvalidInput

    def validated(level):
        return job_parameters_validate(
            kind="stack",
            privacy_level=level,
            parameters={},
            federation=federation_with_data,
            n_public=2000,
        )

    assert validated("L0")["aggregator"] == validated("L2")["aggregator"] == "auto"
    with pytest.raises(InvalidInput, match="A stacked fusion cannot run at L1"):
        validated("L1")


def test_an_l1_job_that_names_no_final_model_fits_the_private_default_and_l0_keeps_the_forest(
    plain_federation,
):
    from workers.algorithms.fedkt_fusion import DEFAULT_FINAL_MODEL, DEFAULT_PRIVATE_FINAL_MODEL

    def final_model(privacy_level: str, parameters=None) -> dict:
        return job_parameters_validate(
            kind="fedkt",
            privacy_level=privacy_level,
            parameters=parameters,
            federation=plain_federation,
            n_public=DEMO_PUBLIC_ROWS,
        )["final_model"]

    assert DEFAULT_PRIVATE_FINAL_MODEL == {"family": "logistic_regression", "C": 0.1}
    assert final_model("L1") == DEFAULT_PRIVATE_FINAL_MODEL
    assert final_model("L0") == DEFAULT_FINAL_MODEL
    assert final_model("L1", {"final_model": {"family": "random_forest"}}) == {
        "family": "random_forest"
    }
    assert final_model("L1", {"final": "random_forest"}) == {"family": "random_forest"}
