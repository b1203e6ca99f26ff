"""Every registered job kind against the protocol its callers use (issue 41 item 2; scikit-learn's
``check_estimator`` is the model): a kind added by docs/architecture.md's recipe is checked here without a test
of its own. Toy arrays, the job's calling convention (validate → level defaults → select → member_signal → sum →
fuse), the evaluation split where the kind reads it, and a price where it takes server noise."""

import numpy as np
import pytest

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.auto_fusion import EvaluationRows
from workers.algorithms.registry import (
    ALGORITHMS,
    PRIVACY_LEVELS,
    VALUATION_RULES,
    Fusion,
    Member,
    algorithm_get,
)
from workers.algorithms.schema import WorkEstimate
from workers.privacy.mechanisms import LaplaceNoise

N_CLASSES, N_PUBLIC, N_EVALUATION, N_FEATURES, N_MODELS = 2, 60, 40, 4, 2
CLASS_COUNTS = [N_EVALUATION // 2, N_EVALUATION // 2]
KINDS = sorted(ALGORITHMS)


@pytest.fixture(scope="module")
def toy():
    """Three silos' members, each with N_MODELS models whose probabilities lean to the true class of a toy rule."""
    generator = np.random.default_rng(0)
    public = generator.normal(size=(N_PUBLIC, N_FEATURES))
    evaluation = generator.normal(size=(N_EVALUATION, N_FEATURES))
    labels = (evaluation[:, 0] > 0).astype(np.int64)
    labels[:2] = [0, 1]  # both classes in both halves, whatever the split

    def probabilities(rows):
        lean = 1 / (1 + np.exp(-3 * rows[:, 0]))
        noisy = np.clip(lean[None] + generator.normal(0, 0.2, (N_MODELS, len(rows))), 0.01, 0.99)
        return np.stack([1 - noisy, noisy], axis=2)

    members = [
        Member(
            key=str(index),
            organisation=f"silo-{index}",
            n_examples=200,
            validation_score=0.8,
            n_models=N_MODELS,
            label_distribution=(100.0, 100.0),
        )
        for index in range(3)
    ]
    return {
        "public": public,
        "evaluation": evaluation,
        "labels": labels,
        "members": members,
        "public_probabilities": [probabilities(public) for _ in members],
        "evaluation_probabilities": [probabilities(evaluation) for _ in members],
    }


def settings_at(algorithm, level: str) -> dict:
    return algorithm.validate(
        algorithm.level_defaults({}, privacy_level=level, evaluation_class_counts=CLASS_COUNTS)
    )


@pytest.mark.parametrize("name", KINDS)
def test_a_kinds_settings_validate_to_themselves_at_every_level_and_estimate_their_work(name):
    algorithm = algorithm_get(name)
    assert (algorithm.name, bool(algorithm.label)) == (name, True)
    assert set(algorithm.help) <= set(algorithm.keys)
    for level in PRIVACY_LEVELS:
        settings = settings_at(algorithm, level)
        assert algorithm.validate(settings) == settings, (
            level
        )  # what a job stores validates unchanged
        assert isinstance(algorithm.reads_evaluation(settings), bool)
        estimate = algorithm.estimate(settings, n_public=N_PUBLIC, n_member_models=3 * N_MODELS)
        assert isinstance(estimate, WorkEstimate)
    with pytest.raises(ValueError, match="not-a-setting"):
        algorithm.validate({"not-a-setting": 1})


@pytest.mark.parametrize("name", KINDS)
def test_a_kind_fuses_toy_members_as_a_job_calls_it(name, toy):
    algorithm = algorithm_get(name)
    settings = settings_at(algorithm, "L0")
    members = toy["members"]
    chosen = algorithm.select(members, settings, seed=3)
    assert chosen and set(chosen) <= set(range(len(members)))
    signals = [
        algorithm.member_signal(
            toy["public_probabilities"][index],
            member=members[index],
            n_classes=N_CLASSES,
            params=settings,
        )
        for index in chosen
    ]
    assert all(np.shape(signal)[0] == N_PUBLIC for signal in signals)
    evaluation = None
    if algorithm.reads_evaluation(settings):
        evaluation = EvaluationRows(
            toy["evaluation"],
            toy["labels"],
            np.stack([toy["evaluation_probabilities"][index].mean(axis=0) for index in chosen]),
            member_signals=np.stack(signals),
        )
    fusion = algorithm.fuse(
        np.sum(signals, axis=0),
        toy["public"],
        members=[members[index] for index in chosen],
        n_classes=N_CLASSES,
        params=settings,
        seed=3,
        **({"evaluation": evaluation} if evaluation is not None else {}),
    )
    assert isinstance(fusion, Fusion)
    # the runner values the silos by the kind's own rule (a kind without one would pay no silo "by value")
    assert algorithm.valuation_rule(settings, fusion.details) in VALUATION_RULES
    assert np.shape(fusion.labels) == np.shape(fusion.trained) == (N_PUBLIC,)
    assert fusion.privacy is None  # no noise, no privacy report
    if fusion.model is not None:  # an ensemble bundles its members instead of fitting a model
        probabilities = fusion.model.predict_proba(toy["evaluation"])
        assert probabilities.shape == (N_EVALUATION, N_CLASSES)
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("name", KINDS)
def test_a_kind_either_prices_server_noise_or_refuses_it_in_fuse(name, toy):
    algorithm = algorithm_get(name)
    settings = settings_at(algorithm, "L1")
    if algorithm.accepts_noise:
        privacy = {
            "mechanism": "laplace",
            "gamma": 0.1,
            "sigma": None,
            "delta": 1e-5,
            "n_queries": 10,
        }
        cost = algorithm.l1_cost(settings, privacy=privacy)
        assert cost.report.vote_shift == algorithm.votes_per_submission(settings) >= 1
        return
    with pytest.raises(ValueError, match="noise|L1|L0"):
        algorithm.fuse(
            np.zeros((N_PUBLIC, N_CLASSES)),
            toy["public"],
            members=toy["members"],
            n_classes=N_CLASSES,
            params=settings,
            noise=LaplaceNoise(gamma=0.1),
            seed=3,
        )


@pytest.mark.parametrize("name", KINDS)
def test_every_choice_a_kind_declares_validates_and_is_kept(name):
    """The launcher offers a kind's ``choices`` as selects: each must be a value its validation accepts and keeps."""
    algorithm = ALGORITHMS[name]
    for path, values in algorithm.choices.items():
        keys = path.split(".")
        for value in values:
            params = value
            for key in reversed(keys):
                params = {key: params}
            settings = algorithm.validate(params)
            for key in keys:
                settings = settings.get(key, {}) if isinstance(settings, dict) else settings
            # a default the kind does not store (semi_private "off") reads back as nothing, never as another value
            assert settings in (value, {}), (path, value, settings)
