"""Which local models join an ensemble: the selection strategies of Guha, Talwalkar, Smith,
*One-Shot Federated Learning* (2019), section 3 "Ensembling".

Every strategy looks at declared metadata only (:class:`~workers.algorithms.registry.Member`),
never at data, so the selection can run before any prediction and costs no privacy.

- ``all``: every member.
- ``cross_validation`` (Guha's "CV selection"): only members whose declared local validation
  score (ROC AUC or accuracy, on the silo's own validation split) is at least ``threshold``, a
  value fixed in advance; then the ``k`` best scores.
- ``data`` (Guha's "data selection"): only members trained on at least ``threshold`` examples;
  then the ``k`` largest.
- ``random``: ``k`` members drawn uniformly without replacement with ``seed``.

Ties in a top-``k`` go to the member listed first (a stable sort), so the same members in the
same order always give the same selection. ``k`` larger than the pool keeps the whole pool;
``k=None`` means no top-``k`` cut. The result is sorted by position in the input list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from workers.algorithms.registry import Member
from workers.algorithms.schema import finite_number

STRATEGIES = ("all", "cross_validation", "data", "random")


def selection_parameters(params: Mapping) -> dict:
    """The validated selection keys of a job's parameters, with defaults.

    Returns ``{"strategy": str, "k": int | None, "threshold": float | None}``; a ValueError with
    a sentence naming the key otherwise.
    """
    strategy = params.get("strategy", "all")
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise ValueError(
            f"The selection strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}."
        )
    k = params.get("k")
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
        raise ValueError(
            f"k (how many members to keep) must be a positive integer or null, not {k!r}."
        )
    threshold = params.get("threshold")
    if threshold is not None:
        if strategy not in ("cross_validation", "data"):
            raise ValueError(
                f"A threshold applies to the cross_validation and data strategies, not {strategy!r}."
            )
        if not finite_number(threshold):
            raise ValueError(f"The threshold must be a finite number, not {threshold!r}.")
        threshold = float(threshold)
    return {"strategy": strategy, "k": None if k is None else int(k), "threshold": threshold}


def select_members(
    members: Sequence[Member],
    *,
    strategy: str = "all",
    k: int | None = None,
    threshold: float | None = None,
    seed: int = 0,
) -> list[int]:
    """Indices (ascending) of the members a strategy keeps.

    Parameters
    ----------
    members : sequence of Member
    strategy : {"all", "cross_validation", "data", "random"}
    k : int or None
        Top-k after the threshold (``cross_validation``, ``data``) or sample size (``random``).
    threshold : float or None
        Minimum validation score (``cross_validation``) or number of examples (``data``).
    seed : int
        Seeds ``random`` only.

    Raises
    ------
    ValueError
        If no member passes, with the threshold that excluded them.
    """
    chosen = selection_parameters({"strategy": strategy, "k": k, "threshold": threshold})
    positions = np.arange(len(members))
    if strategy == "random":
        size = len(members) if k is None else min(k, len(members))
        picked = np.random.default_rng(seed).choice(len(members), size=size, replace=False)
        return sorted(int(index) for index in picked)
    if strategy in ("cross_validation", "data"):
        key = np.array(
            [
                m.validation_score if strategy == "cross_validation" else m.n_examples
                for m in members
            ],
            dtype=float,
        )
        if chosen["threshold"] is not None:
            positions = positions[key[positions] >= chosen["threshold"]]
        if k is not None:
            order = np.argsort(-key[positions], kind="stable")  # stable: ties keep input order
            positions = positions[order[:k]]
    if len(positions) == 0:
        raise ValueError(_nobody_passes(strategy, threshold, len(members)))
    return sorted(int(index) for index in positions)


def _nobody_passes(strategy: str, threshold, n_members: int) -> str:
    if n_members == 0:
        return "There are no members to select from."
    what = "validation score" if strategy == "cross_validation" else "number of local examples"
    return f"No member has a {what} of at least {threshold:g}; lower the threshold or choose another strategy."
