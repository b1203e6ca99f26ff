"""FedKT's ``vote: auto`` (issue 19): every offered fusion is built from the same uploads, the choice reads one
stratified half of the evaluation split only, and auto is refused at L1 rather than charged for one release."""

from dataclasses import replace

import numpy as np
import pytest

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.auto_fusion import (
    AUTO_CANDIDATES,
    AUTO_REFUSED_AT_L1,
    STACKED_FOLDS,
    EvaluationRows,
    auto_choice_sentence,
    auto_member_signal,
    ensemble_block,
    evaluation_halves,
    signal_block,
    stacked_settings,
)
from workers.algorithms.operator_only import (
    OPERATOR_ONLY,
    SILOS_ADDED_NOTHING,
    operator_only_cross_fitted,
    silos_added_nothing,
)
from workers.algorithms.registry import Member, algorithm_get
from workers.algorithms.stacking import stacked_fit
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


def test_operator_only_is_the_last_candidate_so_a_tie_goes_to_a_federated_one():
    assert AUTO_CANDIDATES[-1] == OPERATOR_ONLY


def _useless_federation(seed: int = 0):
    """Three members whose every probability is noise (they learnt nothing) on a problem the evaluation rows
    teach a linear model: the class is x0 > 0."""
    generator = np.random.default_rng(seed)
    public, features = generator.normal(size=(200, 2)), generator.normal(size=(240, 2))
    members = [
        Member(
            key=str(index), organisation=str(index), n_examples=50, validation_score=0.9, n_models=2
        )
        for index in range(3)
    ]

    def noise(rows):
        positive = generator.uniform(size=rows)
        return np.stack([1 - positive, positive], axis=1)

    probabilities = [np.stack([noise(len(public)), noise(len(public))]) for _ in members]
    evaluated = np.stack([noise(len(features)) for _ in members])
    labels = (features[:, 0] > 0).astype(int)
    return members, probabilities, public, EvaluationRows(features, labels, evaluated)


def _fused(members, probabilities, public, evaluation, *, seed=4):
    settings = FEDKT.validate({"vote": "auto", "final_model": {"family": "logistic_regression"}})
    signal, evaluation = _signals(settings, members, probabilities, evaluation)
    fusion = FEDKT.fuse(
        signal,
        public,
        members=members,
        n_classes=2,
        params=settings,
        seed=seed,
        evaluation=evaluation,
    )
    return fusion, evaluation, signal, settings


def _report_accuracy(probabilities, labels) -> float:
    return float(np.mean(np.asarray(probabilities).argmax(axis=1) == labels))


def test_where_the_members_are_noise_auto_chooses_the_operators_rows_alone_and_it_scores_best_on_the_report_half():
    members, probabilities, public, evaluation = _useless_federation()
    fusion, evaluation, signal, settings = _fused(members, probabilities, public, evaluation)
    chosen = fusion.details["auto"]
    assert chosen["chosen"] == OPERATOR_ONLY, chosen["candidates"]
    assert silos_added_nothing(fusion.details)
    selection, report = evaluation_halves(evaluation.labels, seed=4)
    # refitted on the whole selection half; no public row was labelled or trained on (no silo's vote is used)
    assert fusion.details["operator_only"] == {"fit_rows": len(selection)}
    assert not fusion.trained.any() and (fusion.labels == -1).all()
    features, labels = evaluation.features[report], evaluation.labels[report]
    mine = _report_accuracy(fusion.model.predict_proba(features), labels)
    # every other candidate on the same report half: each FedKT vote rule's own job, the ensembles, the stack
    others = {
        rule: _report_accuracy(
            FEDKT.fuse(
                signal_block(signal, rule, 2),
                public,
                members=members,
                n_classes=2,
                params={
                    **{key: value for key, value in settings.items() if key != "vote_weight_max"},
                    "vote": rule,
                    **({"vote_weight_max": 4} if rule == "class_weighted" else {}),
                },
                seed=4,
            ).model.predict_proba(features),
            labels,
        )
        for rule in ("consistent_hard", "class_weighted", "soft")
    }
    others["ensemble"] = _report_accuracy(
        evaluation.member_probabilities[:, report].mean(axis=0), labels
    )
    others |= {
        f"member {index}": _report_accuracy(member[report], labels)
        for index, member in enumerate(evaluation.member_probabilities)
    }
    stacked = stacked_fit(
        ensemble_block(evaluation.member_signals, 2),
        public,
        member_evaluation=evaluation.member_probabilities,
        evaluation_features=evaluation.features,
        evaluation_labels=evaluation.labels,
        fit_rows=selection,
        settings=stacked_settings(settings),
        n_classes=2,
        seed=4,
        refuse=False,
    )
    others["stacked"] = _report_accuracy(stacked.model.predict_proba(features), labels)
    assert mine > 0.9
    assert all(mine >= other for other in others.values()), (mine, others)


def test_where_the_members_are_right_and_the_operators_rows_cannot_teach_the_model_a_federated_candidate_wins():
    """The class is x0 · x1 > 0, which a linear model fitted on evaluation rows cannot learn; the members know it."""
    generator = np.random.default_rng(3)
    public, features = generator.normal(size=(200, 2)), generator.normal(size=(200, 2))
    truth = lambda x: (x[:, 0] * x[:, 1] > 0).astype(int)  # noqa: E731
    members = [
        Member(
            key=str(index), organisation=str(index), n_examples=50, validation_score=0.9, n_models=2
        )
        for index in range(3)
    ]
    probabilities = [np.stack([np.eye(2)[truth(public)]] * 2) for _ in members]
    evaluation = EvaluationRows(
        features, truth(features), np.stack([np.eye(2)[truth(features)]] * 3)
    )
    fusion, *_ = _fused(members, probabilities, public, evaluation)
    chosen = fusion.details["auto"]
    assert chosen["chosen"] != OPERATOR_ONLY and not silos_added_nothing(fusion.details)
    assert (
        chosen["candidates"][OPERATOR_ONLY]["accuracy"] < 0.75
    )  # scored, cross-fitted, and beaten
    assert chosen["candidates"]["ensemble_selected"]["accuracy"] == 1.0


def test_the_operator_only_candidate_reads_no_feature_or_member_probability_of_the_report_half():
    """Poisoned report-half features and member probabilities leave the choice, every candidate's selection score
    and the fitted model unchanged."""
    members, probabilities, public, evaluation = _useless_federation(seed=1)
    _, report = evaluation_halves(evaluation.labels, seed=4)
    features, member_probabilities = (
        evaluation.features.copy(),
        evaluation.member_probabilities.copy(),
    )
    features[report] = 100.0
    member_probabilities[:, report] = member_probabilities[:, report, ::-1]
    poisoned = replace(evaluation, features=features, member_probabilities=member_probabilities)
    clean, *_ = _fused(members, probabilities, public, evaluation)
    dirty, *_ = _fused(members, probabilities, public, poisoned)
    assert clean.details["auto"]["chosen"] == OPERATOR_ONLY
    assert dirty.details == clean.details
    np.testing.assert_allclose(dirty.model.predict_proba(public), clean.model.predict_proba(public))
    # and the fit half does move it: the test can fail
    selection = np.setdiff1d(np.arange(len(evaluation.labels)), report)
    features[selection] = -features[selection]
    moved, *_ = _fused(members, probabilities, public, replace(poisoned, features=features))
    assert not np.allclose(moved.model.predict_proba(public), clean.model.predict_proba(public))


def test_the_operator_only_candidate_reads_no_label_of_the_report_half():
    """Labels: the halves held fixed (the stratified draw reads every label to deal the rows), the report half's
    labels flipped; the cross-fitted probabilities are unchanged, and flipping the selection half's moves them."""
    _, _, _, evaluation = _useless_federation(seed=2)
    selection, report = evaluation_halves(evaluation.labels, seed=4)

    def cross_fitted(labels):
        return operator_only_cross_fitted(
            evaluation.features[selection],
            labels[selection],
            final_model={"family": "logistic_regression"},
            n_classes=2,
            folds=STACKED_FOLDS,
            seed=4,
        )

    flipped = evaluation.labels.copy()
    flipped[report] = 1 - flipped[report]
    np.testing.assert_array_equal(cross_fitted(flipped), cross_fitted(evaluation.labels))
    flipped[selection] = 1 - flipped[selection]
    assert not np.allclose(cross_fitted(flipped), cross_fitted(evaluation.labels))


def test_a_job_that_chose_the_operators_rows_says_the_silos_added_nothing():
    choice = {
        "chosen": OPERATOR_ONLY,
        "criterion": "accuracy",
        "selection_rows": 120,
        "report_rows": 121,
    }
    assert auto_choice_sentence(choice) == (
        "Fusion chosen by auto: operator_only (best accuracy on 120 evaluation rows); metrics below are on the "
        "other 121. The silos added nothing: a model fitted on the operator's own evaluation rows alone, with no "
        "silo's data, scored better than every federated fusion on the selection rows, so the global model is "
        "that model: it uses no silo's upload and credits no silo."
    )
    federated = {**choice, "chosen": "stacked"}
    assert auto_choice_sentence(federated) == (
        "Fusion chosen by auto: stacked (best accuracy on 120 evaluation rows); metrics below are on the other 121."
    )
    assert SILOS_ADDED_NOTHING not in auto_choice_sentence(federated)
