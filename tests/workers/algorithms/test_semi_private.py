"""Semi-private students (issue 40, item 1): a private FedKT model fitted on the released noisy labels together with
the operator's labelled fit half of the evaluation split, the mix chosen by cross-fitting inside that half; the
report half is never read, and turning it off gives today's model."""

import numpy as np
import pytest

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.auto_fusion import EvaluationRows, evaluation_halves
from workers.algorithms.fedkt import server_step
from workers.algorithms.fedkt_fusion import DEFAULT_PRIVATE_FINAL_MODEL, DEFAULT_SEMI_PRIVATE
from workers.algorithms.operator_baseline import operator_only_baseline
from workers.algorithms.registry import Member, algorithm_get
from workers.algorithms.semi_private import (
    SEMI_PRIVATE_CANDIDATES,
    SEMI_PRIVATE_PRIVACY_NOTE,
)
from workers.datasets import load_adult
from workers.metrics import classification_metrics

FEDKT = algorithm_get("fedkt")
MEMBERS = [
    Member(key=str(j), organisation=str(j), n_examples=100, validation_score=0.5) for j in range(5)
]
N_PUBLIC, N_QUERIED, N_EVALUATION = 3000, 200, 1000


@pytest.fixture(scope="module")
def adult():
    """Adult's public rows and 1,000 of its test rows as the operator's evaluation split, in the one-hot view the
    private default final model reads and the ordinal view of the operator-only forest; votes that say nothing
    about the labels (each public row's 10 votes dealt at random): useless noisy labels."""
    one_hot, ordinal = load_adult(seed=0, view="one_hot"), load_adult(seed=0, view="ordinal")
    votes = np.random.default_rng(0).multinomial(10, [0.5, 0.5], size=N_PUBLIC)
    return {
        "public": one_hot.public_x[:N_PUBLIC],
        "votes": votes,
        "evaluation": one_hot.test_x[:N_EVALUATION],
        "evaluation_ordinal": ordinal.test_x[:N_EVALUATION],
        "labels": one_hot.test_y[:N_EVALUATION],
    }


def _fused(adult, semi_private: str | None, *, features=None, seed: int = 4):
    params = {
        "final_model": DEFAULT_PRIVATE_FINAL_MODEL,
        "query_count": N_QUERIED,
        **({"semi_private": semi_private} if semi_private else {}),
    }
    return FEDKT.fuse(
        adult["votes"],
        adult["public"],
        members=MEMBERS,
        n_classes=2,
        params=params,
        seed=seed,
        evaluation=EvaluationRows(
            adult["evaluation"] if features is None else features,
            adult["labels"],
            np.zeros((len(MEMBERS), N_EVALUATION, 2)),
        ),
    )


def _report_accuracy(model, adult, *, seed: int = 4) -> float:
    report = evaluation_halves(adult["labels"], seed=seed)[1]
    probabilities = model.predict_proba(adult["evaluation"][report])
    return classification_metrics(probabilities, adult["labels"][report], n_classes=2)["accuracy"]


def test_the_setting_is_validated_off_by_default_and_on_by_default_at_l1_and_l2():
    assert FEDKT.validate({}) == FEDKT.validate({"semi_private": "off"})
    assert "semi_private" not in FEDKT.validate({})
    assert FEDKT.validate({"semi_private": "cross_fitted"})["semi_private"] == "cross_fitted"
    assert FEDKT.reads_evaluation(FEDKT.validate({"semi_private": "cross_fitted"})) is True
    assert FEDKT.reads_evaluation(FEDKT.validate({})) is False
    with pytest.raises(
        ValueError, match="'semi_private' must be one of 'off', 'cross_fitted', not 'yes'"
    ):
        FEDKT.validate({"semi_private": "yes"})
    with pytest.raises(ValueError, match='cannot be combined with "vote": "auto"'):
        FEDKT.validate({"semi_private": "cross_fitted", "vote": "auto"})
    with pytest.raises(ValueError, match="cannot be combined with 'semi_supervised'"):
        FEDKT.validate({"semi_private": "cross_fitted", "semi_supervised": "self_training"})
    for level in ("L1", "L2"):
        assert FEDKT.level_defaults({}, privacy_level=level, evaluation_class_counts=[])[
            "semi_private"
        ] == (DEFAULT_SEMI_PRIVATE)
        assert FEDKT.level_defaults(
            {"semi_private": "off"}, privacy_level=level, evaluation_class_counts=[]
        ) == {
            "semi_private": "off",
            **({"final_model": DEFAULT_PRIVATE_FINAL_MODEL} if level == "L1" else {}),
        }
        assert "semi_private" not in FEDKT.level_defaults(
            {"semi_supervised": "self_training"}, privacy_level=level, evaluation_class_counts=[]
        )
    assert "semi_private" not in FEDKT.level_defaults(
        {}, privacy_level="L0", evaluation_class_counts=[5, 5]
    )


def test_with_useless_noisy_labels_the_semi_private_model_matches_the_operator_only_model_on_adult(
    adult,
):
    semi = _fused(adult, "cross_fitted")
    noisy_only = _fused(adult, None)
    details = semi.details["semi_private"]
    fit, report = evaluation_halves(adult["labels"], seed=4)
    assert details["operator_rows"] == len(fit) == 499
    assert set(details["cross_fitted"]) == set(SEMI_PRIVATE_CANDIDATES)
    assert details["privacy"] == SEMI_PRIVATE_PRIVACY_NOTE
    # votes dealt at random carry nothing: cross-fitting drops them for the operator's rows
    assert details["chosen"].startswith("operator_rows")
    assert details["cross_fitted"]["noisy_labels"]["accuracy"] < 0.6
    operator_only = operator_only_baseline(
        adult["evaluation_ordinal"],
        adult["labels"],
        fit_rows=fit,
        report_rows=report,
        n_classes=2,
        seed=4,
    )[0]["accuracy"]
    semi_accuracy, noisy_accuracy = (
        _report_accuracy(semi.model, adult),
        _report_accuracy(noisy_only.model, adult),
    )
    assert semi_accuracy >= operator_only - 0.02, (semi_accuracy, operator_only)
    assert semi_accuracy >= noisy_accuracy + 0.2, (semi_accuracy, noisy_accuracy)
    assert semi_accuracy > 0.8
    # what the silos released is unchanged: the same rows, the same labels
    np.testing.assert_array_equal(semi.labels, noisy_only.labels)
    np.testing.assert_array_equal(semi.trained, noisy_only.trained)


def test_scrambling_the_report_half_changes_nothing_and_the_fit_half_does(adult):
    clean = _fused(adult, "cross_fitted")
    fit, report = evaluation_halves(adult["labels"], seed=4)
    scrambled = adult["evaluation"].copy()
    scrambled[report] = np.random.default_rng(1).normal(scale=100.0, size=scrambled[report].shape)
    poisoned = _fused(adult, "cross_fitted", features=scrambled)
    assert poisoned.details == clean.details
    np.testing.assert_allclose(
        poisoned.model.predict_proba(adult["evaluation"]),
        clean.model.predict_proba(adult["evaluation"]),
    )
    # and the test can fail: the same scrambling of the fit half moves the model
    scrambled = adult["evaluation"].copy()
    scrambled[fit] = np.random.default_rng(1).normal(scale=100.0, size=scrambled[fit].shape)
    moved = _fused(adult, "cross_fitted", features=scrambled)
    assert (
        moved.details["semi_private"]["cross_fitted"]
        != clean.details["semi_private"]["cross_fitted"]
    )


def test_turned_off_the_model_is_todays_exactly(adult):
    off = _fused(adult, "off")
    assert "semi_private" not in off.details
    today = server_step(
        adult["votes"],
        adult["public"],
        n_classes=2,
        final=DEFAULT_PRIVATE_FINAL_MODEL,
        query=N_QUERIED,
        seed=4,
    )
    np.testing.assert_array_equal(
        off.model.predict_proba(adult["evaluation"]),
        today.final_model.predict_proba(adult["evaluation"]),
    )
    unnamed = _fused(adult, None)
    np.testing.assert_array_equal(
        unnamed.model.predict_proba(adult["evaluation"]),
        today.final_model.predict_proba(adult["evaluation"]),
    )


def test_a_fit_half_too_small_keeps_the_noisy_labels_model_and_says_why(adult):
    labels = np.array([0, 0, 0, 1])
    fusion = FEDKT.fuse(
        adult["votes"],
        adult["public"],
        members=MEMBERS,
        n_classes=2,
        params={
            "final_model": DEFAULT_PRIVATE_FINAL_MODEL,
            "query_count": N_QUERIED,
            "semi_private": "cross_fitted",
        },
        seed=4,
        evaluation=EvaluationRows(adult["evaluation"][:4], labels, np.zeros((5, 4, 2))),
    )
    assert fusion.details["semi_private"]["chosen"] == "noisy_labels"
    assert "too few labelled rows" in fusion.details["semi_private"]["skipped"]
    with pytest.raises(ValueError, match="evaluation split, which was not given"):
        FEDKT.fuse(
            adult["votes"],
            adult["public"],
            members=MEMBERS,
            n_classes=2,
            params={"query_count": N_QUERIED, "semi_private": "cross_fitted"},
            seed=4,
        )
