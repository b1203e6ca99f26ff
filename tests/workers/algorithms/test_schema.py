"""The parameter schema the engines share: queries by meaning, bounded learners, work estimates."""

import pytest

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.registry import algorithm_get
from workers.algorithms.schema import (
    learner_work,
    names_query,
    query_defaults,
    query_of,
    query_rows,
    query_setting,
    query_within,
    too_few_training_rows,
    with_query_count,
)


@pytest.mark.parametrize(
    "params, expected",
    [
        ({}, {"query_fraction": 1.0}),
        (
            {"query_fraction": 1},
            {"query_fraction": 1.0},
        ),  # what JSON.stringify makes of 1.0: still all rows
        ({"query_fraction": 0.25}, {"query_fraction": 0.25}),
        ({"query_count": 1}, {"query_count": 1}),
        ({"query": 0.1}, {"query_fraction": 0.1}),
        ({"query": 500}, {"query_count": 500}),
    ],
)
def test_a_query_setting_says_what_it_means(params, expected):
    assert query_setting(params) == expected


@pytest.mark.parametrize(
    "params, sentence",
    [
        (
            {"query": 1},
            "'query': 1 is ambiguous (one public row, or all of them?): write \"query_fraction\": 1 for "
            'every public row or "query_count": 1 for one row.',
        ),
        ({"query": 1.0}, "'query': 1.0 is ambiguous"),
        (
            {"query": 500.0},
            "'query': 500.0 is a count written as a fraction; write \"query_count\": 500.",
        ),
        ({"query_fraction": 0}, "'query_fraction' must be a number in (0, 1], not 0."),
        ({"query_fraction": 2}, "'query_fraction' must be a number in (0, 1], not 2."),
        ({"query_count": 2.5}, "'query_count' must be a whole number from 1 to 10000000, not 2.5."),
        (
            {"query_count": True},
            "'query_count' must be a whole number from 1 to 10000000, not True.",
        ),
    ],
)
def test_a_query_that_could_mean_two_things_is_refused_with_a_sentence(params, sentence):
    with pytest.raises(ValueError) as refused:
        query_setting(params)
    assert sentence in str(refused.value)


def test_query_rows_counts_the_rows_a_setting_draws():
    assert query_rows({"query_fraction": 1.0}, n_public=3000) == 3000
    assert query_rows({"query_fraction": 0.01}, n_public=3000) == 30
    assert query_rows({"query_count": 7}, n_public=3000) == 7


def test_learner_work_is_trees_times_depth_times_rows():
    assert (
        learner_work({"family": "random_forest", "n_estimators": 100, "max_depth": 8}, n_rows=3000)
        == 2_400_000
    )
    assert (
        learner_work({"family": "xgboost", "n_estimators": 10, "max_depth": 4}, n_rows=50) == 2000
    )
    assert learner_work({"family": "logistic_regression"}, n_rows=10) == 10_000
    assert learner_work({"family": "mlp", "hidden_sizes": [200, 100], "epochs": 2}, n_rows=10) == 60
    assert learner_work({"family": "kernel"}, n_rows=300) == 90_000


def test_every_kind_estimates_the_rows_it_trains_on_and_its_work():
    fedkt = algorithm_get("fedkt")
    estimate = fedkt.estimate(fedkt.validate({"query_count": 30}), n_public=3000, n_member_models=4)
    assert (estimate.training_rows, estimate.work) == (30, 3000 * 4 + 100 * 8 * 30)
    auto = fedkt.estimate(
        fedkt.validate({"query_count": 30, "vote": "auto"}), n_public=3000, n_member_models=4
    )  # three vote rules, three folds and a refit each of the stacked and the operator-only candidate: eleven
    assert auto.work == 3000 * 4 + 11 * 100 * 8 * 30
    # the stacked candidate's aggregators: a whole stacked fit per fold of its cross-fitting and for its refit,
    # each fitting both aggregators on 5 folds and refitting the chosen one, 4 × (2 × 5 + 1)
    assert (estimate.aggregator_fits, auto.aggregator_fits) == (0, 44)
    stack = algorithm_get("stack")
    estimate = stack.estimate(stack.validate({"query_count": 40}), n_public=100, n_member_models=3)
    assert (estimate.training_rows, estimate.work) == (40, 300 + 100 * 8 * 40)
    assert (
        estimate.aggregator_fits == 11
    )  # both aggregators on each of 5 folds, then the chosen one's refit
    weights = stack.estimate(
        stack.validate({"aggregator": "weights"}), n_public=100, n_member_models=3
    )
    assert weights.aggregator_fits == 6
    ensemble = algorithm_get("ensemble")
    estimate = ensemble.estimate(ensemble.validate({}), n_public=100, n_member_models=3)
    assert (estimate.training_rows, estimate.work) == (None, 300)
    distill = algorithm_get("distill")
    estimate = distill.estimate(
        distill.validate({"query_fraction": 0.5}), n_public=100, n_member_models=1
    )
    assert (estimate.training_rows, estimate.work) == (50, 100 + 50 * 50)
    cpfl = algorithm_get("cpfl")
    estimate = cpfl.estimate(cpfl.validate({"query_count": 10}), n_public=100, n_member_models=2)
    assert (estimate.training_rows, estimate.work) == (10, 200 + 20 * 10 * 1)


def test_every_kind_declares_help_for_each_of_its_keys():
    for name in ("fedkt", "ensemble", "distill", "cpfl", "stack"):
        algorithm = algorithm_get(name)
        assert set(algorithm.help) <= set(algorithm.keys) | {"selection"}
        assert all(
            text.endswith(".") or text.endswith("}") or text.endswith(")")
            for text in algorithm.help.values()
        )


@pytest.mark.parametrize(
    "value", [10**400, float("inf"), float("nan"), "0.5", [0.5], {"a": 1}, None, True]
)
def test_numbers_out_of_reach_and_other_types_are_refused_with_a_sentence(value):
    for params in (
        {"query": value},
        {"query_fraction": value},
        {"final_model": {"family": "xgboost", "learning_rate": value}},
        {"final_model": {"family": "random_forest", "max_features": value}}
        if value is not None
        else {},
    ):
        if not params:
            continue
        with pytest.raises(ValueError):
            algorithm_get("fedkt").validate(params)


def test_the_fitted_feature_view_follows_the_learner_the_job_fits_on_public_rows():
    from workers.algorithms.schema import fitted_feature_view

    assert fitted_feature_view({"final_model": {"family": "random_forest"}}) == "ordinal"
    assert fitted_feature_view({"student": {"family": "mlp"}}) == "one_hot"
    assert fitted_feature_view({"student": "xgboost"}) == "ordinal"
    assert fitted_feature_view({}) == "one_hot"  # an ensemble fits nothing


def test_a_query_is_written_by_its_meaning_a_float_a_fraction_and_an_int_a_count():
    assert query_of(0.01) == {"query_fraction": 0.01}
    assert query_of(500) == {"query_count": 500}
    with pytest.raises(ValueError, match="'query_fraction' must be a number in"):
        query_of(1.5)


def test_query_keys_are_found_replaced_and_taken_from_the_federations_defaults_by_the_schema():
    assert names_query({"proxy": 0.5}) and not names_query({"partitions": 2})
    assert with_query_count({"partitions": 2, "query": 0.5, "vote": "soft"}, 40) == {
        "partitions": 2,
        "vote": "soft",
        "query_count": 40,
    }
    defaults = {"gamma": 0.04, "query_fraction": 0.01, "delta": 1e-5}
    assert query_defaults(defaults, keys=algorithm_get("fedkt").keys) == {"query_fraction": 0.01}
    assert query_defaults(defaults, keys=algorithm_get("ensemble").keys) == {}


def test_a_query_beyond_the_public_rows_or_too_small_to_train_on_is_refused_with_a_sentence():
    query_within({"query_count": 100}, n_public=100)
    with pytest.raises(ValueError, match=r"query 1 to 100 public examples .* not 101\."):
        query_within({"query_count": 101}, n_public=100)
    assert too_few_training_rows(None, n_classes=3) is None
    assert too_few_training_rows(10, n_classes=3) is None
    assert too_few_training_rows(12, n_classes=14) == (
        "These settings query 12 public row(s), too few to train a model on 14 classes; query at least 14 "
        '(e.g. "query_count": 14, or "query_fraction": 1 for every row).'
    )
