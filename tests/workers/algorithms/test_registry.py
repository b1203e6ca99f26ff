import numpy as np
import pytest

from workers.algorithms import algorithm_get, kind_choices
from workers.algorithms.registry import ALGORITHMS, PRIVACY_LEVELS, FusionAlgorithm
from workers.privacy.costs import fedkt_l1_cost


def test_the_registry_offers_every_registered_kind_with_its_label_fedkt_first():
    assert kind_choices() == [
        ("fedkt", "FedKT"),
        ("ensemble", "Ensemble of local models"),
        ("distill", "Ensemble distilled into one model"),
        ("cpfl", "Cohort-parallel distillation"),
        ("stack", "Stacked fusion"),
    ]


def test_federated_distillation_is_not_a_job_kind():
    assert "fd" not in ALGORITHMS


def test_fedkt_prices_an_l1_job_for_the_votes_a_weighted_submission_moves():
    privacy = {
        "mechanism": "laplace",
        "gamma": 0.04,
        "sigma": None,
        "delta": 1e-5,
        "n_queries": 100,
    }
    settings = {"partitions": 2, "teachers": 5, "vote": "class_weighted", "vote_weight_max": 4}
    fedkt = algorithm_get("fedkt")
    assert fedkt.votes_per_submission(settings) == 8
    expected = fedkt_l1_cost(**privacy, partitions=2, teachers=5, vote_shift=8)
    assert fedkt.l1_cost(settings, privacy=privacy) == expected
    assert fedkt.l1_cost(settings, privacy=privacy, vote_shift=16).report.vote_shift == 16


def test_every_registered_kind_defines_the_whole_interface_its_callers_use():
    for algorithm in ALGORITHMS.values():
        assert isinstance(algorithm, FusionAlgorithm), algorithm.name


def test_only_fedkt_with_vote_auto_and_the_stack_read_the_evaluation_split():
    for algorithm in ALGORITHMS.values():
        reads = algorithm.reads_evaluation(algorithm.validate({}))
        assert reads is (algorithm.name == "stack"), algorithm.name
    fedkt = algorithm_get("fedkt")
    assert fedkt.reads_evaluation(fedkt.validate({"vote": "auto"})) is True


def test_only_fedkt_votes_without_an_integer_sensitivity_and_the_stack_refuse_server_noise():
    for algorithm in ALGORITHMS.values():
        refusal = algorithm.noise_refusal(algorithm.validate({}))
        assert (refusal is not None) is (algorithm.name == "stack"), algorithm.name
    fedkt = algorithm_get("fedkt")
    assert "Soft voting cannot run at L1" in fedkt.noise_refusal(fedkt.validate({"vote": "soft"}))


def test_a_members_probabilities_split_into_its_students_and_its_best_by_one_rule():
    from workers.algorithms.registry import (
        Member,
        member_model_positions,
        member_probabilities_split,
    )

    probabilities = np.array([[[1.0, 0.0]], [[0.5, 0.5]], [[0.2, 0.8]]])
    with_own = Member("1", "1", 10, 0.5, n_models=3, own_model=True)
    positions = member_model_positions(with_own)
    assert (positions.students, positions.best) == ((0, 1), (2,))
    split = member_probabilities_split(probabilities, member=with_own)
    assert (split.students.tolist(), split.best.tolist()) == (
        [[[1.0, 0.0]], [[0.5, 0.5]]],
        [[0.2, 0.8]],
    )
    students_only = Member("1", "1", 10, 0.5, n_models=3)
    split = member_probabilities_split(probabilities, member=students_only)
    assert len(split.students) == 3
    assert split.best == pytest.approx(np.array([[1.7 / 3, 1.3 / 3]]))
    with pytest.raises(ValueError, match="submission #1's 2 model"):
        member_probabilities_split(probabilities, member=Member("1", "1", 10, 0.5, n_models=2))


def test_fedkt_defaults_an_l0_job_to_auto_where_the_evaluation_split_allows_it_and_an_l1_job_to_its_private_model():
    from workers.algorithms.fedkt_fusion import DEFAULT_PRIVATE_FINAL_MODEL, DEFAULT_SEMI_PRIVATE

    fedkt = algorithm_get("fedkt")
    # two classes with two rows each: both halves hold both classes
    assert fedkt.level_defaults({}, privacy_level="L0", evaluation_class_counts=[2, 2]) == {
        "vote": "auto"
    }
    assert fedkt.level_defaults({}, privacy_level="L0", evaluation_class_counts=[5, 1]) == {}
    assert fedkt.level_defaults(
        {"vote": "soft"}, privacy_level="L0", evaluation_class_counts=[9, 9]
    ) == {"vote": "soft"}
    assert fedkt.level_defaults({}, privacy_level="L1", evaluation_class_counts=[]) == {
        "final_model": DEFAULT_PRIVATE_FINAL_MODEL,
        "semi_private": DEFAULT_SEMI_PRIVATE,
    }
    # "final" is the old name of "final_model": a job naming it chose its model
    assert fedkt.level_defaults(
        {"final": "xgboost"}, privacy_level="L1", evaluation_class_counts=[]
    ) == {"final": "xgboost", "semi_private": DEFAULT_SEMI_PRIVATE}
    # L2 keeps its final model; both private levels fit semi-private students (issue 40)
    assert fedkt.level_defaults({}, privacy_level="L2", evaluation_class_counts=[9, 9]) == {
        "semi_private": DEFAULT_SEMI_PRIVATE
    }


def test_every_other_kind_has_the_same_defaults_at_every_privacy_level():
    for algorithm in ALGORITHMS.values():
        if algorithm.name == "fedkt":
            continue
        for level in PRIVACY_LEVELS:
            assert algorithm.level_defaults(
                {"k": 1}, privacy_level=level, evaluation_class_counts=[9, 9]
            ) == {"k": 1}, (algorithm.name, level)


def test_fedkts_vote_weight_shorthand_is_a_class_weighted_vote_of_that_largest_weight():
    fedkt = algorithm_get("fedkt")
    settings = fedkt.validate(fedkt.vote_weight_parameters(3))
    assert (settings["vote"], settings["vote_weight_max"]) == ("class_weighted", 3)
    assert fedkt.votes_per_submission({**settings, "partitions": 2}) == 6
