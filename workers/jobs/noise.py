"""DP noise that is drawn once per job and replayed on retry.

Noisy answers are spent privacy: a job retried after a crash must not draw fresh noise for the same
queries (that would spend the budget twice and average the noise away). :func:`replayable_noise` wraps a
mechanism of ``workers.privacy.mechanisms`` so that ``noisy_counts`` returns the stored answers when there
are some, and otherwise draws fresh (unseeded) noise and hands it to ``on_draw`` to be stored *before* it is
used. The wrapper is a subclass of the mechanism, so the accountant still recognises it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np


def replayable_noise(
    mechanism, *, stored: np.ndarray | None, on_draw: Callable[[np.ndarray], None]
):
    """``mechanism`` whose ``noisy_counts`` replays ``stored`` (same shape as the counts) or records a fresh draw."""

    class Replayable(type(mechanism)):  # type: ignore[misc]  # a subclass of whichever mechanism was given
        def noisy_counts(self, vote_counts):
            counts = np.asarray(vote_counts)
            if stored is not None:
                if stored.shape != counts.shape:
                    raise ValueError(
                        f"The stored noisy answers have shape {stored.shape}, but the job now asks "
                        f"{counts.shape}; its inputs changed since the noise was drawn."
                    )
                return stored.copy()
            noisy = super().noisy_counts(counts)
            on_draw(noisy)
            return noisy

    Replayable.__name__ = Replayable.__qualname__ = f"Replayable{type(mechanism).__name__}"
    return Replayable(
        **{field.name: getattr(mechanism, field.name) for field in dataclasses.fields(mechanism)}
    )
