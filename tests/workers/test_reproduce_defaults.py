"""The defaults experiment never reads the test split (docs/results/defaults.md, issue 19)."""

import numpy as np
import pandas as pd

from workers.datasets import data_dir, tabular_split
from workers.reproduce import defaults


def test_the_validation_protocol_splits_the_training_split_alone_and_the_test_protocol_scores_the_test_split():
    frame = pd.read_parquet(data_dir() / "adult.parquet")
    labels = (frame.pop("income").str.strip().str.rstrip(".") == ">50K").to_numpy().astype(np.int64)
    train, public, test = tabular_split(len(frame), labels, 0)
    chosen_on = defaults.adult_without_test(0, "ordinal")
    assert len(chosen_on["pool_y"]) + len(chosen_on["validation_y"]) == len(
        train
    )  # a split of the train rows
    assert len(chosen_on["validation_y"]) == round(0.15 * len(train))
    assert chosen_on["public_x"].shape == (len(public), 14)
    scored_on = defaults.adult_protocol_test(0, "ordinal")
    assert (len(scored_on["pool_y"]), len(scored_on["validation_y"])) == (len(train), len(test))
    assert np.array_equal(scored_on["validation_y"], labels[test])


def test_the_product_defaults_are_the_toolkits_and_the_job_apis():
    from workers.algorithms.fedkt_fusion import DEFAULT_FINAL_MODEL
    from workers.silo.training import DEFAULT_STUDENT, DEFAULT_TEACHER

    assert defaults.PRODUCT_DEFAULTS == (
        "ordinal",
        DEFAULT_TEACHER,
        DEFAULT_STUDENT,
        DEFAULT_FINAL_MODEL,
    )


def test_the_fedkt_reproduction_runs_the_product_defaults_on_the_tabular_sets():
    from workers.algorithms.fedkt_fusion import DEFAULT_FINAL_MODEL
    from workers.reproduce.settings import SETTINGS
    from workers.silo.training import DEFAULT_STUDENT, DEFAULT_TEACHER

    for name in ("adult", "magic"):
        setting = SETTINGS[name]
        assert (setting.teacher, setting.student, setting.final_learner) == (
            DEFAULT_TEACHER,
            DEFAULT_STUDENT,
            DEFAULT_FINAL_MODEL,
        )
    assert (
        SETTINGS["adult"].view == "ordinal"
        and SETTINGS["adult"].central_learner == DEFAULT_FINAL_MODEL
    )
    assert SETTINGS["magic"].central_learner == {
        "family": "xgboost",
        "max_depth": 6,
    }  # the target's reference
