"""Every registered job kind against the protocol its callers use (issue 41 item 2; scikit-learn's
``check_estimator`` is the model): a kind added by docs/architecture.md's recipe is checked here without a test
of its own. Toy arrays, the job's calling convention (validate → level defaults → select → member_signal → sum →
fuse), the evaluation split where the kind reads it, and a price where it takes server noise."""

import numpy as np
import pytest

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.auto_fusion import EvaluationRows
from workers.algorithms.cohort import label_counts_of
from workers.algorithms.registry import (
    ALGORITHMS,
    PRIVACY_LEVELS,
    VALUATION_RULES,
    Fusion,
    Member,
    algorithm_get,
)
from workers.algorithms.schema import WorkEstimate
from workers.privacy.costs import PrivacyCost
from workers.privacy.mechanisms import LaplaceNoise
from workers.valuation import contribution_values

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


def fused(algorithm, toy, settings: dict, *, noise=None) -> tuple[list[int], Fusion]:
    """The members ``algorithm`` selects and their fusion, called as a job calls them (select, member_signal per
    member, the signals summed, fuse with the evaluation split where the kind reads it)."""
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
        noise=noise,
        **({"evaluation": evaluation} if evaluation is not None else {}),
    )
    assert isinstance(fusion, Fusion)
    return chosen, fusion


@pytest.mark.parametrize("name", KINDS)
def test_a_kind_fuses_toy_members_as_a_job_calls_it(name, toy):
    algorithm = algorithm_get(name)
    settings = settings_at(algorithm, "L0")
    chosen, fusion = fused(algorithm, toy, settings)
    # the runner values the silos by the kind's own rule (a kind without one would pay no silo "by value")
    assert algorithm.valuation_rule(settings, fusion.details) in VALUATION_RULES
    assert np.shape(fusion.labels) == np.shape(fusion.trained) == (N_PUBLIC,)
    assert np.asarray(fusion.trained).dtype == bool
    assert set(np.unique(fusion.labels)) <= {-1, *range(N_CLASSES)}
    assert fusion.privacy is None  # no noise, no privacy report
    if fusion.model is not None:  # an ensemble bundles its members instead of fitting a model
        probabilities = fusion.model.predict_proba(toy["evaluation"])
        assert probabilities.shape == (N_EVALUATION, N_CLASSES)
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)


#: The noise of a toy L1 job: the stored shape of workers.privacy.settings.PrivacySettings.
L1_PRIVACY = {"mechanism": "laplace", "gamma": 0.1, "sigma": None, "delta": 1e-5, "n_queries": 10}


def sentence(text) -> bool:
    """A sentence the API or a page can show as it is: non-empty text ending with a full stop."""
    return isinstance(text, str) and text.strip() == text and text.endswith(".") and len(text) > 10


def labelled_report(report, *, unit: str) -> bool:
    """An ε labelled as every ε must be: its unit, a δ in (0, 1) and a finite positive value."""
    return (
        report.unit == unit
        and 0 < report.delta < 1
        and np.isfinite(report.epsilon)
        and report.epsilon > 0
    )


@pytest.mark.parametrize("name", KINDS)
def test_a_kind_runs_at_l1_only_with_settings_it_prices_and_says_why_it_refuses_the_others(name):
    """At each level the kind's defaults are either runnable or refused with a sentence: a kind that accepts noise
    defaults at L1 to settings it can price (its ``noise_refusal`` is None there); any refusal it gives, at any
    level's defaults, is a sentence the API shows."""
    algorithm = algorithm_get(name)
    assert isinstance(algorithm.accepts_noise, bool)
    for level in PRIVACY_LEVELS:
        refusal = algorithm.noise_refusal(settings_at(algorithm, level))
        assert refusal is None or sentence(refusal), (level, refusal)
    if algorithm.accepts_noise:
        assert algorithm.noise_refusal(settings_at(algorithm, "L1")) is None
    else:  # the market's L1 refusal adds the kind's sentence where it has one
        assert algorithm.noise_refusal({}) is None or sentence(algorithm.noise_refusal({}))


@pytest.mark.parametrize("name", [name for name in KINDS if ALGORITHMS[name].accepts_noise])
def test_a_kind_that_takes_server_noise_prices_it_labelled_and_fuses_with_it(name, toy):
    """ServerNoisePrice: the votes one submission moves, a labelled party-level cost that grows with the votes a
    silo moves, the ``vote_weight`` shorthand's parameters (settings the kind validates and prices), and a fusion
    with noise that carries its privacy analysis (what the job is charged from)."""
    algorithm = algorithm_get(name)
    settings = settings_at(algorithm, "L1")
    votes = algorithm.votes_per_submission(settings)
    assert isinstance(votes, int) and votes >= 1
    cost = algorithm.l1_cost(settings, privacy=L1_PRIVACY)
    assert isinstance(cost, PrivacyCost) and labelled_report(cost.report, unit="party-level")
    assert cost.report.vote_shift == votes
    assert algorithm.l1_cost(settings, privacy=L1_PRIVACY, vote_shift=2 * votes).report.epsilon > (
        cost.report.epsilon
    )
    weighted = algorithm.validate(
        algorithm.level_defaults(
            algorithm.vote_weight_parameters(2),
            privacy_level="L1",
            evaluation_class_counts=CLASS_COUNTS,
        )
    )
    assert algorithm.noise_refusal(weighted) is None
    assert algorithm.votes_per_submission(weighted) > votes
    _, fusion = fused(algorithm, toy, settings, noise=LaplaceNoise(gamma=L1_PRIVACY["gamma"]))
    assert fusion.privacy is not None
    assert labelled_report(fusion.privacy.data_independent, unit="party-level")
    assert np.shape(fusion.labels) == (N_PUBLIC,)


@pytest.mark.parametrize("name", [name for name in KINDS if not ALGORITHMS[name].accepts_noise])
def test_a_kind_that_takes_no_server_noise_refuses_it_in_fuse(name, toy):
    algorithm = algorithm_get(name)
    with pytest.raises(ValueError, match="noise|L1|L0"):
        algorithm.fuse(
            np.zeros((N_PUBLIC, N_CLASSES)),
            toy["public"],
            members=toy["members"],
            n_classes=N_CLASSES,
            params=settings_at(algorithm, "L1"),
            noise=LaplaceNoise(gamma=0.1),
            seed=3,
        )


@pytest.mark.parametrize("name", KINDS)
def test_what_a_kind_tells_the_runner_about_its_fusion_is_well_typed(name, toy):
    """The protocol's answers the runner stores or shows: the evaluation flag, the log's sentence, the privacy
    report's notes and the valuation rule, from the settings and the fusion's ``details``."""
    algorithm = algorithm_get(name)
    settings = settings_at(algorithm, "L0")
    _, fusion = fused(algorithm, toy, settings)
    assert isinstance(fusion.details, dict) and all(isinstance(key, str) for key in fusion.details)
    assert isinstance(algorithm.reads_evaluation(settings), bool)
    report_sentence = algorithm.report_sentence(fusion.details, report_rows=N_EVALUATION // 2)
    assert report_sentence is None or sentence(report_sentence)
    notes = algorithm.privacy_notes(fusion.details)
    assert isinstance(notes, tuple) and all(sentence(note) for note in notes)
    rule = algorithm.valuation_rule(settings, fusion.details)
    assert rule is None or rule in VALUATION_RULES


@pytest.mark.parametrize("name", KINDS)
def test_the_runner_logs_a_kinds_fusion_and_values_its_silos_by_the_kinds_rule(name, toy):
    """The runner's own steps on the kind's result: the log's lines on the fusion and the evaluation, and the
    contribution values of the silos by the kind's rule (workers.valuation), logged as the finalize logs them."""
    from workers.runner.fusing import evaluation_logged, fusion_logged  # the worker side: Django
    from workers.runner.valuing import VALUATION_LOGGED, valuation_logged

    algorithm = algorithm_get(name)
    settings = settings_at(algorithm, "L0")
    chosen, fusion = fused(algorithm, toy, settings)
    lines = (
        *fusion_logged(fusion, n_members=len(chosen)),
        evaluation_logged(name, fusion.details, report_rows=N_EVALUATION // 2),
    )
    assert lines[0].startswith(f"Fused {len(chosen)} member(s)")
    assert all(sentence(line) for line in lines), lines
    rule = algorithm.valuation_rule(settings, fusion.details)
    members = [toy["members"][index] for index in chosen]
    values = contribution_values(
        {
            member.organisation: [toy["evaluation_probabilities"][index].mean(axis=0)]
            for member, index in zip(members, chosen)
        },
        toy["labels"],
        rule=rule,
        n_classes=N_CLASSES,
        member_class_counts={
            member.organisation: [label_counts_of(member.label_distribution, member.n_examples)]
            for member in members
        },
    )
    assert set(values["silos"]) == {member.organisation for member in members}
    assert valuation_logged(values, 0.5).startswith(f"{VALUATION_LOGGED} {len(members)} silo(s)")


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
