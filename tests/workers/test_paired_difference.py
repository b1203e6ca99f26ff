"""The paired bootstrap that says whether a model beats a baseline (workers.metrics.paired_difference): checked
against a plain loop over the same resamples with scikit-learn's scores."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from workers.metrics import BOOTSTRAP_RESAMPLES, paired_difference


def independent_interval(model, baseline, labels, *, seed: int, score) -> tuple[float, float]:
    rows = np.random.default_rng(seed).integers(0, len(labels), (BOOTSTRAP_RESAMPLES, len(labels)))
    differences = [
        score(labels[resample], model[resample]) - score(labels[resample], baseline[resample])
        for resample in rows
    ]
    return tuple(np.percentile(differences, [2.5, 97.5]))


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
def test_the_interval_is_the_percentiles_of_the_paired_differences_over_the_same_resamples():
    generator = np.random.default_rng(3)
    labels = generator.choice(3, 300, p=[0.6, 0.3, 0.1])
    model = np.where(generator.random(300) < 0.8, labels, generator.integers(0, 3, 300))
    baseline = np.where(generator.random(300) < 0.7, labels, generator.integers(0, 3, 300))

    comparison = paired_difference(model, baseline, labels, n_classes=3, seed=11)

    for metric, score in (
        ("accuracy", accuracy_score),
        ("balanced_accuracy", balanced_accuracy_score),
    ):
        low, high = independent_interval(model, baseline, labels, seed=11, score=score)
        assert comparison[metric]["difference"] == pytest.approx(
            score(labels, model) - score(labels, baseline)
        )
        assert (comparison[metric]["low"], comparison[metric]["high"]) == pytest.approx((low, high))


def test_a_win_only_when_the_whole_interval_is_above_zero():
    labels = np.repeat([0, 1], 200)
    perfect = labels.copy()
    one_wrong = labels.copy()
    one_wrong[0] = 1
    guess = np.zeros(400, dtype=int)

    assert (
        paired_difference(perfect, guess, labels, n_classes=2, seed=0)["accuracy"]["verdict"]
        == "beats"
    )
    assert (
        paired_difference(guess, perfect, labels, n_classes=2, seed=0)["accuracy"]["verdict"]
        == "below"
    )
    level = paired_difference(perfect, one_wrong, labels, n_classes=2, seed=0)
    assert level["accuracy"]["difference"] == pytest.approx(1 / 400)
    assert [level[metric]["verdict"] for metric in ("accuracy", "balanced_accuracy")] == [
        "level",
        "level",
    ]
