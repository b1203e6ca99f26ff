"""Wall time and peak memory per stage of an algorithm run.

Peak memory is the process's resident-set high-water mark from ``resource.getrusage``
(``ru_maxrss``, KiB on Linux), read at the end of each stage: ``peak_rss_mib`` is the highest
RSS the process has had up to then, ``rss_growth_mib`` how much that high-water mark rose during
the stage (0 when the stage stayed below an earlier peak). It is measured in the process that
runs the stage, so party stages run in worker processes report the worker's peak. tracemalloc
is not used: it slows torch and misses memory allocated outside Python's allocator.
"""

from __future__ import annotations

import resource
import time
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class StageStats:
    """One stage's cost: ``wall_seconds`` (s), ``peak_rss_mib`` and ``rss_growth_mib`` (MiB)."""

    wall_seconds: float
    peak_rss_mib: float
    rss_growth_mib: float

    def as_dict(self) -> dict:
        return {
            "wall_seconds": self.wall_seconds,
            "peak_rss_mib": self.peak_rss_mib,
            "rss_growth_mib": self.rss_growth_mib,
        }


def _max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class StageClock:
    """Collects :class:`StageStats` by stage name; a repeated name accumulates wall time."""

    def __init__(self) -> None:
        self.stages: dict[str, StageStats] = {}

    @contextmanager
    def stage(self, name: str):
        rss_before, started = _max_rss_mib(), time.perf_counter()
        try:
            yield
        finally:
            wall, rss_after = time.perf_counter() - started, _max_rss_mib()
            earlier = self.stages.get(name, StageStats(0.0, 0.0, 0.0))
            self.stages[name] = StageStats(
                earlier.wall_seconds + wall,
                max(earlier.peak_rss_mib, rss_after),
                earlier.rss_growth_mib + rss_after - rss_before,
            )


def merge_stages(per_process: list[dict[str, StageStats]]) -> dict[str, StageStats]:
    """Combine stage costs of processes that ran side by side: wall time and growth are summed
    (CPU-seconds of work, not elapsed time), the peak is the largest single-process peak."""
    merged: dict[str, StageStats] = {}
    for stages in per_process:
        for name, stats in stages.items():
            earlier = merged.get(name, StageStats(0.0, 0.0, 0.0))
            merged[name] = StageStats(
                earlier.wall_seconds + stats.wall_seconds,
                max(earlier.peak_rss_mib, stats.peak_rss_mib),
                earlier.rss_growth_mib + stats.rss_growth_mib,
            )
    return merged
