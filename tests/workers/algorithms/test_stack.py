"""The stacked fusion (issue 31): an aggregator of the members' probabilities learnt on one half of the evaluation
split, distilled into one model; the other half is never read (cross-fitting), and a stack that cannot beat a
constant model out of fold is refused."""

import numpy as np
import pytest

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.auto_fusion import EvaluationRows, evaluation_halves, fitted_on_evaluation
from workers.algorithms.ensemble_fusion import EnsembleFusion
from workers.algorithms.registry import Member, algorithm_get
from workers.algorithms.stack_fusion import STACK_REFUSED_AT_L1, StackedFusion
from workers.algorithms.stacking import (
    aggregator_fit,
    constant_out_of_fold,
    stacked_fit,
    stratified_folds,
)
from workers.metrics import classification_metrics
from workers.privacy.mechanisms import GaussianNoise

STACK = algorithm_get("stack")
LINEAR = {"family": "logistic_regression"}


def _truth(features):
    return (features[:, 0] + 0.5 * features[:, 1] > 0.4).astype(int)


def _federation(seed: int = 0, *, n_members: int = 6, informative: bool = True):
    """Members that each see the truth through their own amount of noise (member 0 the least), all biased towards
    class 0 (label skew: the minority class 1 is under-predicted); uninformative members say the same for every
    row. Returns the members, their probabilities ``(m, 1, n, 2)`` of the public rows, the public features and the
    evaluation rows."""
    generator = np.random.default_rng(seed)
    public, evaluation = generator.normal(size=(600, 2)), generator.normal(size=(400, 2))
    members, public_probabilities, evaluation_probabilities = [], [], []
    for index in range(n_members):

        def probabilities(features, index=index):
            if not informative:
                return np.tile([0.6, 0.4], (len(features), 1))
            score = 3 * (features[:, 0] + 0.5 * features[:, 1] - 0.4) - 1.0
            score = score + generator.normal(scale=0.5 + index, size=len(features))
            positive = 1 / (1 + np.exp(-score))
            return np.stack([1 - positive, positive], axis=1)

        members.append(
            Member(
                key=str(10 + index), organisation=str(index), n_examples=50, validation_score=0.5
            )
        )
        public_probabilities.append(probabilities(public)[None])
        evaluation_probabilities.append(probabilities(evaluation))
    return members, public_probabilities, public, evaluation, np.stack(evaluation_probabilities)


def _fused(settings, members, public_probabilities, public, evaluation_rows, seed=3):
    signals = np.stack(
        [
            STACK.member_signal(p, member=m, n_classes=2, params=settings)
            for p, m in zip(public_probabilities, members)
        ]
    )
    return STACK.fuse(
        signals.sum(axis=0),
        public,
        members=members,
        n_classes=2,
        params=settings,
        seed=seed,
        evaluation=EvaluationRows(
            evaluation_rows.features,
            evaluation_rows.labels,
            evaluation_rows.member_probabilities,
            member_signals=signals,
        ),
    )


def test_the_stack_is_a_kind_whose_signal_is_the_ensembles_and_which_refuses_noise():
    assert isinstance(STACK, StackedFusion) and STACK.label == "Stacked fusion"
    # the one member signal of the ensemble kind, inherited: whatever a member's best probabilities are there
    assert type(STACK).member_signal is EnsembleFusion.member_signal
    settings = STACK.validate({})
    assert settings["aggregator"] == "auto" and settings["final_model"]["family"] == "random_forest"
    assert STACK.reads_evaluation(settings) is True and STACK.accepts_noise is False
    assert STACK.noise_refusal(settings) == STACK_REFUSED_AT_L1
    with pytest.raises(ValueError, match="'aggregator' must be one of"):
        STACK.validate({"aggregator": "median"})
    with pytest.raises(ValueError, match="cannot run at L1"):
        STACK.fuse(
            np.zeros((4, 2)),
            np.zeros((4, 2)),
            members=[],
            n_classes=2,
            params=settings,
            noise=GaussianNoise(sigma=1.0),
            seed=0,
        )
    with pytest.raises(ValueError, match="evaluation split, which was not given"):
        STACK.fuse(
            np.zeros((4, 2)), np.zeros((4, 2)), members=[], n_classes=2, params=settings, seed=0
        )


def test_a_stack_fits_on_one_half_and_beats_the_members_average_on_the_other():
    members, public_probabilities, public, evaluation, evaluated = _federation()
    labels = _truth(evaluation)
    rows = EvaluationRows(evaluation, labels, evaluated)
    fusion = _fused(
        STACK.validate({"final_model": LINEAR}), members, public_probabilities, public, rows
    )
    stack = fusion.details["stack"]
    fit, report = evaluation_halves(labels, seed=3)
    assert (stack["fit_rows"], stack["report_rows"]) == (len(fit), len(report))
    assert fitted_on_evaluation(fusion.details)
    assert set(stack["out_of_fold"]) == {"logistic", "weights"}
    assert stack["aggregator"] in ("logistic", "weights")
    assert fusion.trained.all() and fusion.labels.shape == (len(public),)

    def balanced(probabilities):
        return classification_metrics(probabilities, labels[report], n_classes=2)[
            "balanced_accuracy"
        ]

    model = balanced(fusion.model.predict_proba(evaluation[report]))
    average = balanced(evaluated[:, report].mean(axis=0))
    best_member = max(balanced(member[report]) for member in evaluated)
    assert model > average and model > best_member - 0.02, (model, average, best_member)


def test_the_weights_aggregator_trusts_the_members_that_are_right():
    members, _, _, evaluation, evaluated = _federation(n_members=4)
    weights = aggregator_fit("weights", evaluated, _truth(evaluation), n_classes=2).weights
    assert weights.sum() == pytest.approx(1.0) and (weights >= 0).all()
    assert weights[0] == weights.max() and weights[0] > weights[3]


def test_no_metric_reads_a_row_the_fit_used_poisoned_report_rows_change_nothing():
    """Cross-fitting: the report half's member probabilities and features are poisoned; the fit (every detail, every
    prediction of the global model) is unchanged, so nothing reported on that half was fitted on it. Its labels
    are poisoned below, with the halves held fixed (the stratified draw reads every label to deal the rows)."""
    members, public_probabilities, public, evaluation, evaluated = _federation(seed=1)
    labels = _truth(evaluation)
    settings = STACK.validate({"final_model": LINEAR})
    clean = _fused(
        settings,
        members,
        public_probabilities,
        public,
        EvaluationRows(evaluation, labels, evaluated),
    )
    fit, report = evaluation_halves(labels, seed=3)
    poisoned_probabilities, poisoned_features = evaluated.copy(), evaluation.copy()
    poisoned_probabilities[:, report] = poisoned_probabilities[:, report, ::-1]
    poisoned_features[report] = 100.0
    poisoned = _fused(
        settings,
        members,
        public_probabilities,
        public,
        EvaluationRows(poisoned_features, labels, poisoned_probabilities),
    )
    assert poisoned.details == clean.details
    np.testing.assert_array_equal(poisoned.labels, clean.labels)
    np.testing.assert_allclose(
        poisoned.model.predict_proba(public), clean.model.predict_proba(public)
    )


def test_the_fit_reads_no_label_of_the_report_half():
    members, public_probabilities, public, evaluation, evaluated = _federation(seed=2)
    labels = _truth(evaluation)
    fit, report = evaluation_halves(labels, seed=5)
    poisoned_labels = labels.copy()
    poisoned_labels[report] = 1 - labels[report]
    settings = STACK.validate({"final_model": LINEAR})
    member_public = np.concatenate(public_probabilities)

    def fitted(evaluation_labels):
        return stacked_fit(
            member_public,
            public,
            member_evaluation=evaluated,
            evaluation_features=evaluation,
            evaluation_labels=evaluation_labels,
            fit_rows=fit,
            settings=settings,
            n_classes=2,
            seed=5,
        )

    clean, poisoned = fitted(labels), fitted(poisoned_labels)
    assert poisoned.details == clean.details
    np.testing.assert_array_equal(poisoned.public_labels, clean.public_labels)
    np.testing.assert_allclose(
        poisoned.model.predict_proba(evaluation), clean.model.predict_proba(evaluation)
    )
    # and the labels of the fit half do move it: the test can fail
    moved = labels.copy()
    moved[fit] = 1 - labels[fit]
    assert fitted(moved).details != clean.details


def test_a_stack_that_cannot_beat_a_constant_model_is_refused():
    members, public_probabilities, public, evaluation, evaluated = _federation(informative=False)
    rows = EvaluationRows(evaluation, _truth(evaluation), evaluated)
    with pytest.raises(ValueError, match="cannot beat a constant model") as refused:
        _fused(STACK.validate({}), members, public_probabilities, public, rows)
    assert "always predicting the majority class" in str(refused.value)


def test_the_constant_is_cross_fitted_and_the_folds_are_stratified():
    labels = np.array([0] * 10 + [1] * 5)
    folds = stratified_folds(labels, folds=5, seed=0)
    for fold in range(5):
        assert np.bincount(labels[folds == fold], minlength=2).tolist() == [2, 1]
    constant = constant_out_of_fold(labels, n_classes=2, seed=0)
    assert (constant.argmax(axis=1) == 0).all()


def test_a_stack_needs_every_members_own_signal():
    members, public_probabilities, public, evaluation, evaluated = _federation(n_members=2)
    settings = STACK.validate({})
    with pytest.raises(ValueError, match="EvaluationRows.member_signals"):
        STACK.fuse(
            np.zeros((len(public), 2)),
            public,
            members=members,
            n_classes=2,
            params=settings,
            seed=0,
            evaluation=EvaluationRows(evaluation, _truth(evaluation), evaluated),
        )


def test_a_stack_of_three_classes_with_a_rare_one_fits_and_predicts_every_class():
    generator = np.random.default_rng(4)
    public, evaluation = generator.normal(size=(300, 2)), generator.normal(size=(240, 2))

    def truth(x):
        return np.where(x[:, 0] > 1.2, 2, (x[:, 1] > 0).astype(int))  # class 2 about 11 %

    members, signals, evaluated = [], [], []
    for index in range(4):
        noise = generator.normal(scale=0.3, size=(1, 3))

        def probabilities(x, noise=noise):
            scores = np.eye(3)[truth(x)] * 3 + noise
            return np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)

        members.append(
            Member(key=str(index), organisation=str(index), n_examples=30, validation_score=0.5)
        )
        signals.append(probabilities(public)[None])
        evaluated.append(probabilities(evaluation))
    settings = STACK.validate({"final_model": LINEAR})
    signal = np.stack(
        [
            STACK.member_signal(p, member=m, n_classes=3, params=settings)
            for p, m in zip(signals, members)
        ]
    )
    fusion = STACK.fuse(
        signal.sum(axis=0),
        public,
        members=members,
        n_classes=3,
        params=settings,
        seed=1,
        evaluation=EvaluationRows(
            evaluation, truth(evaluation), np.stack(evaluated), member_signals=signal
        ),
    )
    assert fusion.model.predict_proba(evaluation).shape == (240, 3)
    assert set(fusion.labels.tolist()) == {0, 1, 2}
