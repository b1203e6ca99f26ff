"""Issue 25: which public rows an L1 job queries, how its global model learns from the rest, and the GNMax
calibration a job gets when it names no noise (bounds checked against dp-accounting, not only the code here)."""

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant
from sklearn.datasets import load_breast_cancer, make_blobs

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.fedkt import server_step
from workers.algorithms.fedkt_fusion import DEFAULT_QUERY_SELECTION, DEFAULT_SEMI_SUPERVISED
from workers.algorithms.registry import Member, algorithm_get
from workers.algorithms.transfer import select_medoids, spread_labels
from workers.privacy.costs import BudgetView, calibrate_gnmax, fedkt_l1_cost, fedkt_price
from workers.privacy.mechanisms import GaussianNoise

TREE = {"family": "decision_tree", "max_depth": 4}
DELTA = 1e-5


@pytest.fixture(scope="module")
def blobs():
    features, blob = make_blobs(
        n_samples=600, centers=6, n_features=5, cluster_std=0.5, random_state=3
    )
    return features, blob


def test_medoids_are_distinct_real_rows_one_per_cluster_and_the_same_for_the_same_seed(blobs):
    features, blob = blobs
    chosen = select_medoids(features, 6, seed=11)
    assert len(set(chosen.tolist())) == 6 and np.all(np.diff(chosen) > 0)
    assert sorted(blob[chosen].tolist()) == [0, 1, 2, 3, 4, 5]  # one row in every cluster
    assert np.array_equal(chosen, select_medoids(features, 6, seed=11))
    many = select_medoids(features, 150, seed=11)
    assert len(np.unique(many)) == 150  # distinct even where several centroids share a nearest row
    assert np.array_equal(select_medoids(features, 600, seed=11), np.arange(600))


def test_medoid_queries_read_no_votes_and_no_labels(blobs):
    features, _ = blobs
    rng = np.random.default_rng(0)
    queried = [
        server_step(
            rng.integers(0, 9, size=(len(features), 2)),
            features,
            n_classes=2,
            final=TREE,
            query=12,
            seed=5,
            query_selection="medoids",
        ).queried_indices
        for _ in range(3)
    ]
    assert all(np.array_equal(queried[0], other) for other in queried[1:])
    assert np.array_equal(queried[0], select_medoids(features, 12, seed=_query_seed(5)))


def _query_seed(seed: int) -> int:
    from workers.algorithms.transfer import child_seeds

    return child_seeds(seed, 2)[0]


def test_label_spreading_carries_each_clusters_one_label_to_the_whole_cluster(blobs):
    features, blob = blobs
    labelled = np.array([int(np.flatnonzero(blob == cluster)[0]) for cluster in range(6)])
    labels = np.array([cluster % 2 for cluster in range(6)])
    spread = spread_labels(features, labelled, labels, n_classes=2)
    assert np.array_equal(spread, blob % 2)


@pytest.mark.parametrize("method", ["self_training", "label_spreading"])
def test_a_semi_supervised_final_model_learns_from_rows_nobody_labelled(method):
    features, labels = load_breast_cancer(return_X_y=True)
    votes = np.zeros((len(labels), 2), dtype=np.int64)
    votes[np.arange(len(labels)), labels] = 10  # every row's votes agree with its label
    plain, semi = (
        server_step(
            votes, features, n_classes=2, final=TREE, query=20, seed=3, semi_supervised=choice
        )
        for choice in ("none", method)
    )
    assert np.array_equal(plain.queried_indices, semi.queried_indices)
    fitted_rows = [
        result.final_model.estimator_.tree_.n_node_samples[0] for result in (plain, semi)
    ]
    assert fitted_rows[0] == 20 and fitted_rows[1] > 100


def test_a_job_that_names_neither_uses_the_chosen_defaults_and_reports_them():
    engine = algorithm_get("fedkt")
    settings = engine.validate({})
    assert (settings["query_selection"], settings["semi_supervised"]) == (
        DEFAULT_QUERY_SELECTION,
        DEFAULT_SEMI_SUPERVISED,
    )
    features, labels = load_breast_cancer(return_X_y=True)
    votes = np.zeros((len(labels), 2), dtype=np.int64)
    votes[np.arange(len(labels)), labels] = 4
    members = [Member(key="a", organisation="a", n_examples=10, validation_score=0.0, n_models=2)]
    fusion = engine.fuse(
        votes,
        features,
        members=members,
        n_classes=2,
        params={"query_count": 30, "final_model": {"family": "random_forest", "n_estimators": 5}},
        seed=1,
    )
    assert fusion.details["query_selection"] == DEFAULT_QUERY_SELECTION
    assert fusion.details["semi_supervised"] == DEFAULT_SEMI_SUPERVISED
    for name, value in (("query_selection", "nearest"), ("semi_supervised", True)):
        with pytest.raises(ValueError, match=name):
            engine.validate({name: value})


def _dp_accounting_epsilon(sigma: float, n_queries: int, *, vote_shift: int = 2) -> float:
    """GNMax over the vote vector: a silo moves ``vote_shift`` votes from one class to another, L2 sensitivity
    √2 × vote_shift; n_queries Gaussian releases, composed by dp-accounting's own RDP accountant."""
    accountant = RdpAccountant()
    accountant.compose(
        SelfComposedDpEvent(
            GaussianDpEvent(noise_multiplier=sigma / (np.sqrt(2) * vote_shift)), n_queries
        )
    )
    return accountant.get_epsilon(DELTA)


@pytest.mark.parametrize("epsilon", [2.56, 4.73, 8.0])
def test_gnmax_calibration_for_fifty_silos_spends_what_dp_accounting_says_fits(epsilon):
    price = fedkt_price(partitions=2, teachers=5)
    solved = calibrate_gnmax(
        [BudgetView(epsilon_limit=epsilon, delta=DELTA, vote_shift=2)],
        total_votes=100,
        noise_ratio=0.3,
        delta=DELTA,
        price=price,
        min_queries=10,
        max_queries=6000,
    )
    assert solved["mechanism"] == "gaussian" and solved["sigma"] == pytest.approx(30.0)
    n_queries = solved["n_queries"]
    assert n_queries >= 10
    # dp-accounting agrees that these queries fit and one more does not (to its own rounding of the orders).
    assert _dp_accounting_epsilon(30.0, n_queries) <= epsilon * 1.01
    assert _dp_accounting_epsilon(30.0, n_queries + 1) > epsilon * 0.99
    assert _dp_accounting_epsilon(30.0, int(n_queries * 1.05) + 1) > epsilon


def test_a_small_federation_gets_the_fewest_rows_with_the_least_noise_dp_accounting_allows():
    price = fedkt_price(partitions=2, teachers=5)
    solved = calibrate_gnmax(
        [BudgetView(epsilon_limit=5.0, delta=DELTA, vote_shift=2)],
        total_votes=8,  # four silos
        noise_ratio=0.3,
        delta=DELTA,
        price=price,
        min_queries=10,
        max_queries=3000,
    )
    assert solved["n_queries"] == 10 and solved["sigma"] > 0.3 * 8
    assert _dp_accounting_epsilon(solved["sigma"], 10) == pytest.approx(5.0, rel=1e-2)
    assert _dp_accounting_epsilon(solved["sigma"] * 0.95, 10) > 5.0


def test_calibration_fits_what_a_silo_has_left_after_its_earlier_jobs():
    price = fedkt_price(partitions=2, teachers=5)
    earlier = fedkt_l1_cost(
        mechanism="gaussian", gamma=None, sigma=30.0, delta=DELTA, n_queries=100, partitions=2
    )
    fresh, tired = (
        calibrate_gnmax(
            [BudgetView(epsilon_limit=5.0, delta=DELTA, committed=committed, vote_shift=2)],
            total_votes=100,
            noise_ratio=0.3,
            delta=DELTA,
            price=price,
            min_queries=10,
            max_queries=6000,
        )
        for committed in ((), (earlier,))
    )
    assert tired["n_queries"] < fresh["n_queries"]
    # Independently: the earlier 100 queries and the new ones at σ 30 are one Gaussian composition.
    assert _dp_accounting_epsilon(30.0, 100 + tired["n_queries"]) <= 5.0 * 1.01
    assert _dp_accounting_epsilon(30.0, 100 + tired["n_queries"] + 1) > 5.0 * 0.99


def test_noise_is_sampled_as_the_calibration_says():
    # The σ the calibration prices is the σ OpenDP samples: the spread of many noisy counts.
    noisy = GaussianNoise(sigma=30.0).noisy_counts(np.zeros((4000, 2), dtype=np.int64))
    assert noisy.std() == pytest.approx(30.0, rel=0.05)


def test_the_defaults_are_the_ones_the_validation_experiments_chose():
    """The first round chose the query selection and the semi-supervised step (with the forest); the second, with
    those, the L1 final model and σ / votes: the same rule, validation rows only."""
    import json

    from workers.algorithms.fedkt_fusion import DEFAULT_PRIVATE_FINAL_MODEL
    from workers.privacy.settings import DEFAULT_GNMAX_NOISE_RATIO
    from workers.reproduce.private import FINAL_MODELS, FINAL_RESULTS, RESULTS, choose_defaults

    first, second = json.loads(RESULTS.read_text()), json.loads(FINAL_RESULTS.read_text())
    for entries in (first, second):
        assert entries and not any(entry.get("test") for entry in entries)  # validation rows only
    assert choose_defaults(first)[1:3] == (DEFAULT_QUERY_SELECTION, DEFAULT_SEMI_SUPERVISED)
    ratio, selection, semi, final = choose_defaults(second)
    assert (ratio, selection, semi) == (
        DEFAULT_GNMAX_NOISE_RATIO,
        DEFAULT_QUERY_SELECTION,
        DEFAULT_SEMI_SUPERVISED,
    )
    assert FINAL_MODELS[final] == DEFAULT_PRIVATE_FINAL_MODEL


def _validation_runs(scores: dict) -> list[dict]:
    """Synthetic validation entries: {(ratio, selection, semi): (accuracy, balanced)} at every ε, 3 seeds."""
    from workers.reproduce.private import EPSILONS

    return [
        {
            "level": "L1",
            "noise_ratio": ratio,
            "query_selection": selection,
            "semi_supervised": semi,
            "epsilon_budget": epsilon,
            "seed": seed,
            "accuracy": accuracy + 0.01 * (seed - 1),
            "balanced_accuracy": balanced,
        }
        for (ratio, selection, semi), (accuracy, balanced) in scores.items()
        for epsilon in EPSILONS
        for seed in range(3)
    ]


def test_semi_supervised_training_is_the_default_only_where_it_wins_on_validation_rows():
    from workers.reproduce.private import choose_defaults

    wins = {(0.3, "random", "none"): (0.78, 0.62), (0.3, "random", "self_training"): (0.81, 0.66)}
    assert choose_defaults(_validation_runs(wins))[2] == "self_training"
    loses = {(0.3, "random", "none"): (0.80, 0.66), (0.3, "random", "self_training"): (0.77, 0.60)}
    assert choose_defaults(_validation_runs(loses))[2] == "none"
    # Within one standard error of the best accuracy the gate's measure, balanced accuracy, decides.
    tie = {(0.3, "random", "none"): (0.800, 0.66), (0.3, "medoids", "none"): (0.801, 0.60)}
    assert choose_defaults(_validation_runs(tie))[1] == "random"


def test_the_results_page_shows_the_tables_the_saved_runs_give():
    import json
    from pathlib import Path

    from workers.reproduce.private import (
        CEILING_RESULTS,
        FINAL_RESULTS,
        ceiling_summary,
        summary,
        validation_summary,
    )

    page = (Path(__file__).resolve().parents[3] / "docs" / "results" / "private.md").read_text()
    assert validation_summary() in page
    assert validation_summary(FINAL_RESULTS) in page
    assert summary() in page
    assert ceiling_summary() in page
    assert not any(run.get("test") for run in json.loads(CEILING_RESULTS.read_text()))
