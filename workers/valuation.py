"""What each silo's data is worth to a global model: Shapley values of the fusion's own vote (issue 28).

The game: the players are the silos (a silo's members are all the submissions its organisation uploaded); a
coalition S is worth ``v(S)``, the balanced accuracy (and, beside it, the accuracy) of the job's own combination
rule restricted to S's members, on evaluation rows the fit did not read. The members' class probabilities on those
rows are already computed for the baselines, so a coalition is a re-count over them, never a re-train:

- ``vote`` (FedKT's hard votes): each member casts one vote for its arg-max class; the coalition predicts the class
  with the most votes;
- ``average`` (ensemble, distillation, stack, FedKT's soft vote): the coalition predicts the arg-max of its members'
  summed probabilities;
- ``cohort`` (cohort distillation, CPFL section 3.1, :mod:`workers.algorithms.cohort_fusion`): the coalition's
  teacher is its members' log-probabilities averaged per class with weights their declared counts of that class
  (a class no member of the coalition holds scores lowest); the coalition predicts its arg-max.

Ties are scored as the job's tie rule plays them (:mod:`workers.algorithms.voting`: a uniform draw among the tied
classes) but in expectation, so values are deterministic: a row where the true class is one of ``t`` tied classes
counts ``1/t`` correct. The empty coalition ties every class: it is the uniform random guess (``1/K`` of either
measure), which makes the values add up to ``v(all) − 1/K`` (efficiency).

Copies (:func:`duplicate_groups`): the Shapley value is not robust to replication (a second copy of a model adds a
second vote, and the pair earns more than the original alone). Silos whose predictions on the valued rows are
identical or nearly so (mean absolute difference of their members' mean probabilities at most
:data:`DUPLICATE_TOLERANCE`; honest silos fitting the same learner on different rows of Adult differ by 0.06 or
more) are one player: the game is played with one of them, and that player's value is split equally among the
group, so a silo that uploads a copy of another's model takes half the original's value and the pair earns exactly
what the original earns alone. A copy perturbed beyond the tolerance is not caught (docs/results/valuation.md).

Estimators (:func:`contribution_values`):

- up to :data:`EXACT_MAX_SILOS` players, the exact Shapley value over all ``2^n`` coalitions (4,096 at 12, each a
  matrix product over the rows);
- beyond, stratified antithetic permutation sampling (:func:`permutation_shapley`): permutation sampling (Castro,
  Gómez, Tejada 2009) whose random orders come in blocks of ``2n``: a random order, its ``n`` cyclic shifts and their
  reverses, so that every silo joins at every position exactly twice per block (stratification by position,
  Castro et al. 2017; antithetic reversal, Mitchell et al. 2022, "Sampling permutations for Shapley value
  estimation"). Each order's marginal contributions are read off one cumulative sum; the value is their mean and
  its standard error the standard deviation of the blocks' means over ``√blocks``. On Adult at 12 silos of
  unequal size and 480 orders, plain sampling ranks the silos as the exact values do with Spearman 0.84-0.91, the
  stratified antithetic design 0.97-1.0 (docs/results/valuation.md). No truncation (it would bias the values
  towards zero for the price of skipping part of a cumulative sum).
- how a coalition is scored: under ``vote`` and ``average`` a coalition's class scores are its silos' sums, so each
  silo's *margins* (its score of the row's true class minus its score of each other class,
  :func:`true_class_margins`) are computed once and a coalition is correct on a row when its summed margins are
  all positive (tied at zero: ``1/t``). An order's growing coalitions are then one cumulative sum of its silos'
  margins, ``K − 1`` numbers per row (one for two classes), with no matrix product or arg-max per coalition; a
  vote's margins are whole numbers, held as int16, and the rows are sorted by class so that a class's correct
  rows are one segment sum. Inside a 50-silo Adult job this values the silos in about 0.5 s where re-counting each
  coalition's class scores took 13-18 s, with the same values (docs/results/valuation.md). ``cohort`` divides by
  the coalition's class counts, which is not a sum: it re-counts each coalition's class scores.
- leave-one-out beside either: ``v(all) − v(all without the silo)``.

Why hand-written: none of pydvl, opendataval or the ``shapley`` package is in the project's environment, and none
fits without a wrapper larger than the formulas. pyDVL (LGPL-3.0) and opendataval value training *points* through a
model's retraining (its ``Utility`` wraps a model and a dataset; the utility here is a re-count of stored
predictions, which would have to be disguised as a model); ``shapley`` (Rozemberczki and Sarkar 2021) values
*binary* classifiers in weighted voting games with a 0/1 outcome per row, not a multi-class vote or average scored
by balanced accuracy with ties in expectation. None merges copies or stratifies its orders by position. The
estimators below are the textbook formulas in about a hundred lines, tested against a brute-force computation
(tests/workers/test_valuation.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from math import factorial

import numpy as np

#: Largest number of silos valued exactly (2^12 = 4,096 coalitions); beyond, permutation sampling.
EXACT_MAX_SILOS = 12
#: Random orders drawn by permutation sampling, rounded up to whole blocks of ``2n`` and at least two blocks (its
#: standard error is stored with the values).
PERMUTATIONS = 500
#: Silos whose members' mean probabilities differ by at most this much on average over the valued rows are copies.
DUPLICATE_TOLERANCE = 0.01
#: The combination rules a coalition is re-counted with.
RULES = ("vote", "average", "cohort")
MEASURES = ("balanced_accuracy", "accuracy")
_BATCH = 64  # coalitions per matrix product
_CELLS = 250_000  # margins held at once by order_values (at most 2 MB: they stay in the cache)
#: Class scores this close count as tied (votes are whole numbers; averaged probabilities rarely tie exactly).
TIE = 1e-9


def silo_scores(
    member_probabilities: Mapping[str, list[np.ndarray]],
    *,
    rule: str,
    n_classes: int,
    member_class_counts: Mapping[str, list[np.ndarray]] | None = None,
) -> tuple[list[str], np.ndarray]:
    """Each silo's per-row class scores ``(n_silos, n_rows, K)``: its members' vote counts, summed probabilities or
    (``cohort``) class-count-weighted shifted log-probabilities (:func:`silo_class_totals` divides them).

    ``member_probabilities``: {"<silo>": [each member's ``(n_rows, K)`` probabilities]}; silos in sorted order;
    ``member_class_counts`` (``cohort`` only): {"<silo>": [each member's ``(K,)`` declared class counts]}.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, not {rule!r}")
    if rule == "cohort" and member_class_counts is None:
        raise ValueError("The cohort rule needs each member's declared class counts.")
    silos = sorted(member_probabilities)
    scores = []
    for silo in silos:
        counted = []
        for position, probabilities in enumerate(member_probabilities[silo]):
            probabilities = np.asarray(probabilities, dtype=np.float64)[:, :n_classes]
            if rule == "vote":
                counted.append(np.eye(n_classes)[probabilities.argmax(axis=1)])
            elif rule == "average":
                counted.append(probabilities)
            else:
                counts = np.asarray(member_class_counts[silo][position], dtype=np.float64)  # type: ignore[index]
                counted.append(_shifted_log_probabilities(probabilities) * counts[None, :n_classes])
        scores.append(np.sum(counted, axis=0))
    return silos, np.stack(scores)


def _shifted_log_probabilities(probabilities: np.ndarray) -> np.ndarray:
    # Imported on use: the cohort kind's module loads torch, which a vote or an average does not need.
    from workers.algorithms.cohort import log_probabilities
    from workers.algorithms.cohort_fusion import SHIFT

    return log_probabilities(probabilities) + SHIFT


def silo_class_totals(
    member_class_counts: Mapping[str, list[np.ndarray]], *, silos: list[str], n_classes: int
) -> np.ndarray:
    """``(n_silos, K)``: each silo's members' declared class counts, summed (the ``cohort`` rule's weights)."""
    return np.array(
        [
            np.sum(
                [np.asarray(c, dtype=np.float64)[:n_classes] for c in member_class_counts[silo]],
                axis=0,
            )
            for silo in silos
        ]
    )


def _expected_correct(summed: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``(n_coalitions, n_rows)``: the chance that a uniform draw among the top-scoring classes is the true one."""
    tied = summed >= summed.max(axis=1, keepdims=True) - TIE  # summed: (n_coalitions, K, n_rows)
    true_class_tied = np.take_along_axis(tied, labels[None, None, :], axis=1)[:, 0, :]
    return true_class_tied / tied.sum(axis=1)


def true_class_margins(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``(n_silos, n_rows, K − 1)``: each silo's score of the row's true class minus its score of each other class.

    For the ``vote`` and ``average`` rules a coalition's class scores are its silos' sums, so its margins are too:
    a coalition is scored from one sum over its silos of ``K − 1`` numbers per row instead of ``K`` and an arg-max
    (:func:`_expected_correct_of_margins`), and an order's growing coalitions are one cumulative sum."""
    n_silos, n_rows, n_classes = scores.shape
    true = np.take_along_axis(scores, labels[None, :, None], axis=2)  # (n_silos, n_rows, 1)
    others = np.arange(n_classes)[None, :] != labels[:, None]  # (n_rows, K): K − 1 True per row
    return (true - scores)[:, others].reshape(n_silos, n_rows, n_classes - 1)


def _expected_correct_of_margins(margins: np.ndarray, *, tie: float = TIE) -> np.ndarray:
    """``(..., n_rows)`` from summed margins ``(..., n_rows, K − 1)``: 0 if another class scores higher, else
    ``1 / t`` with ``t`` the classes tied at the top (as :func:`_expected_correct`)."""
    if margins.shape[-1] == 1:  # two classes: one margin per row, no reduction over classes
        margin = margins[..., 0]
        return (margin > tie) + 0.5 * (np.abs(margin) <= tie)
    on_top = (margins >= -tie).all(axis=-1)
    tied_others = (np.abs(margins) <= tie).sum(axis=-1)
    return on_top / (1.0 + tied_others)


def _measures(correct: np.ndarray, labels: np.ndarray, n_classes: int) -> dict[str, np.ndarray]:
    counts = np.bincount(labels, minlength=n_classes).astype(np.float64)
    present = counts > 0
    one_hot = np.eye(n_classes)[labels][:, present] / counts[present]  # (n_rows, classes present)
    return {
        "accuracy": correct.mean(axis=1),
        "balanced_accuracy": (correct @ one_hot).mean(axis=1),
    }


def coalition_values(
    scores: np.ndarray,
    labels: np.ndarray,
    masks: np.ndarray,
    *,
    n_classes: int,
    class_totals: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """``v(S)`` for each coalition (a row of 0/1 ``masks``, ``(n_coalitions, n_silos)``), per measure;
    ``class_totals`` (``cohort``: :func:`silo_class_totals`) divide each coalition's class scores by its totals."""
    labels = np.asarray(labels, dtype=np.int64)
    n_silos, n_rows, _ = scores.shape
    if class_totals is None:  # a sum over the coalition: its margins are its silos' margins summed
        flat = true_class_margins(scores, labels).reshape(n_silos, -1)
    else:  # class-major: reductions over classes are fast
        flat = scores.transpose(0, 2, 1).reshape(n_silos, -1)
    values: dict[str, list[np.ndarray]] = {measure: [] for measure in MEASURES}
    for start in range(0, len(masks), _BATCH):
        batch = np.asarray(masks[start : start + _BATCH], dtype=np.float64)
        summed = batch @ flat
        if class_totals is None:
            correct = _expected_correct_of_margins(summed.reshape(len(batch), n_rows, -1))
        else:
            summed = summed.reshape(len(batch), n_classes, n_rows)
            totals = (batch @ class_totals)[:, :, None]
            summed = np.divide(summed, totals, out=np.zeros_like(summed), where=totals > 0)
            correct = _expected_correct(summed, labels)
        measured = _measures(correct, labels, n_classes)
        for measure in MEASURES:
            values[measure].append(measured[measure])
    return {measure: np.concatenate(values[measure]) for measure in MEASURES}


def order_values(
    scores: np.ndarray,
    labels: np.ndarray,
    orders: np.ndarray,
    *,
    n_classes: int,
    class_totals: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """``(n_orders, n + 1)`` per measure: the value of each order's growing coalitions (empty, first silo, first
    two, ..., all). For the summed rules each order's margins are one cumulative sum over its silos (no matrix
    product per coalition); ``cohort`` goes through :func:`coalition_values`."""
    labels = np.asarray(labels, dtype=np.int64)
    n_orders, n = orders.shape
    if class_totals is not None:
        positions = np.argsort(
            orders, axis=1
        )  # positions[p, silo]: where the silo joins in order p
        masks = (positions[:, None, :] < np.arange(n + 1)[None, :, None]).reshape(-1, n)
        values = coalition_values(
            scores, labels, masks, n_classes=n_classes, class_totals=class_totals
        )
        return {measure: values[measure].reshape(n_orders, n + 1) for measure in MEASURES}
    by_class = np.argsort(
        labels, kind="stable"
    )  # rows sorted by class: a class's rows are one segment
    labels = labels[by_class]
    counts = np.bincount(labels, minlength=n_classes)
    starts = (np.cumsum(counts) - counts)[counts > 0]
    counts = counts[counts > 0]
    margins, tie = _compact(true_class_margins(scores[:, by_class], labels))  # (n, n_rows, K − 1)
    batch = max(1, _CELLS // (margins[0].size * (n + 1)))
    measured: dict[str, list[np.ndarray]] = {measure: [] for measure in MEASURES}
    for start in range(0, n_orders, batch):
        chunk = orders[start : start + batch]
        growing = np.zeros((len(chunk), n + 1, *margins.shape[1:]), dtype=margins.dtype)
        np.cumsum(margins[chunk], axis=1, out=growing[:, 1:], dtype=margins.dtype)
        correct = _correct_by_class(
            growing.reshape(len(chunk) * (n + 1), *margins.shape[1:]), starts, tie
        )
        measured["accuracy"].append(correct.sum(axis=1) / counts.sum())
        measured["balanced_accuracy"].append((correct / counts).mean(axis=1))
    return {
        measure: np.concatenate(measured[measure]).reshape(n_orders, n + 1) for measure in MEASURES
    }


def _compact(margins: np.ndarray) -> tuple[np.ndarray, float]:
    """The margins and their tie tolerance; votes' margins are whole numbers, stored as int16 (a quarter of the
    memory, ties exactly 0) when every partial sum over the silos fits."""
    if np.array_equal(margins, np.rint(margins)) and np.abs(margins).sum(axis=0).max() < 2**15:
        return margins.astype(np.int16), 0
    return margins, TIE


def _correct_by_class(margins: np.ndarray, starts: np.ndarray, tie: float) -> np.ndarray:
    """``(n_coalitions, classes present)``: the expected correct rows of each class, from summed margins
    ``(n_coalitions, n_rows, K − 1)`` whose rows are sorted by class (``starts``: each class's first row)."""
    if margins.shape[-1] == 1:  # two classes: count wins and ties, no float per row
        margin = margins[..., 0]
        wins = np.add.reduceat(margin > tie, starts, axis=1, dtype=np.int32)
        ties = np.add.reduceat(np.abs(margin) <= tie, starts, axis=1, dtype=np.int32)
        return wins + 0.5 * ties
    return np.add.reduceat(_expected_correct_of_margins(margins, tie=tie), starts, axis=1)


def exact_shapley(
    scores: np.ndarray,
    labels: np.ndarray,
    *,
    n_classes: int,
    class_totals: np.ndarray | None = None,
) -> dict:
    """Exact Shapley values from all ``2^n`` coalitions: {measure: ``(n_silos,)``}."""
    n = scores.shape[0]
    masks = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1
    values = coalition_values(scores, labels, masks, n_classes=n_classes, class_totals=class_totals)
    sizes = masks.sum(axis=1)
    weights = np.array([factorial(s) * factorial(n - s - 1) / factorial(n) for s in range(n)])
    shapley = {}
    for measure, v in values.items():
        phi = np.zeros(n)
        for silo in range(n):
            without = np.flatnonzero(masks[:, silo] == 0)
            phi[silo] = np.sum(weights[sizes[without]] * (v[without + 2**silo] - v[without]))
        shapley[measure] = phi
    return shapley


def order_count(n_silos: int, *, permutations: int) -> int:
    """The orders :func:`stratified_orders` draws: ``permutations`` rounded up to whole blocks of ``2n``, at least
    two blocks."""
    return max(2, -(-permutations // (2 * n_silos))) * 2 * n_silos


def stratified_orders(n_silos: int, *, permutations: int, seed: int) -> np.ndarray:
    """``(blocks × 2n, n)`` orders: per block a random order, its ``n`` cyclic shifts and their reverses, so that each
    silo joins at each position exactly twice per block; ``ceil(permutations / 2n)`` blocks, at least two."""
    generator = np.random.default_rng(seed)
    orders = []
    for _ in range(order_count(n_silos, permutations=permutations) // (2 * n_silos)):
        first = generator.permutation(n_silos)
        shifts = [np.roll(first, shift) for shift in range(n_silos)]
        orders.extend(shifts + [order[::-1] for order in shifts])
    return np.array(orders)


def permutation_shapley(
    scores: np.ndarray,
    labels: np.ndarray,
    *,
    n_classes: int,
    permutations: int,
    seed: int,
    class_totals: np.ndarray | None = None,
) -> tuple[dict, dict]:
    """Stratified antithetic permutation-sampling estimates and their standard errors: ({measure: φ},
    {measure: se}); the orders are :func:`stratified_orders`'."""
    n = scores.shape[0]
    orders = stratified_orders(n, permutations=permutations, seed=seed)
    positions = np.argsort(orders, axis=1)  # positions[p, silo]: where the silo joins in order p
    values = order_values(scores, labels, orders, n_classes=n_classes, class_totals=class_totals)
    estimates, errors = {}, {}
    for measure in MEASURES:
        gains = np.diff(values[measure], axis=1)  # by position
        marginals = np.take_along_axis(gains, positions, axis=1)  # by silo
        block_means = marginals.reshape(-1, 2 * n, n).mean(
            axis=1
        )  # the blocks are the independent draws
        estimates[measure] = marginals.mean(axis=0)
        errors[measure] = block_means.std(axis=0, ddof=1) / np.sqrt(len(block_means))
    return estimates, errors


def duplicate_groups(
    member_probabilities: Mapping[str, list[np.ndarray]],
    *,
    n_classes: int,
    tolerance: float = DUPLICATE_TOLERANCE,
) -> list[list[str]]:
    """The silos grouped by copies (module docstring), each group sorted, groups in order of their first silo.

    Two silos are copies when the mean absolute difference of their members' mean probabilities ``(n_rows, K)``
    is at most ``tolerance``; groups are closed under "is a copy of" (a copy of a copy is in the group).
    """
    silos = sorted(member_probabilities)
    means = [
        np.mean(
            [np.asarray(p, dtype=np.float64)[:, :n_classes] for p in member_probabilities[silo]],
            axis=0,
        )
        for silo in silos
    ]
    group_of = list(range(len(silos)))

    def root(index: int) -> int:
        while group_of[index] != index:
            index = group_of[index]
        return index

    for first in range(len(silos)):
        for second in range(first + 1, len(silos)):
            if np.abs(means[first] - means[second]).mean() <= tolerance:
                group_of[root(second)] = root(first)
    groups: dict[int, list[str]] = {}
    for index, silo in enumerate(silos):
        groups.setdefault(root(index), []).append(silo)
    return list(groups.values())


def leave_one_out(
    scores: np.ndarray,
    labels: np.ndarray,
    *,
    n_classes: int,
    class_totals: np.ndarray | None = None,
) -> dict:
    """``v(all) − v(all without the silo)``: {measure: ``(n_silos,)``}."""
    n = scores.shape[0]
    masks = np.vstack([np.ones(n), 1.0 - np.eye(n)])
    values = coalition_values(scores, labels, masks, n_classes=n_classes, class_totals=class_totals)
    return {measure: values[measure][0] - values[measure][1:] for measure in MEASURES}


def rank_band(rank: int, n_silos: int) -> str:
    """Which quarter of the silos (by value, rank 1 the highest) a rank falls in."""
    quarter = min(3, (4 * (rank - 1)) // max(n_silos, 1))
    return ("top quarter", "second quarter", "third quarter", "bottom quarter")[quarter]


def contribution_values(
    member_probabilities: Mapping[str, list[np.ndarray]],
    labels,
    *,
    rule: str,
    n_classes: int,
    seed: int = 0,
    permutations: int = PERMUTATIONS,
    member_class_counts: Mapping[str, list[np.ndarray]] | None = None,
) -> dict:
    """The stored record (``GlobalModel.contribution_values``): the game, the estimator and each silo's values.

    ``{"rule", "estimator": "exact" | "permutation", "permutations", "rows", "measures", "grand_coalition",
    "empty_coalition", "duplicates": [[silos valued as one player]], "silos": {"<silo>": {"shapley": {measure: φ},
    "standard_error": {measure: se} | None, "leave_one_out": {measure: Δ}, "rank", "rank_band"}}}``; copies
    (:func:`duplicate_groups`) share their player's values equally; ranks by the balanced-accuracy Shapley value.
    ``member_class_counts``: each member's declared class counts, for the ``cohort`` rule (:func:`silo_scores`).
    """
    labels = np.asarray(labels, dtype=np.int64)
    groups = duplicate_groups(member_probabilities, n_classes=n_classes)
    players, scores = silo_scores(
        {group[0]: member_probabilities[group[0]] for group in groups},
        rule=rule,
        n_classes=n_classes,
        member_class_counts=member_class_counts,
    )
    totals = (
        None
        if rule != "cohort"
        else silo_class_totals(member_class_counts or {}, silos=players, n_classes=n_classes)
    )
    n = len(groups)
    if n <= EXACT_MAX_SILOS:
        estimator, shapley, errors = (
            "exact",
            exact_shapley(scores, labels, n_classes=n_classes, class_totals=totals),
            None,
        )
    else:
        estimator = "permutation"
        shapley, errors = permutation_shapley(
            scores,
            labels,
            n_classes=n_classes,
            permutations=permutations,
            seed=seed,
            class_totals=totals,
        )
    loo = leave_one_out(scores, labels, n_classes=n_classes, class_totals=totals)
    ends = coalition_values(
        scores,
        labels,
        np.array([np.ones(n), np.zeros(n)]),
        n_classes=n_classes,
        class_totals=totals,
    )
    player_share = {
        silo: (player, 1 / len(group)) for player, group in enumerate(groups) for silo in group
    }

    def share(estimates: dict, silo: str) -> dict:
        player, fraction = player_share[silo]
        return {measure: float(estimates[measure][player] * fraction) for measure in MEASURES}

    silos = sorted(player_share)
    order = sorted(silos, key=lambda silo: (-share(shapley, silo)["balanced_accuracy"], silo))
    rank = {silo: position + 1 for position, silo in enumerate(order)}
    return {
        "rule": rule,
        "estimator": estimator,
        "permutations": None if errors is None else order_count(n, permutations=permutations),
        "rows": int(labels.size),
        "measures": list(MEASURES),
        "grand_coalition": {measure: float(ends[measure][0]) for measure in MEASURES},
        "empty_coalition": {measure: float(ends[measure][1]) for measure in MEASURES},
        "duplicates": [group for group in groups if len(group) > 1],
        "silos": {
            silo: {
                "shapley": share(shapley, silo),
                "standard_error": None if errors is None else share(errors, silo),
                "leave_one_out": share(loo, silo),
                "rank": rank[silo],
                "rank_band": rank_band(rank[silo], len(silos)),
            }
            for silo in silos
        },
    }
