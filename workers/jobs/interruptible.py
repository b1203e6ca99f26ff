"""Fuse a job in a child process that its worker can stop: a fit of a large final model runs for minutes in
native code, which no flag or exception reaches, so a cancelled job would keep its worker (its heartbeats keep
the lease) until the fit ended. The parent polls ``cancelled`` every ``poll_seconds`` and kills the child.

The child is started by a fork server that has imported the engines once (so a fusion does not pay torch's
import again) and holds no database connection, thread or lock of the worker. Arguments and the
:class:`~workers.algorithms.registry.Fusion` travel over a ``multiprocessing`` pipe, which pickles them: both
ends are this code in one worker, the objects are our own (the members' declared metadata, the public
features, the fitted global model) and nothing is stored or read from outside.

L1 noise is drawn in the child through :func:`workers.jobs.noise.replayable_noise`; the fresh draw is sent to
the parent, which stores it (``on_noise_drawn``) and answers before the child uses it, as in one process.

The child runs its BLAS and OpenMP pools single-threaded (:data:`FUSION_NATIVE_THREADS`, through threadpoolctl):
an ``auto`` job fits dozens of small logistic regressions (the stacked candidate's aggregators), whose matrices
are too small for threads to pay for their start and synchronisation (one such fit ran 4.0–5.7× faster on one
thread, issue 42), and each worker already runs one fusion per job beside the others. The limit reaches the
libraries loaded when the fusion starts (numpy's and scipy's OpenBLAS, scikit-learn's OpenMP); torch keeps its
own thread setting.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
from threadpoolctl import threadpool_limits

#: The threads of each BLAS and OpenMP pool in a fusion child (module docstring).
FUSION_NATIVE_THREADS = 1
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["workers.algorithms"])


class FusionCrashed(RuntimeError):
    """The child died or failed with something other than a ValueError (a bug, memory)."""


@contextmanager
def _children_allowed() -> Iterator[None]:
    """Let a Celery prefork process start the child. Its pool (billiard) marks it daemonic, which
    ``multiprocessing`` reads as "may start no child" so that none outlives it (here the child is killed and
    joined before :func:`fuse_in_child` returns, and exits by itself if its parents die), and gives it an
    authentication key of billiard's type, which ``multiprocessing`` refuses to send to the child."""
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]  # noqa: SLF001 - neither has a public setter
    saved = dict(config)
    config.pop("daemon", None)
    config["authkey"] = multiprocessing.process.AuthenticationString(  # type: ignore[attr-defined]
        bytes(saved["authkey"])
    )
    try:
        yield
    finally:
        config.clear()
        config.update(saved)


def fuse_in_child(
    *,
    kind: str,
    signal_sum: np.ndarray,
    public_features: np.ndarray,
    members: list,
    n_classes: int,
    params: dict,
    seed: int,
    noise=None,
    stored_noise: np.ndarray | None = None,
    on_noise_drawn: Callable[[np.ndarray], None] | None = None,
    cancelled: Callable[[], bool],
    on_start: Callable[[int], None] = lambda pid: None,
    poll_seconds: float = 1.0,
    evaluation=None,
):
    """``algorithm_get(kind).fuse(...)`` in a child process; ``None`` if ``cancelled()`` turned true first.

    ``noise`` is a plain mechanism of :mod:`workers.privacy.mechanisms` (or ``None``); ``stored_noise`` the
    answers drawn by an earlier attempt; ``evaluation`` (an :class:`workers.algorithms.auto_fusion.EvaluationRows`
    or ``None``) is passed to an engine that reads the evaluation split. A ValueError of the engine is raised here as a ValueError with its
    sentence; any other failure of the child as :class:`FusionCrashed`. The child is gone when this returns.
    """
    parent_end, child_end = _CONTEXT.Pipe()
    with _children_allowed():  # the child copies its parent's settings when it is made
        child = _CONTEXT.Process(
            target=_child_main,
            name=f"onefold-fuse-{kind}",
            daemon=True,
            args=(
                child_end,
                kind,
                signal_sum,
                public_features,
                members,
                n_classes,
                params,
                seed,
                noise,
                stored_noise,
                evaluation,
            ),
        )
        child.start()
    child_end.close()
    on_start(int(child.pid or 0))  # set by start()
    try:
        while True:
            if parent_end.poll(poll_seconds):
                try:
                    message, value = parent_end.recv()
                except EOFError:  # the child died between messages
                    child.join(5)
                    raise FusionCrashed(
                        f"The fusion process stopped unexpectedly (exit code {child.exitcode})."
                    ) from None
                if message == "noise":
                    if on_noise_drawn is not None:
                        on_noise_drawn(value)
                    parent_end.send("stored")
                elif message == "fusion":
                    parent_end.send("received")
                    return value
                elif message == "invalid":
                    raise ValueError(value)
                else:
                    raise FusionCrashed(value)
            elif not child.is_alive():
                raise FusionCrashed(
                    f"The fusion process stopped unexpectedly (exit code {child.exitcode})."
                )
            if cancelled():
                return None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        parent_end.close()


def _child_main(
    connection,
    kind,
    signal_sum,
    public_features,
    members,
    n_classes,
    params,
    seed,
    noise,
    stored_noise,
    evaluation=None,
) -> None:
    from workers.algorithms.registry import algorithm_get
    from workers.jobs.noise import replayable_noise

    threading.Thread(target=_exit_with_parents, args=(os.getppid(),), daemon=True).start()

    def stored_by_parent(noisy: np.ndarray) -> None:
        connection.send(("noise", noisy))
        connection.recv()  # the parent answers once the draw is committed: only then may it be used

    mechanism = (
        None
        if noise is None
        else replayable_noise(noise, stored=stored_noise, on_draw=stored_by_parent)
    )
    try:
        evaluated = (
            {} if evaluation is None else {"evaluation": evaluation}
        )  # only the engines that read it
        with threadpool_limits(limits=FUSION_NATIVE_THREADS):
            fusion = algorithm_get(kind).fuse(
                signal_sum,
                public_features,
                members=members,
                n_classes=n_classes,
                params=params,
                noise=mechanism,
                seed=seed,
                **evaluated,
            )
    except ValueError as error:
        connection.send(("invalid", str(error)))
    except Exception as error:  # noqa: BLE001 - reported to the parent, which fails the job with it
        traceback.print_exc()  # to the worker's log, for whoever investigates the failed job
        connection.send(("crashed", f"{type(error).__name__}: {error}"))
    else:
        connection.send(("fusion", fusion))
        # torch sends a network's tensors as file descriptors that this process serves until the parent has them
        connection.recv()
    finally:
        connection.close()


def _exit_with_parents(parent_pid: int) -> None:
    """End this process once its fork server is gone (the worker died: a SIGKILL runs no ``finally``)."""
    while os.getppid() == parent_pid:
        time.sleep(1)
    os._exit(1)
