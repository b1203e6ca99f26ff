"""Run native loads and predictions of uploaded models in a resource-limited child process.

A validated model can still crash or hang a native library, so the calling process (a Celery
worker) never loads one itself. All models go to one child (``python -m workers.modelio.child``)
with memory, CPU, file-size and open-file limits, a stripped environment, an empty working
directory and a wall-clock timeout. If that child dies, every model it had not finished is
retried in a child of its own, so only the culprit gets the error.

:class:`SandboxConfiguration` is the one configuration of the sandbox: every caller that runs stored or
uploaded models predicts through one (:meth:`SandboxConfiguration.predict`). A deployment builds it once from
its settings (``market.sandbox.sandbox_configuration``); its defaults suit a buyer's or a silo's own machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from workers.modelio.base import ModelLimits

PROJECT_ROOT = Path(__file__).resolve().parents[2]
MEMORY_WORDS = (
    b"memoryerror",
    b"bad_alloc",
    b"bad allocation",
    b"failed to allocate",
    b"can't allocate",
    b"memory allocation",
)  # the last: OpenBLAS, when the limit is hit while numpy loads
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandbox child (a batch of models, or one model on a retry)."""

    memory_bytes: int = (
        4 * 2**30
    )  # address space (RLIMIT_AS); importing torch alone maps about 1.1 GB
    cpu_seconds: int = 120  # RLIMIT_CPU: SIGXCPU at this many CPU seconds, SIGKILL one second later
    wall_seconds: float = 60.0  # wall-clock time before the parent kills the child
    file_size_bytes: int = 512 * 2**20  # largest file the child may write (its results)
    open_files: int = 256  # RLIMIT_NOFILE


@dataclass(frozen=True)
class SandboxOutcome:
    """One model's result: ``(n_examples, n_classes)`` float64 probabilities, or an error sentence; when its ONNX
    twin was asked for (``convert_to_onnx``), the twin's bytes (``onnx``) and the twin's probabilities."""

    probabilities: np.ndarray | None
    error: str | None
    onnx: bytes | None = None


@dataclass(frozen=True)
class SandboxConfiguration:
    """What every run of stored or uploaded models agrees on: the children's resource ``limits``, the caps on a
    model's size and structure (``model_limits``) and the tests-only ``skip_structural_checks``."""

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    model_limits: ModelLimits = field(default_factory=ModelLimits)
    skip_structural_checks: bool = False

    def predict(
        self, models: list[bytes], features: np.ndarray, *, n_classes: int
    ) -> list[SandboxOutcome]:
        """:func:`predict_in_sandbox` under this configuration: one outcome per model, in order."""
        return predict_in_sandbox(
            models,
            features,
            n_classes=n_classes,
            limits=self.limits,
            skip_structural_checks=self.skip_structural_checks,
            model_limits=self.model_limits,
        )

    def convert_to_onnx(
        self, models: list[bytes], features: np.ndarray, *, n_classes: int
    ) -> list[SandboxOutcome]:
        """Each model's ONNX twin, checked on ``features`` against the model's own probabilities
        (:func:`predict_in_sandbox` with ``convert_to_onnx``): one outcome per model, in order."""
        return predict_in_sandbox(
            models,
            features,
            n_classes=n_classes,
            limits=self.limits,
            skip_structural_checks=self.skip_structural_checks,
            model_limits=self.model_limits,
            convert_to_onnx=True,
        )


def predict_in_sandbox(
    models: list[bytes],
    features: np.ndarray,
    *,
    n_classes: int,
    limits: SandboxLimits,
    skip_structural_checks: bool = False,
    model_limits: ModelLimits | None = None,
    convert_to_onnx: bool = False,
) -> list[SandboxOutcome]:
    """Class probabilities of each model on ``features``, computed in a sandboxed child process.

    Parameters
    ----------
    models
        Model file bytes, in any accepted format.
    features
        ``(n_examples, n_features)`` matrix; sent to the child as float32.
    n_classes
        The federation's number of classes; output columns are classes 0..n_classes-1.
    limits
        Resource limits of each child.
    skip_structural_checks
        For tests only: skip ``inspect_model`` in the child (pickles are still refused).
    model_limits
        Caps for the child's ``inspect_model``; defaults to ``ModelLimits()``.
    convert_to_onnx
        Also write each model as ONNX (an ONNX model is its own): an XGBoost or safetensors model is converted
        and its twin must predict the model's own probabilities on ``features`` within
        ``workers.modelio.child.CONVERSION_TOLERANCE``; the outcome then holds the twin and its probabilities.

    Returns
    -------
    list[SandboxOutcome]
        One per model, in order. The caller survives whatever the models do.
    """
    features = np.ascontiguousarray(features, dtype=np.float32)
    request = {
        "n_classes": n_classes,
        "skip_structural_checks": skip_structural_checks,
        "model_limits": asdict(model_limits or ModelLimits()),
        "convert_to_onnx": convert_to_onnx,
    }
    outcomes: dict[int, SandboxOutcome] = {}
    pending = list(range(len(models)))
    while pending:
        batch = pending
        death = _run_child(models, batch, features, request, limits, outcomes)
        unfinished = [index for index in batch if index not in outcomes]
        if not unfinished:
            break
        # The child writes results in order, so the first unfinished model was running when it died.
        # Rerun it alone: the error is its own only if it also fails in a child of its own.
        suspect, pending = unfinished[0], unfinished[1:]
        if len(batch) > 1:
            death = _run_child(models, [suspect], features, request, limits, outcomes)
        if suspect not in outcomes:
            outcomes[suspect] = SandboxOutcome(None, death)
    return [outcomes[index] for index in range(len(models))]


def _run_child(models, indices, features, request, limits: SandboxLimits, outcomes: dict) -> str:
    """Run one child over ``indices``; record finished models in ``outcomes``; say why it died, if it did."""
    exchange = Path(tempfile.mkdtemp(prefix="onefold-sandbox-"))
    try:
        for index in indices:
            (exchange / f"model_{index}.bin").write_bytes(models[index])
        np.save(exchange / "features.npy", features, allow_pickle=False)
        (exchange / "request.json").write_text(
            json.dumps({**request, "indices": indices, "sandbox_limits": asdict(limits)})
        )
        home = exchange / "home"
        home.mkdir()
        returncode, timed_out = _spawn(exchange, home, limits)
        for index in indices:
            outcome = _read_result(
                exchange, index, len(features), request["n_classes"], request["convert_to_onnx"]
            )
            if outcome is not None:
                outcomes[index] = outcome
        return death_reason(returncode, timed_out, limits, exchange)
    finally:
        shutil.rmtree(exchange, ignore_errors=True)


def child_environment(home: Path) -> dict[str, str]:
    """The child's whole environment: no inherited variables (so no secrets), one thread per library."""
    inherited = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    python_path = os.pathsep.join([str(PROJECT_ROOT), *inherited])
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": python_path,
        "HOME": str(home),
        "TMPDIR": str(home),
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
        **{name: "1" for name in THREAD_VARIABLES},
    }


def _spawn(exchange: Path, home: Path, limits: SandboxLimits) -> tuple[int, bool]:
    environment = child_environment(home)
    with open(exchange / "child.log", "wb") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "workers.modelio.child", str(exchange)],
            cwd=home,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            close_fds=True,
            start_new_session=True,
        )
        try:
            return child.wait(timeout=limits.wall_seconds), False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it may have ended on its own meanwhile
                os.killpg(
                    child.pid, signal.SIGKILL
                )  # the child's own session: nothing else is in it
            return child.wait(), True


def _read_result(
    exchange: Path, index: int, n_examples: int, n_classes: int, converted: bool
) -> SandboxOutcome | None:
    status_path = exchange / f"result_{index}.json"
    if not status_path.exists():
        return None
    try:
        status = json.loads(status_path.read_text())
        if status.get("error"):
            return SandboxOutcome(None, str(status["error"])[:1000])
        probabilities = np.load(exchange / f"probabilities_{index}.npy", allow_pickle=False)
        onnx = (exchange / f"converted_{index}.onnx").read_bytes() if converted else None
    except (ValueError, OSError):
        return SandboxOutcome(
            None, "The predictor's result could not be read; the model is malformed."
        )
    if probabilities.dtype != np.float64 or probabilities.shape != (n_examples, n_classes):
        return SandboxOutcome(
            None, "The predictor returned results of the wrong shape; the model is malformed."
        )
    return SandboxOutcome(probabilities, None, onnx)


def death_reason(returncode: int, timed_out: bool, limits: SandboxLimits, exchange: Path) -> str:
    if timed_out:
        return f"The model did not finish predicting within {limits.wall_seconds:g} seconds."
    if returncode == -signal.SIGXCPU:
        return f"The model needed more than {limits.cpu_seconds} seconds of CPU time."
    if returncode == -signal.SIGKILL:
        return (
            f"The predictor was killed: the model needed more than {limits.cpu_seconds} seconds of CPU time "
            f"or more than {limits.memory_bytes // 2**20} MB of memory."
        )
    if returncode < 0:
        name = (
            signal.Signals(-returncode).name
            if -returncode in signal.valid_signals()
            else str(-returncode)
        )
        if name == "SIGABRT" and _log_mentions_memory(exchange):
            return f"The model needed more than {limits.memory_bytes // 2**20} MB of memory."
        return f"The model crashed the predictor (signal {name}); it is malformed."
    if _log_mentions_memory(exchange):
        return f"The model needed more than {limits.memory_bytes // 2**20} MB of memory."
    return f"The predictor stopped unexpectedly (exit status {returncode}); the model is malformed."


def _log_mentions_memory(exchange: Path) -> bool:
    try:
        tail = (exchange / "child.log").read_bytes()[-4000:].lower()
    except OSError:
        return False
    return any(word in tail for word in MEMORY_WORDS)
