"""The statistics kind's heads at L0 equal scikit-learn's central fits on the pooled clipped rows (issue 40)."""

import numpy as np
import pytest
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import Ridge
from sklearn.naive_bayes import GaussianNB

from workers.algorithms.statistics_heads import (
    EXACT_REGULARIZATION,
    NOISE_REGULARIZATION_FACTOR,
    StatisticsHead,
    statistics_head_fitted,
)
from workers.algorithms.sufficient_statistics import (
    class_statistics,
    clipped_scaled,
    statistics_sum,
)

CLIP_NORM = 2.5


def skewed_silos(seed: int = 0, n_classes: int = 3):
    """Four silos whose label shares differ widely (one holds almost only class 0), rows of 6 features."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=1.5, size=(n_classes, 6))
    silos = []
    for shares in ([0.9, 0.05, 0.05], [0.1, 0.1, 0.8], [0.34, 0.33, 0.33], [0.05, 0.9, 0.05]):
        labels = rng.choice(n_classes, size=int(rng.integers(80, 200)), p=shares[:n_classes])
        features = centres[labels] + rng.normal(size=(len(labels), 6)) * rng.uniform(0.5, 2, 6)
        silos.append((features, labels))
    return silos


def pooled_statistics(silos, n_classes: int = 3):
    return statistics_sum(
        [class_statistics(x, y, n_classes=n_classes, clip_norm=CLIP_NORM) for x, y in silos]
    )


def test_the_rows_are_clipped_to_the_norm_and_scaled_by_it():
    scaled = clipped_scaled(np.array([[3.0, 4.0], [0.3, 0.4]]), clip_norm=2.5)
    np.testing.assert_allclose(scaled, [[0.6, 0.8], [0.12, 0.16]])


def test_statistics_add_up_to_the_pooled_rows_statistics():
    silos = skewed_silos()
    features = np.vstack([x for x, _ in silos])
    labels = np.concatenate([y for _, y in silos])
    pooled = pooled_statistics(silos)
    central = class_statistics(features, labels, n_classes=3, clip_norm=CLIP_NORM)
    np.testing.assert_allclose(pooled.moment, central.moment, rtol=1e-12)
    np.testing.assert_array_equal(pooled.counts, np.bincount(labels, minlength=3))
    assert np.linalg.norm(
        clipped_scaled(features, clip_norm=CLIP_NORM), axis=1
    ).max() == pytest.approx(1)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_lda_from_statistics_equals_scikit_learns_lda_on_the_pooled_clipped_rows(n_classes):
    silos = [(x[y < n_classes], y[y < n_classes]) for x, y in skewed_silos(n_classes=3)]
    features = np.vstack([x for x, _ in silos])
    scaled = clipped_scaled(features, clip_norm=CLIP_NORM)
    labels = np.concatenate([y for _, y in silos])
    head = StatisticsHead("lda").fit_statistics(pooled_statistics(silos, n_classes))
    central = LinearDiscriminantAnalysis(solver="lsqr").fit(scaled, labels)
    np.testing.assert_allclose(
        head.predict_proba(features), central.predict_proba(scaled), atol=1e-6
    )
    np.testing.assert_array_equal(head.predict(features), central.predict(scaled))


def test_ridge_from_statistics_equals_scikit_learns_ridge_on_the_pooled_clipped_rows():
    silos = skewed_silos(seed=1)
    features = np.vstack([x for x, _ in silos])
    scaled = clipped_scaled(features, clip_norm=CLIP_NORM)
    labels = np.concatenate([y for _, y in silos])
    head = StatisticsHead("ridge", regularization=0.7).fit_statistics(pooled_statistics(silos))
    central = Ridge(alpha=0.7).fit(scaled, np.eye(3)[labels])
    np.testing.assert_allclose(head.decision_function(features), central.predict(scaled), atol=1e-6)


def test_naive_bayes_from_statistics_equals_scikit_learns_gaussian_nb_on_the_pooled_clipped_rows():
    silos = skewed_silos(seed=2)
    features = np.vstack([x for x, _ in silos])
    scaled = clipped_scaled(features, clip_norm=CLIP_NORM)
    labels = np.concatenate([y for _, y in silos])
    head = StatisticsHead("naive_bayes").fit_statistics(pooled_statistics(silos))
    central = GaussianNB().fit(scaled, labels)
    np.testing.assert_allclose(
        head.predict_proba(features), central.predict_proba(scaled), atol=1e-6
    )


def test_a_head_fitted_on_one_silo_differs_from_the_central_fit_under_skew():
    # The exactness above is a property of the pooled statistics, not of any one silo's: this can fail.
    silos = skewed_silos()
    features = np.vstack([x for x, _ in silos])
    scaled = clipped_scaled(features, clip_norm=CLIP_NORM)
    labels = np.concatenate([y for _, y in silos])
    one_silo = StatisticsHead("lda").fit_statistics(pooled_statistics(silos[:1] + silos[1:2]))
    central = LinearDiscriminantAnalysis(solver="lsqr").fit(scaled, labels)
    assert np.abs(one_silo.predict_proba(features) - central.predict_proba(scaled)).max() > 1e-3


def test_an_unknown_head_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="known: lda, ridge, naive_bayes"):
        StatisticsHead("svm").fit_statistics(pooled_statistics(skewed_silos()))


def test_a_job_fits_exact_statistics_at_the_exact_lambda_and_noisy_ones_at_kappa_times_the_summed_noise():
    statistics = pooled_statistics(skewed_silos())
    exact = statistics_head_fitted(statistics, head="ridge")
    assert (exact.regularization, exact.positive) == (EXACT_REGULARIZATION, False)
    noisy = statistics_head_fitted(statistics, head="lda", moment_sigmas=[3.0, 4.0])
    assert noisy.regularization == pytest.approx(NOISE_REGULARIZATION_FACTOR * 5.0)
    assert noisy.positive


def test_the_positive_projection_changes_nothing_on_exact_statistics():
    silos = skewed_silos(seed=5)
    features = np.vstack([x for x, _ in silos])
    statistics = pooled_statistics(silos)
    plain = StatisticsHead("lda", regularization=0.5).fit_statistics(statistics)
    projected = StatisticsHead("lda", regularization=0.5, positive=True).fit_statistics(statistics)
    np.testing.assert_allclose(
        projected.predict_proba(features), plain.predict_proba(features), atol=1e-9
    )
