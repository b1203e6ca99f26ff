"""The suite's one way to wait (tests/conftest.py): a quiet machine's ceiling, scaled by ONEFOLD_TEST_TIME_SCALE and
the load, that fails only when nothing progresses for that long."""

import itertools
import os

import pytest

from tests.conftest import TIME_SCALE_VARIABLE, scaled_timeout, time_scale, wait_until


def test_the_scale_is_the_variable_times_the_load_per_core_above_one(monkeypatch):
    monkeypatch.setenv(TIME_SCALE_VARIABLE, "3")
    load_per_core = os.getloadavg()[0] / len(os.sched_getaffinity(0))
    assert time_scale() == pytest.approx(3 * max(1.0, load_per_core), rel=0.5)
    assert time_scale() >= 3 and scaled_timeout(10) >= 30


@pytest.mark.parametrize("given", ["0.5", "fast", "inf", "nan"])
def test_a_scale_below_one_or_not_a_number_is_refused_with_a_sentence(monkeypatch, given):
    monkeypatch.setenv(TIME_SCALE_VARIABLE, given)
    with pytest.raises(ValueError, match=f"must be a number of at least 1, not '{given}'"):
        time_scale()


def test_a_wait_that_progresses_outlasts_its_timeout():
    polls = itertools.count()
    # each poll is a step of progress: the 10 ms ceiling restarts, so the 20 polls (about 1 s) all run
    wait_until(
        lambda: next(polls) >= 20,
        timeout=0.01,
        interval=0.05,
        message="gave up while progressing",
        progress=object,  # a new object on every call: always new progress
    )


def test_a_wait_without_progress_fails_with_its_message():
    with pytest.raises(AssertionError, match=r"^nothing happened \(no progress for \d+ s"):
        wait_until(lambda: False, timeout=0.01, interval=0.01, message="nothing happened")
