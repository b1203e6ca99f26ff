import dataclasses

import numpy as np
import pytest

from workers.privacy.mechanisms import GaussianNoise, LaplaceNoise


def test_mechanisms_are_named_for_reports():
    assert LaplaceNoise(gamma=0.1).name == "laplace"
    assert GaussianNoise(sigma=3.0).name == "gaussian"


def test_mechanisms_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        LaplaceNoise(gamma=0.1).gamma = 1.0


@pytest.mark.parametrize("gamma", [0, -0.1, float("inf"), float("nan"), "0.1", None])
def test_laplace_refuses_a_bad_gamma(gamma):
    with pytest.raises(ValueError, match="gamma"):
        LaplaceNoise(gamma=gamma)


@pytest.mark.parametrize("sigma", [0, -2.0, float("inf"), float("nan")])
def test_gaussian_refuses_a_bad_sigma(sigma):
    with pytest.raises(ValueError, match="sigma"):
        GaussianNoise(sigma=sigma)


@pytest.mark.parametrize("mechanism", [LaplaceNoise(gamma=0.1), GaussianNoise(sigma=4.0)])
def test_noisy_counts_refuse_float_counts(mechanism):
    with pytest.raises(ValueError, match="integers"):
        mechanism.noisy_counts(np.array([[1.5, 2.0]]))


@pytest.mark.parametrize("mechanism", [LaplaceNoise(gamma=0.1), GaussianNoise(sigma=4.0)])
def test_noisy_counts_refuse_one_dimensional_counts(mechanism):
    with pytest.raises(ValueError, match="2-D"):
        mechanism.noisy_counts(np.array([1, 2, 3]))


@pytest.mark.parametrize("mechanism", [LaplaceNoise(gamma=0.1), GaussianNoise(sigma=4.0)])
def test_noisy_counts_keep_shape_and_integer_type(mechanism):
    counts = np.array([[3, 0, 2], [0, 5, 0]], dtype=np.int32)
    noisy = mechanism.noisy_counts(counts)
    assert noisy.shape == (2, 3)
    assert noisy.dtype == np.int64


@pytest.mark.parametrize("mechanism", [LaplaceNoise(gamma=0.1), GaussianNoise(sigma=4.0)])
def test_noisy_counts_of_no_queries_are_empty(mechanism):
    assert mechanism.noisy_counts(np.zeros((0, 2), dtype=np.int64)).shape == (0, 2)


@pytest.mark.parametrize("mechanism", [LaplaceNoise(gamma=0.1), GaussianNoise(sigma=4.0)])
def test_noise_is_not_reproducible_across_calls(mechanism):
    counts = np.full((500, 2), 1_000, dtype=np.int64)
    assert not np.array_equal(mechanism.noisy_counts(counts), mechanism.noisy_counts(counts))


def test_discrete_laplace_noise_has_the_theoretical_spread():
    gamma = 0.1
    r = np.exp(-gamma)
    expected_mean_absolute_noise = 2 * r / (1 - r**2)  # E|Z| for pmf ∝ r^|k|: 9.98
    counts = np.full((10_000, 2), 50, dtype=np.int64)
    noise = LaplaceNoise(gamma=gamma).noisy_counts(counts) - counts
    assert abs(np.abs(noise).mean() / expected_mean_absolute_noise - 1) < 0.1
    assert abs(noise.mean()) < 0.5


def test_discrete_gaussian_noise_has_the_theoretical_spread():
    counts = np.zeros((10_000, 2), dtype=np.int64)
    noise = GaussianNoise(sigma=8.0).noisy_counts(counts)
    assert abs(noise.std() / 8.0 - 1) < 0.1
