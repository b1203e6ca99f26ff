"""A bounded pool of warm sandbox sessions, so that a buyer's prediction does not start, import and validate a
fresh sandbox child per call.

A *session* is one child (``python -m workers.modelio.session_child``) holding one model: it runs under the same
resource limits, stripped environment and empty home folder as a one-shot child (:mod:`workers.modelio.sandbox`),
checks its model once, loads it once and then predicts request after request. Sessions are isolated from each
other as one-shot children are (one model per process); the rows of one call are gone from the child's folder when
the next call's are written.

What the pool bounds:

- at most ``max_sessions`` children alive at once, over every model; a call that finds every session busy, or
  would need one more, runs in a one-shot child instead (:func:`~workers.modelio.sandbox.predict_in_sandbox`);
  an idle session of another model is closed to make room;
- a session is closed after ``max_calls`` calls, after ``idle_seconds`` without one, or once it has used half of
  the CPU limit (``RLIMIT_CPU`` counts over the process's life, so each call keeps at least half of it);
- each call's wall-clock time: a session that does not answer within ``limits.wall_seconds`` is killed and the
  call gets the same sentence a one-shot child's death gets.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from workers.modelio.sandbox import (
    SandboxConfiguration,
    SandboxOutcome,
    child_environment,
    death_reason,
)


@dataclass(frozen=True)
class SessionPoolLimits:
    """How many warm sessions live at once and how long each is kept."""

    max_sessions: int = 4
    max_calls: int = 1000
    idle_seconds: float = 300.0


class Session:
    """One warm child holding one model (use through :class:`SessionPool`)."""

    def __init__(self, data: bytes, *, n_features: int, n_classes: int, configuration):
        self.configuration: SandboxConfiguration = configuration
        self.n_classes = n_classes
        self.calls = 0
        self.cpu_seconds = 0.0
        self.last_used = time.monotonic()
        self.exchange = Path(tempfile.mkdtemp(prefix="onefold-session-"))
        home = self.exchange / "home"
        home.mkdir()
        (self.exchange / "model.bin").write_bytes(data)
        (self.exchange / "request.json").write_text(
            json.dumps(
                {
                    "n_classes": n_classes,
                    "n_features": n_features,
                    "skip_structural_checks": configuration.skip_structural_checks,
                    "model_limits": asdict(configuration.model_limits),
                    "sandbox_limits": asdict(configuration.limits),
                }
            )
        )
        with open(self.exchange / "child.log", "wb") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [sys.executable, "-m", "workers.modelio.session_child", str(self.exchange)],
                cwd=home,
                env=child_environment(home),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                close_fds=True,
                start_new_session=True,
            )
        self.load_error: str | None = None
        answer, failure = self._answer()
        self.load_error = failure or (answer or {}).get("error")

    def predict(self, features: np.ndarray) -> SandboxOutcome:
        """The model's probabilities of ``features``, or the error sentence (the session is then closed)."""
        self.calls += 1
        self.last_used = time.monotonic()
        name = f"features_{self.calls}.npy"
        np.save(self.exchange / name, np.ascontiguousarray(features, dtype=np.float32))
        try:
            self._pipe(self.process.stdin).write(name.encode() + b"\n")
            self._pipe(self.process.stdin).flush()
        except OSError:
            return SandboxOutcome(None, self._death(timed_out=False))
        answer, failure = self._answer()
        (self.exchange / name).unlink(missing_ok=True)
        if failure or answer is None:
            return SandboxOutcome(None, failure or "The predictor gave no answer.")
        if answer.get("error"):
            return SandboxOutcome(None, str(answer["error"])[:1000])
        return self._probabilities(len(features))

    def _probabilities(self, n_rows: int) -> SandboxOutcome:
        try:
            probabilities = np.load(self.exchange / "probabilities.npy", allow_pickle=False)
        except (ValueError, OSError):
            return SandboxOutcome(
                None, "The predictor's result could not be read; the model is malformed."
            )
        if probabilities.dtype != np.float64 or probabilities.shape != (n_rows, self.n_classes):
            return SandboxOutcome(
                None, "The predictor returned results of the wrong shape; the model is malformed."
            )
        return SandboxOutcome(probabilities, None)

    def _answer(self) -> tuple[dict | None, str | None]:
        """The child's next JSON line, or ``None`` and the sentence of why it died or was killed."""
        stdout = self._pipe(self.process.stdout)
        deadline = time.monotonic() + self.configuration.limits.wall_seconds
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([stdout], [], [], max(remaining, 0))
            if not ready:
                return None, self._death(timed_out=True)
            chunk = os.read(stdout.fileno(), 65536)
            if not chunk:
                return None, self._death(timed_out=False)
            line += chunk
        try:
            answer = json.loads(line)
        except ValueError:
            return None, self._death(timed_out=False)
        self.cpu_seconds = float(answer.get("cpu_seconds", 0.0))
        return answer, None

    @staticmethod
    def _pipe(pipe: IO[bytes] | None) -> IO[bytes]:
        """A pipe the session opened (``Popen`` types its pipes as optional)."""
        if pipe is None:
            raise OSError("The predictor session has no pipe to its child.")
        return pipe

    def _death(self, *, timed_out: bool) -> str:
        if timed_out:
            self._kill()
        returncode = self.process.wait()
        return death_reason(returncode, timed_out, self.configuration.limits, self.exchange)

    def _kill(self) -> None:
        with contextlib.suppress(
            ProcessLookupError
        ):  # the child's own session: nothing else is in it
            os.killpg(self.process.pid, signal.SIGKILL)

    @property
    def usable(self) -> bool:
        """Still alive and within its CPU allowance (at most half the limit used)."""
        return (
            self.load_error is None
            and self.process.poll() is None
            and self.cpu_seconds <= self.configuration.limits.cpu_seconds / 2
        )

    def close(self) -> None:
        """End the child and remove its folder."""
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            if self.process.stdout is not None:
                self.process.stdout.close()
        shutil.rmtree(self.exchange, ignore_errors=True)


@dataclass
class SessionPool:
    """Warm sessions by model, bounded by ``pool_limits``; :meth:`predict` has the signature of
    :meth:`SandboxConfiguration.predict` and gives the same outcomes."""

    configuration: SandboxConfiguration = field(default_factory=SandboxConfiguration)
    pool_limits: SessionPoolLimits = field(default_factory=SessionPoolLimits)
    _idle: dict[tuple, list[Session]] = field(default_factory=dict, init=False)
    _alive: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _closed: bool = field(default=False, init=False)

    def predict(
        self, models: list[bytes], features: np.ndarray, *, n_classes: int
    ) -> list[SandboxOutcome]:
        """One outcome per model, in order: each model predicted by a warm session of it."""
        return [self._predict_one(data, features, n_classes=n_classes) for data in models]

    def _predict_one(self, data: bytes, features: np.ndarray, *, n_classes: int) -> SandboxOutcome:
        key = (hashlib.sha256(data).hexdigest(), n_classes, features.shape[1])
        session = self._acquire(key, data, n_features=features.shape[1], n_classes=n_classes)
        if session is None:  # every session is busy: a one-shot child, as before the pool
            return self.configuration.predict([data], features, n_classes=n_classes)[0]
        if session.load_error:
            self._retire(session)
            return SandboxOutcome(None, session.load_error)
        outcome = session.predict(features)
        self._release(key, session)
        return outcome

    def _acquire(self, key: tuple, data: bytes, *, n_features: int, n_classes: int):
        with self._lock:
            self._close_stale()
            idle = self._idle.get(key, [])
            while idle:
                session = idle.pop()
                if session.usable:
                    return session
                self._close(session)
            if self._alive >= self.pool_limits.max_sessions and not self._evict_one():
                return None
            self._alive += 1
        try:
            return Session(
                data, n_features=n_features, n_classes=n_classes, configuration=self.configuration
            )
        except BaseException:
            with self._lock:
                self._alive -= 1
            raise

    def _release(self, key: tuple, session: Session) -> None:
        with self._lock:
            if not self._closed and session.usable and session.calls < self.pool_limits.max_calls:
                self._idle.setdefault(key, []).append(session)
            else:
                self._close(session)

    def _retire(self, session: Session) -> None:
        with self._lock:
            self._close(session)

    def _close(self, session: Session) -> None:
        """Close a session that is in no idle list (the lock is held)."""
        session.close()
        self._alive -= 1

    def _evict_one(self) -> bool:
        """Close the least recently used idle session of any model; False if none is idle."""
        idle = [
            (session.last_used, key) for key, sessions in self._idle.items() for session in sessions
        ]
        if not idle:
            return False
        _, key = min(idle)
        sessions = self._idle[key]
        oldest = min(sessions, key=lambda session: session.last_used)
        sessions.remove(oldest)
        self._close(oldest)
        return True

    def _close_stale(self) -> None:
        now = time.monotonic()
        for sessions in self._idle.values():
            for session in [
                s for s in sessions if now - s.last_used > self.pool_limits.idle_seconds
            ]:
                sessions.remove(session)
                self._close(session)

    def sessions_alive(self) -> int:
        """How many session children the pool holds now (busy or idle)."""
        with self._lock:
            return self._alive

    def idle_child_ids(self) -> list[int]:
        """Process ids of the idle sessions' children, oldest call first."""
        with self._lock:
            idle = [session for sessions in self._idle.values() for session in sessions]
            return [session.process.pid for session in sorted(idle, key=lambda s: s.last_used)]

    def close(self) -> None:
        """Close every idle session; busy ones close when they are released, and so does any session a later call
        opens (the pool keeps none)."""
        with self._lock:
            self._closed = True
            for sessions in self._idle.values():
                while sessions:
                    self._close(sessions.pop())
