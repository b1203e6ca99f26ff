"""A model that cannot be exported says why in a sentence people read: class numbers, not numpy reprs."""

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier

from workers.algorithms.ensemble import safe_member_file
from workers.jobs.export import export_global_model
from workers.learners.aligned import AlignedClassifier


def final_model_trained_on_two_of_three_classes():
    features = np.arange(20, dtype=np.float32).reshape(10, 2)
    labels = np.array([0, 1] * 5)
    return AlignedClassifier(DecisionTreeClassifier(max_depth=2), n_classes=3).fit(features, labels)


def test_a_final_model_missing_a_class_names_its_classes_as_plain_numbers():
    with pytest.raises(ValueError) as refusal:
        export_global_model(
            final_model_trained_on_two_of_three_classes(), n_features=2, n_classes=3
        )
    assert "classes [0, 1] only, not all 3" in str(refusal.value)
    assert "np." not in str(refusal.value)


def test_an_ensemble_member_missing_a_class_names_its_classes_as_plain_numbers():
    with pytest.raises(ValueError) as refusal:
        safe_member_file(final_model_trained_on_two_of_three_classes(), n_features=2, n_classes=3)
    assert "trained on classes [0, 1] of 3" in str(refusal.value)
    assert "np." not in str(refusal.value)
