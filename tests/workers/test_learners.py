import numpy as np
import pytest
import torch
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

from workers.learners import AlignedClassifier, TorchClassifier, fit_aligned, make_learner
from workers.learners.registry import LEARNER_FAMILIES
from workers.modelio.families import LEARNER_FAMILY_NAMES
from workers.zoo import build_module

RNG = np.random.default_rng(0)
FEATURES = RNG.normal(size=(120, 6)).astype(np.float32)
LABELS = (FEATURES[:, 0] > 0).astype(int) + (FEATURES[:, 1] > 0.5).astype(int)  # classes 0, 1, 2


def test_the_families_a_setting_may_name_are_the_ones_the_learners_build():
    # the toolkit's --teacher help and the vocabulary name LEARNER_FAMILY_NAMES without importing the learners
    assert sorted(LEARNER_FAMILIES) == sorted(LEARNER_FAMILY_NAMES)


@pytest.mark.parametrize("family", ["random_forest", "xgboost", "logistic_regression", "mlp"])
def test_every_family_follows_the_classifier_contract(family):
    estimator = make_learner(family, random_state=0)
    assert estimator.fit(FEATURES, LABELS) is estimator
    assert list(estimator.classes_) == [0, 1, 2]
    probabilities = estimator.predict_proba(FEATURES)
    assert probabilities.shape == (120, 3)
    assert np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    assert (estimator.predict(FEATURES) == LABELS).mean() > 0.7


def test_make_learner_accepts_a_family_mapping_and_overrides():
    forest = make_learner(
        {"family": "random_forest", "n_estimators": 7, "max_depth": 3}, max_depth=2
    )
    assert (forest.n_estimators, forest.max_depth) == (7, 2)


def test_make_learner_clones_a_configured_scikit_learn_classifier():
    configured = KNeighborsClassifier(n_neighbors=3)
    estimator = make_learner(configured)
    assert estimator is not configured and estimator.n_neighbors == 3


def test_make_learner_refuses_an_unknown_family():
    with pytest.raises(ValueError, match="Unknown learner family 'svm'"):
        make_learner("svm")


def test_torch_classifier_exposes_its_zoo_spec_and_cpu_module():
    model = make_learner("mlp", hidden_sizes=[8], epochs=2, random_state=0).fit(FEATURES, LABELS)
    assert model.spec_ == {
        "architecture": "mlp",
        "n_features": 6,
        "hidden_sizes": [8],
        "n_classes": 3,
    }
    rebuilt = build_module(model.spec_)
    rebuilt.load_state_dict(model.module_.state_dict())
    assert next(model.module_.parameters()).device.type == "cpu"
    with torch.no_grad():
        logits = rebuilt(torch.from_numpy(FEATURES))
    assert np.array_equal(logits.argmax(1).numpy(), model.predict(FEATURES))


def test_torch_classifier_training_is_reproducible_from_its_seed():
    first = TorchClassifier(hidden_sizes=[8], epochs=3, random_state=5).fit(FEATURES, LABELS)
    second = TorchClassifier(hidden_sizes=[8], epochs=3, random_state=5).fit(FEATURES, LABELS)
    assert np.array_equal(first.predict_proba(FEATURES), second.predict_proba(FEATURES))


def test_cnn_family_trains_the_papers_cnn_on_flat_images():
    images = RNG.random((20, 784), dtype=np.float32)
    model = make_learner("cnn", epochs=1, random_state=0).fit(images, np.arange(20) % 3)
    assert model.spec_["architecture"] == "cnn" and model.spec_["conv_channels"] == [6, 16]
    assert model.predict_proba(images).shape == (20, 3)


@pytest.mark.parametrize("family", ["xgboost", "logistic_regression", "random_forest"])
def test_aligned_classifier_maps_missing_classes_to_zero_columns(family):
    present = LABELS != 1  # class 1 missing from this teacher's subset
    labels = LABELS[present]
    model = fit_aligned(family, FEATURES[present], labels, n_classes=4, seed=0)
    probabilities = model.predict_proba(FEATURES)
    assert list(model.classes_) == [0, 1, 2, 3]
    assert probabilities.shape == (120, 4)
    assert (probabilities[:, [1, 3]] == 0).all()
    assert set(model.predict(FEATURES)) <= {0, 2}


def test_aligned_classifier_with_a_single_class_always_predicts_it():
    model = AlignedClassifier(DecisionTreeClassifier(), n_classes=3).fit(FEATURES[:5], [2] * 5)
    assert model.predict_proba(FEATURES[:2]).tolist() == [[0, 0, 1], [0, 0, 1]]
    assert model.predict(FEATURES[:2]).tolist() == [2, 2]


def test_aligned_classifier_refuses_labels_outside_the_class_list():
    with pytest.raises(ValueError, match="0..1"):
        AlignedClassifier(DecisionTreeClassifier(), n_classes=2).fit(FEATURES[:3], [0, 1, 2])
