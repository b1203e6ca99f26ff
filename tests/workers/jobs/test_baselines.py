"""Baselines of a global model (workers.metrics): the majority-class guess and the best and average silo."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import f1_score

from workers.metrics import baselines, majority_class_metrics, member_metrics, silo_baselines


def test_majority_guess_of_a_three_to_one_split():
    # 750 '<=50K', 250 '>50K': always '<=50K' is right 75 % of the time; F1 of class 0 is 2·750/(750+1000)
    assert majority_class_metrics([750, 250]) == {
        "accuracy": 0.75,
        "balanced_accuracy": 0.5,
        "macro_f1": pytest.approx((1500 / 1750) / 2),
        "roc_auc": 0.5,
        "class": 0,
    }


def test_majority_guess_matches_scikit_learn_with_an_absent_class():
    counts = [0, 5, 3]
    labels = np.repeat([0, 1, 2], counts)
    measured = majority_class_metrics(counts)
    assert measured["class"] == 1
    assert measured["accuracy"] == 5 / 8
    assert measured["balanced_accuracy"] == 0.5  # one of the two classes present is always right
    assert measured["macro_f1"] == pytest.approx(
        f1_score(labels, np.ones(8, dtype=int), labels=[0, 1, 2], average="macro", zero_division=0)
    )


def test_majority_guess_of_an_empty_split_is_none_and_of_one_class_has_no_roc_auc():
    assert majority_class_metrics([0, 0]) is None
    assert majority_class_metrics([4, 0])["roc_auc"] is None


def _metrics(balanced_accuracy, accuracy, macro_f1=0.5, roc_auc=0.7):
    return {
        "accuracy": accuracy,
        "balanced_accuracy": balanced_accuracy,
        "macro_f1": macro_f1,
        "roc_auc": roc_auc,
    }


def test_each_silo_is_represented_by_its_best_submission_by_balanced_accuracy():
    measured = silo_baselines(
        {
            "7": [
                _metrics(0.60, 0.80, macro_f1=0.55),
                _metrics(0.70, 0.78, macro_f1=0.65, roc_auc=None),
            ],
            "9": [_metrics(0.50, 0.90, macro_f1=0.45, roc_auc=0.6)],
        }
    )
    assert measured == {
        "best_single_silo": {
            "accuracy": 0.78,
            "balanced_accuracy": 0.70,
            "macro_f1": 0.65,
            "roc_auc": None,
            "silo": "7",
        },
        # silo 7's representative (0.70, 0.78) and silo 9's (0.50, 0.90); ROC AUC only where defined
        "average_silo": {
            "accuracy": pytest.approx(0.84),
            "balanced_accuracy": pytest.approx(0.60),
            "macro_f1": pytest.approx(0.55),
            "roc_auc": 0.6,
        },  # metrics recorded before issue 31 do not say what they measured
        "n_silos": 2,
    }


def test_no_silo_metrics_give_no_silo_baselines():
    assert silo_baselines({"3": []}) == {
        "best_single_silo": None,
        "average_silo": None,
        "n_silos": 0,
    }


def test_baselines_combine_the_guess_and_the_silos():
    measured = baselines(class_counts=[1, 3], metrics_per_silo={"1": [_metrics(0.8, 0.8)]})
    assert measured["majority_class"]["class"] == 1
    assert measured["best_single_silo"]["silo"] == "1"
    assert measured["n_silos"] == 1


@given(
    st.lists(st.integers(min_value=0, max_value=50), min_size=2, max_size=6).filter(
        lambda counts: sum(counts) > 0
    )
)
def test_the_majority_guess_scores_one_over_the_classes_present_and_the_largest_share(counts):
    measured = majority_class_metrics(counts)
    present = sum(1 for count in counts if count > 0)
    assert measured["balanced_accuracy"] == pytest.approx(1 / present)
    assert measured["accuracy"] == max(counts) / sum(counts)
    assert measured["class"] == counts.index(max(counts))  # ties to the lowest class index


def test_a_silo_baseline_says_whether_it_was_measured_with_the_silos_own_model_or_its_students():
    own = member_metrics(
        np.array([[0.9, 0.1], [0.2, 0.8]]), np.array([0, 1]), n_classes=2, own_model=True
    )
    students = member_metrics(
        np.array([[0.4, 0.6], [0.2, 0.8]]), np.array([0, 1]), n_classes=2, own_model=False
    )
    assert (own["measured_with"], own["accuracy"]) == ("own_model", 1.0)
    assert (students["measured_with"], students["accuracy"]) == ("students", 0.5)
    measured = silo_baselines({"1": [own], "2": [students]})
    assert (
        measured["best_single_silo"]["silo"],
        measured["best_single_silo"]["measured_with"],
    ) == (
        "1",
        "own_model",
    )
    assert measured["average_silo"]["measured_with"] == {"own_model": 1, "students": 1}
