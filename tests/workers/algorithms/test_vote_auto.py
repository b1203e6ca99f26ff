"""FedKT's ``vote: auto`` (issue 19): every offered fusion is built from the same uploads, the choice reads one
stratified half of the evaluation split only, and auto is refused at L1 rather than charged for one release."""

from dataclasses import replace

import numpy as np
import pytest

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.auto_fusion import (
    AUTO_CANDIDATES,
    AUTO_REFUSED_AT_L1,
    EvaluationRows,
    auto_member_signal,
    ensemble_block,
    evaluation_halves,
    signal_block,
)
from workers.algorithms.registry import Member, algorithm_get
from workers.privacy.mechanisms import GaussianNoise

FEDKT = algorithm_get("fedkt")


def test_auto_is_a_vote_rule_whose_w_is_stored_and_which_is_refused_with_noise():
    settings = FEDKT.validate({"vote": "auto"})
    assert (settings["vote"], settings["vote_weight_max"]) == ("auto", 4)
    assert FEDKT.vote_weight(settings) == 4  # never priced below the weighted candidate
    assert FEDKT.noise_refusal(settings) == AUTO_REFUSED_AT_L1
    assert AUTO_REFUSED_AT_L1.startswith('"vote": "auto" cannot run at L1')
    with pytest.raises(ValueError, match="cannot run at L1"):
        FEDKT.fuse(
            np.zeros((4, 6)),
            np.zeros((4, 2)),
            members=[],
            n_classes=2,
            params=settings,
            noise=GaussianNoise(sigma=10.0),
            seed=0,
        )
    with pytest.raises(ValueError, match="evaluation split, which was not given"):
        FEDKT.fuse(
            np.zeros((4, 6)), np.zeros((4, 2)), members=[], n_classes=2, params=settings, seed=0
        )


def test_the_halves_are_stratified_disjoint_and_cover_the_split():
    labels = np.array([0] * 7 + [1] * 4 + [2] * 1)
    selection, report = evaluation_halves(labels, seed=3)
    assert sorted(np.concatenate([selection, report]).tolist()) == list(range(12))
    assert np.bincount(labels[selection], minlength=3).tolist() == [
        3,
        2,
        0,
    ]  # an odd class's extra row: report
    assert np.bincount(labels[report], minlength=3).tolist() == [4, 2, 1]
    assert (
        evaluation_halves(labels, seed=3)[0].tolist() == selection.tolist()
    )  # the job's seed fixes them


def test_an_auto_signal_holds_each_rules_signal_side_by_side():
    member = Member(
        key="1",
        organisation="1",
        n_examples=10,
        validation_score=0.5,
        n_models=2,
        label_distribution=(30, 10),
    )
    probabilities = np.array(
        [[[0.9, 0.1], [0.2, 0.8], [0.4, 0.6]], [[0.7, 0.3], [0.1, 0.9], [0.6, 0.4]]]
    )
    signal = auto_member_signal(probabilities, member=member, n_classes=2, weight_max=4)
    assert signal_block(signal, "consistent_hard", 2).tolist() == [[2, 0], [0, 2], [0, 0]]
    assert signal_block(signal, "class_weighted", 2).tolist() == [
        [8, 0],
        [0, 2],
        [0, 0],
    ]  # weights (4, 1)
    assert signal_block(signal, "soft", 2) == pytest.approx(probabilities.mean(axis=0))
    # the fourth block is the ensemble kind's member signal: the stacked candidate's input
    ensemble = algorithm_get("ensemble").member_signal(
        probabilities, member=member, n_classes=2, params={}
    )
    np.testing.assert_array_equal(ensemble_block(signal, 2), ensemble)


def test_an_auto_signal_of_a_submission_with_its_own_model_votes_with_the_students_and_stacks_the_own_model():
    """The silo's own model (stored last) never votes; the stacked candidate's block is that model (the demo's
    default L0 job failed on such a submission when the blocks were given the students only)."""
    member = Member(
        key="1", organisation="1", n_examples=10, validation_score=0.5, n_models=3, own_model=True
    )
    students = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.7, 0.3], [0.1, 0.9]]])
    own = np.array([[[0.3, 0.7], [0.6, 0.4]]])

    signal = auto_member_signal(
        np.concatenate([students, own]), member=member, n_classes=2, weight_max=4
    )

    assert signal_block(signal, "consistent_hard", 2).tolist() == [[2, 0], [0, 2]]
    assert signal_block(signal, "soft", 2) == pytest.approx(students.mean(axis=0))
    np.testing.assert_array_equal(ensemble_block(signal, 2), own[0])


def _federation(seed: int = 0):
    """Four members of two students on a linearly separable problem; member 3 predicts the wrong class always."""
    generator = np.random.default_rng(seed)
    public, evaluation = generator.normal(size=(200, 2)), generator.normal(size=(100, 2))
    truth = lambda x: (x[:, 0] > 0).astype(int)  # noqa: E731
    members, probabilities, evaluated = [], [], []
    for index in range(4):
        wrong = index == 3
        members.append(
            Member(
                key=str(10 + index),
                organisation=str(index),
                n_examples=50,
                validation_score=0.2 if wrong else 0.9 - index / 100,
                n_models=2,
                label_distribution=(25, 25),
            )
        )
        probabilities.append(
            np.stack([np.eye(2)[1 - truth(public) if wrong else truth(public)]] * 2)
        )
        evaluated.append(np.eye(2)[1 - truth(evaluation) if wrong else truth(evaluation)])
    return (
        members,
        probabilities,
        public,
        EvaluationRows(evaluation, truth(evaluation), np.stack(evaluated)),
    )


def _signals(settings, members, probabilities, evaluation):
    """The summed auto signal, and ``evaluation`` with every member's own signal (as the runner passes them)."""
    signals = np.stack(
        [
            FEDKT.member_signal(p, member=m, n_classes=2, params=settings)
            for p, m in zip(probabilities, members)
        ]
    )
    return signals.sum(axis=0), replace(evaluation, member_signals=signals)


def test_auto_scores_every_candidate_on_the_selection_half_and_names_the_choice():
    members, probabilities, public, evaluation = _federation()
    settings = FEDKT.validate(
        {"vote": "auto", "partitions": 2, "final_model": {"family": "logistic_regression"}}
    )
    signal, evaluation = _signals(settings, members, probabilities, evaluation)
    fusion = FEDKT.fuse(
        signal, public, members=members, n_classes=2, params=settings, seed=4, evaluation=evaluation
    )
    chosen = fusion.details["auto"]
    assert set(chosen["candidates"]) == set(AUTO_CANDIDATES)
    selection, report = evaluation_halves(evaluation.labels, seed=4)
    assert (chosen["selection_rows"], chosen["report_rows"]) == (len(selection), len(report))
    # the selected ensemble keeps the two best declared validation scores: both right, so it is perfect
    assert (
        chosen["candidates"]["ensemble_selected"]["accuracy"] == 1.0
        and chosen["ensemble_members"] == 2
    )
    best = max(score["accuracy"] for score in chosen["candidates"].values())
    assert chosen["candidates"][chosen["chosen"]]["accuracy"] == best
    assert chosen["chosen"] == next(
        name for name in AUTO_CANDIDATES if chosen["candidates"][name]["accuracy"] == best
    )


def test_the_choice_reads_only_the_selection_half():
    members, probabilities, public, evaluation = _federation()
    settings = FEDKT.validate({"vote": "auto", "final_model": {"family": "logistic_regression"}})
    signal, evaluation = _signals(settings, members, probabilities, evaluation)
    _, report = evaluation_halves(evaluation.labels, seed=4)
    features, member_probabilities = (
        evaluation.features.copy(),
        evaluation.member_probabilities.copy(),
    )
    features[report] = -features[report]  # what the report half holds cannot move the choice
    member_probabilities[:, report] = member_probabilities[:, report, ::-1]
    scrambled = replace(evaluation, features=features, member_probabilities=member_probabilities)
    first = FEDKT.fuse(
        signal, public, members=members, n_classes=2, params=settings, seed=4, evaluation=evaluation
    )
    second = FEDKT.fuse(
        signal, public, members=members, n_classes=2, params=settings, seed=4, evaluation=scrambled
    )
    assert first.details["auto"] == second.details["auto"]


def test_when_the_selected_ensemble_wins_the_global_model_is_its_members_alone():
    members, probabilities, public, evaluation = _federation()
    public = np.zeros_like(
        public
    )  # the public rows tell a final model nothing: every FedKT candidate guesses
    settings = FEDKT.validate({"vote": "auto", "final_model": {"family": "logistic_regression"}})
    signal, evaluation = _signals(settings, members, probabilities, evaluation)
    fusion = FEDKT.fuse(
        signal, public, members=members, n_classes=2, params=settings, seed=4, evaluation=evaluation
    )
    assert fusion.details["auto"]["chosen"] == "ensemble_selected"
    assert fusion.model is None and not fusion.trained.any()
    # the two best declared validation scores (members 10 and 11); the others are not shipped
    assert fusion.details["weights"] == {"10": 1.0, "11": 1.0, "12": 0.0, "13": 0.0}


def test_the_stacked_candidate_is_cross_fitted_and_wins_where_every_member_is_biased():
    """Every member says class 1 only beyond x > 0.8 where the truth is x > 0: each vote rule and the ensemble
    inherit the bias; the stack learns it from the selection half (scored out of fold there) and is chosen, its
    global model a fitted model refitted on the whole selection half."""
    generator = np.random.default_rng(1)
    public, features = generator.normal(size=(300, 2)), generator.normal(size=(200, 2))
    biased = lambda x: 1 / (1 + np.exp(-4 * (x[:, 0] - 0.8)))  # noqa: E731
    members = [
        Member(
            key=str(index), organisation=str(index), n_examples=50, validation_score=0.8, n_models=2
        )
        for index in range(3)
    ]
    probabilities = [
        np.stack([np.stack([1 - biased(public), biased(public)], axis=1)] * 2) for _ in members
    ]
    evaluated = np.stack([np.stack([1 - biased(features), biased(features)], axis=1)] * 3)
    evaluation = EvaluationRows(features, (features[:, 0] > 0).astype(int), evaluated)
    settings = FEDKT.validate({"vote": "auto", "final_model": {"family": "logistic_regression"}})
    signal, evaluation = _signals(settings, members, probabilities, evaluation)
    fusion = FEDKT.fuse(
        signal, public, members=members, n_classes=2, params=settings, seed=2, evaluation=evaluation
    )
    chosen = fusion.details["auto"]
    assert chosen["chosen"] == "stacked", chosen["candidates"]
    assert set(chosen["candidates"]) == set(AUTO_CANDIDATES)
    assert (
        chosen["candidates"]["stacked"]["accuracy"] > chosen["candidates"]["soft"]["accuracy"] + 0.1
    )
    selection, report = evaluation_halves(evaluation.labels, seed=2)
    assert fusion.details["stack"]["fit_rows"] == len(selection)
    assert fusion.details["stack"]["report_rows"] == len(report)
    assert fusion.model is not None and fusion.trained.all()
    report_accuracy = np.mean(fusion.model.predict(features[report]) == evaluation.labels[report])
    assert report_accuracy > 0.9


def test_signals_stored_before_the_ensemble_block_leave_the_stacked_candidate_out():
    members, probabilities, public, evaluation = _federation()
    settings = FEDKT.validate({"vote": "auto", "final_model": {"family": "logistic_regression"}})
    signal, evaluation = _signals(settings, members, probabilities, evaluation)
    older = replace(evaluation, member_signals=evaluation.member_signals[..., : 3 * 2])
    fusion = FEDKT.fuse(
        signal, public, members=members, n_classes=2, params=settings, seed=4, evaluation=older
    )
    assert set(fusion.details["auto"]["candidates"]) == set(AUTO_CANDIDATES) - {"stacked"}
