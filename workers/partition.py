"""Split a labelled dataset over simulated parties: Dirichlet label skew or IID.

The Dirichlet partition is the one of the FedKT paper's experiments (section 5, after
NIID-Bench): for each class k draw p_k ~ Dir_n(beta) and give party j a p_k,j share of the
examples of class k. Small ``beta`` gives strong label skew. Draws are repeated until every
party holds at least ``min_size`` examples.
"""

from __future__ import annotations

import numpy as np

SeedLike = int | np.random.Generator


def _generator(seed: SeedLike) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def dirichlet_label_partition(
    labels,
    n_parties: int,
    *,
    beta: float,
    seed: SeedLike,
    min_size: int = 10,
    max_attempts: int = 1000,
    cap_at_mean: bool = False,
) -> list[np.ndarray]:
    """Indices of each party's examples under a Dirichlet(``beta``) label partition.

    Parameters
    ----------
    labels : array of shape (n_examples,)
        Class of each example (any hashable values).
    n_parties : int
    beta : float
        Dirichlet concentration, > 0.
    seed : int or numpy Generator
        Drives every draw; the same seed gives the same partition.
    min_size : int
        Each party gets at least this many examples; the draw is repeated until it does.
    cap_at_mean : bool
        NIID-Bench's variant (the code behind the FedKT paper's experiments): while classes are
        dealt out in order, a party already holding ``n_examples / n_parties`` examples or more
        gets no share of the later classes. Off by default: the plain rule above.

    Returns
    -------
    list of ``n_parties`` sorted int64 arrays, disjoint, whose union is ``range(n_examples)``.

    Raises
    ------
    ValueError
        If ``n_parties * min_size`` exceeds the data, or no draw satisfied ``min_size`` within
        ``max_attempts`` tries.
    """
    labels = np.asarray(labels)
    if n_parties < 1 or beta <= 0:
        raise ValueError("n_parties must be at least 1 and beta must be positive.")
    if n_parties * min_size > len(labels):
        raise ValueError(
            f"{len(labels)} examples cannot give {n_parties} parties at least {min_size} each."
        )
    rng = _generator(seed)
    for _ in range(max_attempts):
        parties = _dirichlet_draw(labels, n_parties, beta, rng, cap_at_mean)
        if min(len(indices) for indices in parties) >= min_size:
            return parties
    raise ValueError(
        f"No Dirichlet(beta={beta}) draw gave every one of {n_parties} parties {min_size} examples "
        f"in {max_attempts} attempts; lower min_size or raise beta."
    )


def _dirichlet_draw(
    labels: np.ndarray, n_parties: int, beta: float, rng: np.random.Generator, cap_at_mean: bool
) -> list[np.ndarray]:
    shares: list[list[np.ndarray]] = [[] for _ in range(n_parties)]
    sizes = np.zeros(n_parties)
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        proportions = rng.dirichlet(np.full(n_parties, beta))
        if cap_at_mean:
            proportions = proportions * (sizes < len(labels) / n_parties)
            proportions = proportions / proportions.sum()
        cuts = (np.cumsum(proportions)[:-1] * len(members)).astype(np.int64)
        for party, share in enumerate(np.split(members, cuts)):
            shares[party].append(share)
            sizes[party] += len(share)
    return [np.sort(np.concatenate(share)).astype(np.int64) for share in shares]


def iid_partition(n_examples: int, n_parties: int, *, seed: SeedLike) -> list[np.ndarray]:
    """Indices of each party's examples under a uniform random split into near-equal parts.

    Returns ``n_parties`` sorted, disjoint int64 arrays covering ``range(n_examples)``; sizes
    differ by at most one.
    """
    if not 1 <= n_parties <= n_examples:
        raise ValueError(f"{n_examples} examples cannot be split over {n_parties} parties.")
    order = _generator(seed).permutation(n_examples)
    return [np.sort(part).astype(np.int64) for part in np.array_split(order, n_parties)]
