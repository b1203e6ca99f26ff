"""The statistics benchmark's step and table (workers.reproduce.statistics), on a small synthetic federation."""

import numpy as np
import pytest

from workers.reproduce.statistics import run_setting, summary_table


def synthetic_data(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, 600)
    features = rng.normal(size=(600, 5)) + labels[:, None] * 1.5
    return {
        "pool_x": features[:400],
        "pool_y": labels[:400],
        "validation_x": features[400:],
        "validation_y": labels[400:],
    }


def test_a_setting_scores_each_head_at_l0_and_l2_with_the_noise_of_the_asked_epsilon():
    rows = run_setting(synthetic_data(), n_silos=3, seed=0, epsilon=1.0, kappas=[10.0])
    assert [(row["head"], row["silos"]) for row in rows] == [("lda", 3), ("ridge", 3)]
    assert all(row["epsilon"] == pytest.approx(1.0, abs=1e-9) for row in rows)
    assert all(row["unit"] == "example" and row["delta"] == 1e-5 for row in rows)
    # well-separated classes: the exact heads are near-perfect, and λ = κ σ √3 for three silos
    assert all(row["accuracy_l0"] > 0.85 for row in rows)
    assert rows[0]["regularization"] == pytest.approx(10.0 * rows[0]["sigma_moment"] * np.sqrt(3))


def test_the_table_gives_mean_and_sd_over_seeds_and_says_whether_the_target_is_met():
    rows = [
        {"head": "lda", "silos": 4, "kappa": 10.0, "accuracy_l0": 0.85, "accuracy_l2": l2}
        for l2 in (0.845, 0.835)
    ]
    table = summary_table(rows)
    assert "| lda | 4 | 10 | 85.00 ± 0.00 | 84.00 ± 0.50 | -1.00 ± 0.50 | yes |" in table
