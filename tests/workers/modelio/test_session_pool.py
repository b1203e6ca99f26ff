"""Warm sandbox sessions: the same outcomes as a fresh child, one child reused across calls, recycled after its
calls or idle time, bounded in number, and run under the same limits and stripped environment."""

import os
import signal
from pathlib import Path

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from tests.conftest import wait_until
from workers.modelio import SandboxConfiguration, SandboxLimits
from workers.modelio.session_pool import SessionPool, SessionPoolLimits
from workers.modelio.tree_ensemble_onnx import tree_ensemble_onnx

FEATURES = np.random.default_rng(0).normal(size=(300, 4)).astype(np.float32)
LIMITS = SandboxLimits(memory_bytes=3 * 2**30, cpu_seconds=60, wall_seconds=60)


def forest_file(seed: int) -> tuple[bytes, RandomForestClassifier]:
    labels = (FEATURES[:, seed % 4] > 0).astype(np.int64)
    forest = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=seed).fit(
        FEATURES, labels
    )
    return tree_ensemble_onnx(forest, 4), forest


@pytest.fixture
def pools():
    made = []

    def pool(**pool_limits):
        made.append(
            SessionPool(
                configuration=SandboxConfiguration(limits=LIMITS),
                pool_limits=SessionPoolLimits(**pool_limits),
            )
        )
        return made[-1]

    yield pool
    for pool in made:
        pool.close()


def test_a_warm_session_predicts_what_a_fresh_child_predicts_and_serves_the_next_call(pools):
    data, forest = forest_file(0)
    pool = pools()
    first = pool.predict([data], FEATURES, n_classes=2)[0]
    (child,) = pool.idle_child_ids()
    second = pool.predict([data], FEATURES[:7], n_classes=2)[0]
    fresh = SandboxConfiguration(limits=LIMITS).predict([data], FEATURES, n_classes=2)[0]
    assert first.error is None and second.error is None
    assert np.array_equal(first.probabilities, fresh.probabilities)
    assert np.array_equal(second.probabilities, fresh.probabilities[:7])
    assert np.abs(first.probabilities - forest.predict_proba(FEATURES)).max() < 1e-6
    assert pool.idle_child_ids() == [child] and pool.sessions_alive() == 1


def test_a_session_is_closed_after_its_calls_and_after_its_idle_time(pools):
    data, _ = forest_file(0)
    pool = pools(max_calls=2)
    pool.predict([data], FEATURES, n_classes=2)
    (child,) = pool.idle_child_ids()
    pool.predict([data], FEATURES, n_classes=2)
    assert pool.idle_child_ids() == [] and pool.sessions_alive() == 0
    pool.predict([data], FEATURES, n_classes=2)
    assert pool.idle_child_ids() not in ([], [child])
    idle_pool = pools(idle_seconds=0.0)
    idle_pool.predict([data], FEATURES, n_classes=2)
    (idle_child,) = idle_pool.idle_child_ids()
    idle_pool.predict([data], FEATURES, n_classes=2)
    assert idle_pool.idle_child_ids() != [idle_child] and idle_pool.sessions_alive() == 1


def test_the_pool_never_holds_more_sessions_than_its_limit(pools):
    (first, forest), (second, other) = forest_file(0), forest_file(1)
    pool = pools(max_sessions=1)
    pool.predict([first], FEATURES, n_classes=2)
    outcomes = pool.predict([second, first], FEATURES, n_classes=2)
    assert pool.sessions_alive() == 1
    assert np.abs(outcomes[0].probabilities - other.predict_proba(FEATURES)).max() < 1e-6
    assert np.abs(outcomes[1].probabilities - forest.predict_proba(FEATURES)).max() < 1e-6
    no_sessions = pools(max_sessions=0)  # every call in a fresh child, as without the pool
    assert no_sessions.predict([first], FEATURES, n_classes=2)[0].error is None
    assert no_sessions.sessions_alive() == 0


def test_a_refused_model_gets_the_fresh_childs_sentence_and_keeps_no_session(pools):
    pool = pools()
    pickle = b"\x80\x04\x95" + b"\x00" * 40
    outcome = pool.predict([pickle], FEATURES, n_classes=2)[0]
    fresh = SandboxConfiguration(limits=LIMITS).predict([pickle], FEATURES, n_classes=2)[0]
    assert outcome.probabilities is None and outcome.error == fresh.error
    assert "pickle" in outcome.error.lower()
    assert pool.sessions_alive() == 0


def test_a_session_runs_under_the_sandbox_limits_with_a_stripped_environment(pools, monkeypatch):
    monkeypatch.setenv("ONEFOLD_SECRET_FOR_THE_TEST", "do-not-leak")
    data, _ = forest_file(0)
    pool = pools()
    pool.predict([data], FEATURES, n_classes=2)
    (child,) = pool.idle_child_ids()
    limits = Path(f"/proc/{child}/limits").read_text()
    address_space = next(line for line in limits.splitlines() if "address space" in line)
    assert address_space.split()[3:5] == [str(LIMITS.memory_bytes)] * 2
    cpu = next(line for line in limits.splitlines() if "cpu time" in line)
    assert cpu.split()[3:5] == [str(LIMITS.cpu_seconds), str(LIMITS.cpu_seconds + 1)]
    assert b"do-not-leak" not in Path(f"/proc/{child}/environ").read_bytes()


def test_a_session_that_died_is_replaced_and_the_call_still_answers(pools):
    data, forest = forest_file(0)
    pool = pools()
    pool.predict([data], FEATURES, n_classes=2)
    (child,) = pool.idle_child_ids()
    os.kill(child, signal.SIGKILL)
    wait_until(
        lambda: Path(f"/proc/{child}/stat").read_text().split()[2] in "ZX",
        timeout=10,
        message="the killed session to end",
    )
    outcome = pool.predict([data], FEATURES, n_classes=2)[0]
    assert np.abs(outcome.probabilities - forest.predict_proba(FEATURES)).max() < 1e-6
    assert pool.idle_child_ids() not in ([], [child]) and pool.sessions_alive() == 1


def test_a_session_that_stops_answering_is_killed_at_the_wall_clock_limit_and_replaced():
    data, forest = forest_file(0)
    limits = SandboxLimits(memory_bytes=3 * 2**30, cpu_seconds=60, wall_seconds=2)
    pool = SessionPool(configuration=SandboxConfiguration(limits=limits))
    try:
        pool.predict([data], FEATURES, n_classes=2)
        (child,) = pool.idle_child_ids()
        os.kill(child, signal.SIGSTOP)  # a hung model: the child never answers
        outcome = pool.predict([data], FEATURES, n_classes=2)[0]
        assert outcome.probabilities is None
        assert outcome.error == "The model did not finish predicting within 2 seconds."
        assert pool.sessions_alive() == 0
        again = pool.predict([data], FEATURES, n_classes=2)[0]
        assert np.abs(again.probabilities - forest.predict_proba(FEATURES)).max() < 1e-6
        assert pool.idle_child_ids() not in ([], [child])
    finally:
        pool.close()
