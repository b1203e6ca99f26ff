"""Fusing in a child process: the same fusion as in one process (also where the child's native threads are
limited and this process's are not), noise stored by the parent before it is used, engine errors as sentences,
and a cancel that ends the child."""

from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.auto_fusion import EvaluationRows
from workers.algorithms.registry import Member, algorithm_get
from workers.jobs.interruptible import fuse_in_child
from workers.privacy.mechanisms import LaplaceNoise

PARAMS = {
    "partitions": 2,
    "query_count": 20,
    "final_model": {"family": "logistic_regression"},
    "privacy": {"delta": 1e-5},
}
MEMBERS = [
    Member(key=str(i), organisation=str(i), n_examples=50, validation_score=0.5, n_models=2)
    for i in range(3)
]


def _inputs():
    generator = np.random.default_rng(0)
    features = generator.normal(size=(40, 3))
    labels = (features[:, 0] > 0).astype(int)
    counts = np.zeros((40, 2), dtype=np.int64)
    counts[np.arange(40), labels] = 6  # all 3 members vote consistently (s = 2)
    return counts, features


def test_the_child_fuses_exactly_as_one_process_does():
    counts, features = _inputs()
    fusion = fuse_in_child(
        kind="fedkt",
        signal_sum=counts,
        public_features=features,
        members=MEMBERS,
        n_classes=2,
        params=PARAMS,
        seed=4,
        cancelled=lambda: False,
    )
    alone = algorithm_get("fedkt").fuse(
        counts, features, members=MEMBERS, n_classes=2, params=PARAMS, seed=4
    )
    assert np.array_equal(fusion.labels, alone.labels) and np.array_equal(
        fusion.trained, alone.trained
    )
    assert np.array_equal(fusion.model.predict(features), alone.model.predict(features))


def _biased_auto_inputs():
    """An ``auto`` job whose stacked candidate wins (every member is biased; its logistic aggregators are fitted
    dozens of times): the summed signal, the public rows, the members, the settings and the evaluation rows."""
    fedkt = algorithm_get("fedkt")
    generator = np.random.default_rng(1)
    public, features = generator.normal(size=(300, 2)), generator.normal(size=(200, 2))
    shifts = (0.6, 0.8, 1.0, 1.2)
    members = [
        Member(key=str(i), organisation=str(i), n_examples=50, validation_score=0.8, n_models=2)
        for i in range(len(shifts))
    ]

    def biased(rows, shift):
        positive = 1 / (1 + np.exp(-4 * (rows[:, 0] - shift)))
        return np.stack([1 - positive, positive], axis=1)

    settings = fedkt.validate({"vote": "auto", "final_model": {"family": "logistic_regression"}})
    signals = np.stack(
        [
            fedkt.member_signal(
                np.stack([biased(public, shift)] * 2), member=member, n_classes=2, params=settings
            )
            for member, shift in zip(members, shifts)
        ]
    )
    evaluation = EvaluationRows(
        features,
        (features[:, 0] > 0).astype(int),
        np.stack([biased(features, shift) for shift in shifts]),
        member_signals=signals,
    )
    return signals.sum(axis=0), public, members, settings, evaluation


def test_an_auto_fusion_in_the_single_threaded_child_equals_one_in_a_process_with_threaded_blas():
    signal_sum, public, members, settings, evaluation = _biased_auto_inputs()
    fusion = fuse_in_child(
        kind="fedkt",
        signal_sum=signal_sum,
        public_features=public,
        members=members,
        n_classes=2,
        params=settings,
        seed=2,
        cancelled=lambda: False,
        evaluation=evaluation,
    )
    with threadpool_limits(limits=2):  # every BLAS and OpenMP pool of this process on two threads
        alone = algorithm_get("fedkt").fuse(
            signal_sum,
            public,
            members=members,
            n_classes=2,
            params=settings,
            seed=2,
            evaluation=evaluation,
        )
    assert fusion.details["auto"]["chosen"] == "stacked"
    assert fusion.details == alone.details
    assert np.array_equal(fusion.labels, alone.labels)
    assert np.array_equal(
        fusion.model.predict_proba(evaluation.features),
        alone.model.predict_proba(evaluation.features),
    )


def test_fresh_noise_is_handed_to_the_parent_once_and_a_stored_draw_is_replayed():
    counts, features = _inputs()
    drawn = []
    fusion = fuse_in_child(
        kind="fedkt",
        signal_sum=counts,
        public_features=features,
        members=MEMBERS,
        n_classes=2,
        params=PARAMS,
        seed=4,
        noise=LaplaceNoise(gamma=0.5),
        on_noise_drawn=drawn.append,
        cancelled=lambda: False,
    )
    assert len(drawn) == 1 and drawn[0].shape == (20, 2)
    assert fusion.privacy.data_independent.n_queries == 20
    again = []
    replayed = fuse_in_child(
        kind="fedkt",
        signal_sum=counts,
        public_features=features,
        members=MEMBERS,
        n_classes=2,
        params=PARAMS,
        seed=4,
        noise=LaplaceNoise(gamma=0.5),
        stored_noise=drawn[0],
        on_noise_drawn=again.append,
        cancelled=lambda: False,
    )
    assert again == [] and np.array_equal(replayed.labels, fusion.labels)


def test_an_engine_error_comes_back_as_its_sentence():
    counts, features = _inputs()
    with pytest.raises(ValueError, match="Cannot query 50 of 40 public examples."):
        fuse_in_child(
            kind="fedkt",
            signal_sum=counts,
            public_features=features,
            members=MEMBERS,
            n_classes=2,
            params={**PARAMS, "query_count": 50},
            seed=0,
            cancelled=lambda: False,
        )


def test_a_cancel_ends_the_child_and_returns_nothing():
    counts, features = _inputs()
    started = []
    slow = {
        **PARAMS,
        "query_count": 40,
        "final_model": {"family": "mlp", "hidden_sizes": [4096, 4096], "epochs": 1000},
    }
    fusion = fuse_in_child(
        kind="fedkt",
        signal_sum=counts,
        public_features=features,
        members=MEMBERS,
        n_classes=2,
        params=slow,
        seed=0,
        cancelled=lambda: bool(started),
        on_start=started.append,
        poll_seconds=0.1,
    )
    assert fusion is None
    assert (
        not Path(f"/proc/{started[0]}").exists()
        or "\nState:\tZ" in Path(f"/proc/{started[0]}/status").read_text()
    )
