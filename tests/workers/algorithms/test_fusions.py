"""The registered job kinds, called exactly as a job calls them: select → member_signal → fuse."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.fedkt import predict_classes, server_fit
from workers.algorithms.fedkt_fusion import DEFAULT_QUERY_SELECTION, DEFAULT_SEMI_SUPERVISED
from workers.algorithms.registry import ALGORITHMS, Member, agreement_counts, algorithm_get
from workers.learners import fit_aligned
from workers.partition import dirichlet_label_partition
from workers.privacy.mechanisms import LaplaceNoise

FOREST = {"family": "random_forest", "n_estimators": 20, "max_depth": 4}


def _member(key, n_examples=100, score=0.8, n_models=1):
    return Member(
        key=key,
        organisation=f"org-{key}",
        n_examples=n_examples,
        validation_score=score,
        n_models=n_models,
    )


def _run(name, member_probabilities, members, public_x, *, n_classes, params, seed=0, noise=None):
    """The job's calling convention: selection, one signal per member, a sum, one fuse."""
    algorithm = algorithm_get(name)
    chosen = algorithm.select(members, params, seed=seed)
    signals = [
        algorithm.member_signal(
            member_probabilities[i], member=members[i], n_classes=n_classes, params=params
        )
        for i in chosen
    ]
    fusion = algorithm.fuse(
        np.sum(signals, axis=0),
        public_x,
        members=[members[i] for i in chosen],
        n_classes=n_classes,
        params=params,
        noise=noise,
        seed=seed,
    )
    return chosen, signals, fusion


@pytest.fixture(scope="module")
def digits_federation():
    features, labels = load_digits(return_X_y=True)
    features = features / 16.0
    train_x, rest_x, train_y, rest_y = train_test_split(
        features, labels, test_size=0.4, random_state=0, stratify=labels
    )
    public_x, test_x, _, test_y = train_test_split(
        rest_x, rest_y, test_size=0.5, random_state=0, stratify=rest_y
    )
    parts = dirichlet_label_partition(train_y, 4, beta=0.5, seed=0, min_size=30)
    models = [
        [
            fit_aligned(FOREST, train_x[p], train_y[p], n_classes=10, seed=10 * j + s)
            for s in range(2)
        ]
        for j, p in enumerate(parts)
    ]
    probabilities = [np.stack([model.predict_proba(public_x) for model in pair]) for pair in models]
    members = [
        _member(str(j), n_examples=len(p), score=0.5 + 0.1 * j, n_models=2)
        for j, p in enumerate(parts)
    ]
    return models, probabilities, members, public_x, test_x, test_y


def test_importing_the_package_registers_every_kind():
    assert {"fedkt", "ensemble", "distill", "cpfl"} <= set(ALGORITHMS)


def test_fedkt_member_signal_is_the_members_consistent_votes():
    # s = 2 students, 3 public rows, 3 classes: consistent on rows 0 (class 1) and 2 (class 0)
    probabilities = np.array(
        [
            [[0.1, 0.8, 0.1], [0.6, 0.3, 0.1], [0.5, 0.2, 0.3]],
            [[0.2, 0.7, 0.1], [0.1, 0.1, 0.8], [0.9, 0.0, 0.1]],
        ]
    )
    signal = algorithm_get("fedkt").member_signal(
        probabilities, member=_member("a", n_models=2), n_classes=3, params={"partitions": 2}
    )
    assert signal.tolist() == [[0, 2, 0], [0, 0, 0], [2, 0, 0]]


def test_fedkt_fuse_equals_the_engines_server_side(digits_federation):
    models, probabilities, members, public_x, test_x, test_y = digits_federation
    params = {
        "partitions": 2,
        "query": 0.5,
        "final": FOREST,
        "query_selection": "random",
        "semi_supervised": "none",
    }
    _, _, fusion = _run(
        "fedkt", probabilities, members, public_x, n_classes=10, params=params, seed=7
    )
    predictions = np.stack([predict_classes(pair, public_x) for pair in models])
    server = server_fit(predictions, public_x, n_classes=10, final=FOREST, query=0.5, seed=7)
    queried = server.queried_indices[server.trained]
    assert np.array_equal(np.flatnonzero(fusion.trained), queried)
    assert np.array_equal(fusion.labels[queried], server.labels[server.trained])
    assert (fusion.labels[~fusion.trained] == -1).all()
    assert np.array_equal(fusion.model.predict(test_x), server.final_model.predict(test_x))
    assert fusion.details == {
        "n_queried": 180,
        "n_abstained": 180 - len(queried),
        "n_trained": len(queried),
        "unlabelled_classes": [],
        "silo_designs": {member.key: {"students": 2, "teachers": None} for member in members},
        "query_selection": "random",
        "semi_supervised": "none",
    }
    assert fusion.privacy is None


def test_an_l1_report_records_the_most_teachers_a_submission_declared_unless_the_job_names_t(
    digits_federation,
):
    _, probabilities, members, public_x, _, _ = digits_federation
    declared = [
        Member(m.key, m.organisation, m.n_examples, m.validation_score, n_models=2, teachers=t)
        for m, t in zip(members, [3, 1, 4, None] * len(members))
    ]
    params = {"partitions": 2, "query": 40, "final": FOREST, "privacy": {"delta": 1e-5}}
    _, _, fusion = _run(
        "fedkt",
        probabilities,
        declared,
        public_x,
        n_classes=10,
        params=params,
        noise=LaplaceNoise(gamma=0.1),
    )
    assert fusion.privacy.data_independent.teachers == 4
    assert fusion.details["silo_designs"][declared[1].key] == {"students": 2, "teachers": 1}


def test_fedkt_fuse_with_server_noise_reports_party_level_privacy(digits_federation):
    _, probabilities, members, public_x, _, _ = digits_federation
    params = {
        "partitions": 2,
        "query": 40,
        "final": FOREST,
        "teachers": 5,
        "privacy": {"delta": 1e-5},
    }
    _, _, fusion = _run(
        "fedkt",
        probabilities,
        members,
        public_x,
        n_classes=10,
        params=params,
        noise=LaplaceNoise(gamma=0.1),
    )
    independent, dependent = fusion.privacy.data_independent, fusion.privacy.data_dependent
    assert (independent.n_queries, independent.partitions, independent.teachers) == (40, 2, 5)
    assert independent.unit == "party-level" and independent.delta == 1e-5
    assert 0 < dependent.epsilon <= independent.epsilon


def test_fedkt_refuses_a_submission_with_more_students_than_the_jobs_s_and_takes_fewer():
    with pytest.raises(ValueError) as refused:
        algorithm_get("fedkt").select(
            [_member("a", n_models=2), _member("b", n_models=3)], {"partitions": 2}, seed=0
        )
    assert str(refused.value) == (
        "Submission #b holds 3 FedKT student(s), but a FedKT job with s = 2 takes 1 to 2 students per "
        "submission (at L1 each is charged for s = 2); set 'partitions' to at least 3 or choose other "
        "submissions."
    )
    own_only = Member("c", "org-c", 10, 0.5, n_models=1, own_model=True)
    with pytest.raises(ValueError, match="Submission #c holds 0 FedKT student"):
        algorithm_get("fedkt").select([own_only], {"partitions": 2}, seed=0)
    small = Member(
        "d", "org-d", 9, 0.5, n_models=2, own_model=True
    )  # s_i = 1 student and its own model
    assert algorithm_get("fedkt").select(
        [_member("a", n_models=2), small], {"partitions": 2}, seed=0
    ) == [
        0,
        1,
    ]


def test_a_member_with_fewer_students_votes_its_own_s_and_its_own_model_never_votes():
    # student 1 and the own model say class 1 on row 0; the one student decides the vote: s_i = 1 vote
    probabilities = np.array([[[0.2, 0.8], [0.9, 0.1]], [[0.0, 1.0], [0.0, 1.0]]])
    member = Member("d", "org-d", 9, 0.5, n_models=2, own_model=True)
    signal = algorithm_get("fedkt").member_signal(
        probabilities, member=member, n_classes=2, params={"partitions": 2}
    )
    assert signal.tolist() == [[0, 1], [1, 0]]
    # the same probabilities with the second file a student: they disagree on row 1, so no vote there
    both_students = Member("d", "org-d", 9, 0.5, n_models=2)
    signal = algorithm_get("fedkt").member_signal(
        probabilities, member=both_students, n_classes=2, params={"partitions": 2}
    )
    assert signal.tolist() == [[0, 2], [0, 0]]


def test_the_l1_price_of_a_job_does_not_fall_when_a_member_has_fewer_students():
    fedkt = algorithm_get("fedkt")
    assert (
        fedkt.votes_per_submission({"partitions": 2}) == 2
    )  # charged for s, not the member's s_i = 1


def test_ensemble_fuse_labels_by_the_average_of_the_selected_members():
    members = [_member("a", score=0.9), _member("b", score=0.6), _member("c", score=0.8)]
    probabilities = [
        np.array([[[0.9, 0.1], [0.2, 0.8]]]),
        np.array([[[0.0, 1.0], [0.0, 1.0]]]),
        np.array([[[0.4, 0.6], [0.7, 0.3]]]),
    ]
    chosen, signals, fusion = _run(
        "ensemble",
        probabilities,
        members,
        np.zeros((2, 3)),
        n_classes=2,
        params={"strategy": "cross_validation", "k": 2},
    )
    assert chosen == [0, 2]
    assert fusion.model is None and fusion.labels.tolist() == [0, 1] and not fusion.trained.any()
    assert fusion.details["n_members"] == 2 and fusion.details["mean_confidence"] == pytest.approx(
        (0.65 + 0.55) / 2
    )


def test_ensemble_member_signal_averages_the_members_model_files():
    probabilities = np.array([[[1.0, 0.0]], [[0.5, 0.5]]])
    signal = algorithm_get("ensemble").member_signal(
        probabilities, member=_member("a", n_models=2), n_classes=2, params={}
    )
    assert signal.tolist() == [[0.75, 0.25]]


def test_ensemble_member_signal_is_the_silos_own_model_when_its_submission_carries_one():
    probabilities = np.array(
        [[[1.0, 0.0]], [[0.5, 0.5]], [[0.1, 0.9]]]
    )  # two students, then the own model
    signal = algorithm_get("ensemble").member_signal(
        probabilities,
        member=Member("a", "org-a", 10, 0.5, n_models=3, own_model=True),
        n_classes=2,
        params={},
    )
    assert signal.tolist() == [[0.1, 0.9]]


def test_ensemble_refuses_noise():
    with pytest.raises(ValueError, match="no noise"):
        algorithm_get("ensemble").fuse(
            np.ones((1, 2)),
            np.zeros((1, 1)),
            members=[_member("a")],
            n_classes=2,
            params={},
            noise=LaplaceNoise(gamma=1.0),
            seed=0,
        )


@pytest.mark.parametrize(
    "student",
    [
        "kernel",
        {"family": "random_forest", "n_estimators": 30},
        {"family": "mlp", "hidden_sizes": [32], "epochs": 30},
    ],
)
def test_distill_student_follows_its_teacher(digits_federation, student):
    _, probabilities, members, public_x, test_x, test_y = digits_federation
    _, signals, fusion = _run(
        "distill",
        probabilities,
        members,
        public_x,
        n_classes=10,
        params={"student": student, "strategy": "all"},
        seed=3,
    )
    assert fusion.trained.all() and fusion.details["n_proxy"] == len(public_x)
    assert fusion.details["fidelity"] >= 0.8
    ensemble_test = np.mean(
        [
            p.mean(axis=0)
            for p in [
                np.stack([m.predict_proba(test_x) for m in pair]) for pair in digits_federation[0]
            ]
        ],
        axis=0,
    ).argmax(axis=1)
    assert np.mean(fusion.model.predict(test_x) == ensemble_test) >= 0.7
    assert fusion.model.predict_proba(test_x).shape == (len(test_x), 10)
    assert sum(agreement_counts(s, fusion.labels) for s in signals) > 0


def test_distill_uses_a_seeded_share_of_public_rows_as_proxy(digits_federation):
    _, probabilities, members, public_x, _, _ = digits_federation
    params = {"student": "kernel", "proxy": 0.25}
    _, _, first = _run(
        "distill", probabilities, members, public_x, n_classes=10, params=params, seed=5
    )
    _, _, again = _run(
        "distill", probabilities, members, public_x, n_classes=10, params=params, seed=5
    )
    assert first.trained.sum() == 90 and np.array_equal(first.trained, again.trained)


def test_binary_ensemble_and_distillation_run_end_to_end_on_breast_cancer():
    features, labels = load_breast_cancer(return_X_y=True)
    features = (features - features.mean(axis=0)) / features.std(axis=0)
    train_x, public_x, train_y, _ = train_test_split(
        features, labels, test_size=0.3, random_state=0, stratify=labels
    )
    parts = np.array_split(np.random.default_rng(0).permutation(len(train_y)), 5)
    models = [
        fit_aligned("logistic_regression", train_x[p], train_y[p], n_classes=2, seed=0)
        for p in parts
    ]
    probabilities = [model.predict_proba(public_x)[None] for model in models]
    members = [_member(str(j), n_examples=len(p)) for j, p in enumerate(parts)]
    for name, params in [
        ("ensemble", {"strategy": "data", "k": 3}),
        ("distill", {"strategy": "random", "k": 4}),
        ("distill", {"student": {"family": "xgboost", "n_estimators": 20}, "target": "argmax"}),
    ]:
        _, _, fusion = _run(name, probabilities, members, public_x, n_classes=2, params=params)
        assert fusion.labels.shape == (len(public_x),)


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("ensemble", {"strategy": "best"}, "strategy must be one of"),
        ("ensemble", {"k": 0}, "positive integer"),
        ("ensemble", {"strategy": "random", "threshold": 0.5}, "threshold applies"),
        ("ensemble", {"student": "kernel"}, "Unknown parameter(s) for an ensemble job: student."),
        (
            "distill",
            {"target": "probabilities"},
            "'target' must be one of 'soft', 'argmax', not 'probabilities'.",
        ),
        ("distill", {"student": 3}, "'student' must be a mapping with a 'family' of kernel, "),
        ("distill", {"proxy": 1.5}, "A query fraction must lie in (0, 1], not 1.5."),
        (
            "distill",
            {"temperature": 1e9},
            "'temperature' must be a number in (0, 100], not 1000000000.0.",
        ),
        ("fedkt", {"query": 0}, "A query fraction must lie in (0, 1], not 0."),
        ("fedkt", {"query": 1}, "'query': 1 is ambiguous (one public row, or all of them?)"),
        (
            "fedkt",
            {"query_fraction": 0.5, "query_count": 3},
            "Give one of query_fraction, query_count, not several.",
        ),
        (
            "fedkt",
            {"final": {"n_estimators": 3}},
            "'final_model' must be a mapping with a 'family' of",
        ),
        (
            "fedkt",
            {"final_model": {"family": "random_forest", "n_estimators": 10**12}},
            "'final_model.n_estimators' must be a whole number from 1 to 1000, not 1000000000000.",
        ),
        (
            "fedkt",
            {"final_model": {"family": "xgboost", "n_jobs": 64}},
            "Unknown parameter(s) for the final_model (xgboost): n_jobs.",
        ),
        ("fedkt", {"partitions": 65}, "'partitions' must be a whole number from 1 to 64, not 65."),
        (
            "cpfl",
            {"student": {"family": "mlp", "epochs": 10**6}},
            "'student.epochs' must be a whole number from 1 to 1000, not 1000000.",
        ),
    ],
)
def test_validate_names_the_bad_parameter(name, params, message):
    with pytest.raises(ValueError) as refused:
        algorithm_get(name).validate(params)
    assert message in str(refused.value)


def test_the_job_rows_parameter_shape_is_understood():
    members = [
        _member("a", n_examples=10, score=0.9),
        _member("b", n_examples=500, score=0.6),
        _member("c", n_examples=300, score=0.8),
    ]
    ensemble = algorithm_get("ensemble")
    assert ensemble.select(
        members, {"selection": {"strategy": "validation_score", "k": 1}}, seed=0
    ) == [0]
    assert ensemble.select(members, {"selection": {"strategy": "data_size", "k": 2}}, seed=0) == [
        1,
        2,
    ]
    distill = algorithm_get("distill").validate(
        {
            "final_model": {"family": "mlp"},
            "query": 0.5,
            "selection": {"strategy": "all", "k": None},
        }
    )
    assert (distill["student"], distill["query_fraction"], distill["k"]) == (
        {"family": "mlp"},
        0.5,
        None,
    )
    fedkt = algorithm_get("fedkt").validate(
        {"final": {"family": "xgboost"}, "partitions": 2, "query": 300}
    )
    assert fedkt == {  # t is the silos': a job stores it only where it names it
        "partitions": 2,
        "query_count": 300,
        "final_model": {"family": "xgboost"},
        "query_selection": DEFAULT_QUERY_SELECTION,
        "semi_supervised": DEFAULT_SEMI_SUPERVISED,
    }
