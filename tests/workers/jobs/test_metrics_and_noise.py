"""Pure job helpers: metrics on hand-computed cases, and DP noise that is drawn once and replayed."""

import numpy as np
import pytest

from workers.jobs.noise import replayable_noise
from workers.metrics import classification_metrics
from workers.privacy.mechanisms import LaplaceNoise


def test_metrics_of_a_small_binary_case():
    probabilities = np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.7, 0.3]])
    labels = np.array([0, 0, 1, 1])
    metrics = classification_metrics(probabilities, labels, n_classes=2)
    assert metrics["accuracy"] == 0.5
    assert metrics["balanced_accuracy"] == 0.5
    assert metrics["confusion_matrix"] == [[1, 1], [1, 1]]
    assert (
        metrics["roc_auc"] == 0.75
    )  # positives 0.8, 0.3 vs negatives 0.1, 0.6: 3 of 4 pairs ordered
    assert metrics["macro_f1"] == 0.5
    # top-class confidences 0.9 (right), 0.6 (wrong), 0.8 (right), 0.7 (wrong); bins are (a, b]
    assert metrics["reliability"]["count"] == [0, 0, 0, 0, 0, 1, 1, 1, 1, 0]
    assert metrics["reliability"]["accuracy"][5:9] == [0.0, 0.0, 1.0, 1.0]
    assert metrics["reliability"]["confidence"][0] is None


@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_metrics_equal_scikit_learns_on_random_predictions(n_classes):
    from sklearn.metrics import (
        accuracy_score,
        balanced_accuracy_score,
        confusion_matrix,
        f1_score,
        roc_auc_score,
    )

    rng = np.random.default_rng(n_classes)
    probabilities = rng.dirichlet(np.ones(n_classes), size=400).round(2)  # rounding makes ties
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    labels = rng.integers(0, n_classes, size=400)
    metrics = classification_metrics(probabilities, labels, n_classes=n_classes)
    predicted = probabilities.argmax(axis=1)
    assert metrics["accuracy"] == pytest.approx(accuracy_score(labels, predicted))
    assert metrics["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(labels, predicted))
    assert metrics["macro_f1"] == pytest.approx(
        f1_score(labels, predicted, average="macro", zero_division=0, labels=list(range(n_classes)))
    )
    assert metrics["confusion_matrix"] == confusion_matrix(labels, predicted).tolist()
    expected_auc = (
        roc_auc_score(labels, probabilities[:, 1])
        if n_classes == 2
        else roc_auc_score(labels, probabilities, multi_class="ovr", average="macro")
    )
    assert metrics["roc_auc"] == pytest.approx(expected_auc)


def test_roc_auc_is_none_when_the_split_has_one_class():
    metrics = classification_metrics(
        np.array([[0.9, 0.1], [0.8, 0.2]]), np.array([0, 0]), n_classes=2
    )
    assert metrics["roc_auc"] is None
    assert metrics["accuracy"] == 1.0


def test_replayable_noise_records_the_first_draw_and_replays_stored_answers():
    counts = np.array([[4, 0], [0, 4]])
    drawn = []
    fresh = replayable_noise(LaplaceNoise(gamma=0.5), stored=None, on_draw=drawn.append)
    assert isinstance(fresh, LaplaceNoise) and fresh.gamma == 0.5
    noisy = fresh.noisy_counts(counts)
    assert len(drawn) == 1 and np.array_equal(drawn[0], noisy)
    replayed = replayable_noise(LaplaceNoise(gamma=0.5), stored=noisy, on_draw=drawn.append)
    assert np.array_equal(replayed.noisy_counts(counts), noisy)
    assert len(drawn) == 1


def test_stored_answers_of_another_shape_are_refused():
    replayed = replayable_noise(
        LaplaceNoise(gamma=0.5), stored=np.zeros((3, 2), dtype=np.int64), on_draw=lambda noisy: None
    )
    with pytest.raises(ValueError, match="inputs changed"):
        replayed.noisy_counts(np.zeros((2, 2), dtype=np.int64))
