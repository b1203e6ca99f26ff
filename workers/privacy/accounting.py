"""Privacy accounting for FedKT's noisy votes at L1 (server noise) and L2 (party noise).

Implements the analysis of Li, He, Song, *Practical One-Shot Federated Learning for
Cross-Silo Setting* (FedKT), Section 4: per-query pure-DP cost ε₀ = 2sγ at L1 (party-level:
one party moves up to s consistent votes between two classes) and ε₀ = 2γ at L2
(example-level: one record changes one teacher's vote; the record sits in one teacher of each
of the party's s partitions, so a party composes its queries over its s partitions),
Theorems 2–3 (data-dependent moments, via PATE's Lemma 4 and Theorem 3) and Theorem 4 (at L2,
parallel composition: the maximum over parties). GNMax is accounted with Papernot et al.
2018, *Scalable Private Learning with PATE*, Prop. 8 and Theorem 6.

Choices, and the reference code's defects we do not reproduce:

* ε₀ comes from s and γ only. The paper's analysis code derives it from a data-dependent
  quantity ("z") instead of s, which is neither the sensitivity nor data-independent.
* The validity condition q < 1/(e^{ε₀}+1) of PATE Theorem 3 is evaluated with the same ε₀
  that enters the bound (the reference evaluates it with another ε₀).
* The reference code's data-independent printout is broken. Here the data-independent bound
  is a real computation: the exact Rényi curve of the discrete Laplace noise OpenDP samples
  (or the Gaussian α·Δ²/2σ² bound, valid for discrete Gaussian noise), composed over a wide
  grid of orders (:data:`~workers.privacy.rdp.RENYI_ORDERS`), not 8 integer moments. It is
  computable before a job runs, so the market can reserve it.
* Discrete noise is accounted as discrete: its own Rényi curve and its own tail in q (the
  continuous formulas understate both by a few percent). The paper's continuous per-query
  log moments stay available as :func:`workers.privacy.data_dependent.laplace_log_moments`.
* The data-dependent curve is capped at every order by the data-independent one, and both
  are converted with the same rule, so data-dependent ε ≤ data-independent ε always.
* Conversion to (ε, δ): Canonne–Kamath–Steinke 2020 Prop. 12 (see :mod:`workers.privacy.rdp`),
  tighter than the paper's ε = min_λ (Σα(λ) + ln(1/δ))/λ. ``order`` in a report is the
  Rényi order α at which ε was attained (moment order λ = α − 1).
* Vote gaps are in votes. The counts need not be multiples of s: a submission with s_i ≤ s students (a small
  silo's toolkit picks s_i = 1) adds s_i votes when consistent, and the sensitivity stays the job's s (times the
  silo's submissions): what it moves is at most that, so mixed designs are charged for s, never under-charged.
* The sensitivity is per party, not per submission. A silo with k submissions in one L1 job
  moves k·s consistent votes (all k can switch to the same other class), so its curve is the
  one for a vote shift of k·s (:func:`party_vote_shifts`); a job's report is that of its
  worst-placed party, the largest shift. A fusion that weights votes passes s × the largest
  weight as ``vote_shift`` (weights must keep the counts integers: the noise is integer).
* **Record-level L1** (issue 40, ``unit`` "example-level" in :func:`server_noise_privacy_bound` and
  :func:`server_noise_privacy`): the server runs GNMax (or the Laplace / Confident variants) over the votes of every
  student of every silo, where the silo fitted each of its s students on its own partition of its rows, the
  partitions disjoint. Neighbouring datasets differ in one record of one silo. That record lies in exactly one
  partition, so it can change the vote of one student only: that student's vote leaves class a and goes to class b,
  the histogram changes by −1 in coordinate a and +1 in b, and every other count is unchanged. The L1 sensitivity is
  2 and the L2 sensitivity ‖(−1, +1)‖₂ = √2 per query — a vote shift of 1 in :mod:`workers.privacy.rdp`, whose
  vector curves are twice one coordinate's (GNMax: 2·α·1²/(2σ²) = α/σ², Papernot et al. 2018, Prop. 8). A silo
  with k submissions in the job may hold the record in one student of each, so it moves k votes
  (:func:`party_vote_shifts` with ``votes_per_submission`` 1). The trust assumption: the partitions are disjoint by
  the toolkit's construction and the submission declares it (``disjoint_partitions``); the server cannot check it,
  and a silo that declares it falsely is charged for fewer votes than its data moves. The guarantee is example-level
  only: a silo's whole data moves all its votes, so a record-level ε says nothing about the silo as a whole.
* Every noisy query is charged, abstentions (all-zero counts) included: they cost the full
  data-independent amount, since q ≥ ½ there. Dropping them from the accounting after looking
  at the noiseless counts would be a data-dependent selection no theorem here covers.
"""

from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np

from workers.privacy.mechanisms import (
    ConfidentGaussianNoise,
    GaussianNoise,
    LaplaceNoise,
    validate_vote_counts,
)
from workers.privacy.rdp import RENYI_ORDERS, epsilon_from_rdp, validate_delta
from workers.privacy.reports import EXAMPLE_LEVEL, PARTY_LEVEL, PrivacyAnalysis, PrivacyReport

__all__ = [
    "PrivacyAnalysis",
    "PrivacyReport",
    "party_vote_shifts",
    "party_noise_privacy",
    "party_noise_privacy_bound",
    "server_noise_privacy",
    "server_noise_privacy_bound",
]


def _report(
    mechanism,
    composed_rdp,
    *,
    delta,
    unit,
    n_queries,
    partitions,
    teachers,
    data_dependent,
    vote_shift,
) -> PrivacyReport:
    epsilon, order = epsilon_from_rdp(RENYI_ORDERS, composed_rdp, delta=delta)
    return PrivacyReport(
        epsilon=epsilon,
        delta=float(delta),
        unit=unit,
        mechanism=mechanism.name,
        **mechanism.parameters,
        n_queries=int(n_queries),
        partitions=int(partitions),
        teachers=int(teachers),
        data_dependent=data_dependent,
        order=order,
        vote_shift=int(vote_shift),
    )


def _composed_data_dependent_rdp(mechanism, counts: np.ndarray, *, vote_shift: int) -> np.ndarray:
    """Sum of the per-query data-dependent curves, capped by the composed data-independent one.

    The cap only removes floating-point noise of summation order: every per-query curve is
    already capped by the data-independent curve.
    """
    per_query = mechanism.data_dependent_query_rdp(counts, RENYI_ORDERS, vote_shift=vote_shift)
    independent = len(counts) * mechanism.query_rdp(RENYI_ORDERS, vote_shift=vote_shift)
    return np.minimum(per_query.sum(axis=0), independent)


def party_vote_shifts(
    parties: Sequence[Hashable], *, votes_per_submission: int
) -> dict[Hashable, int]:
    """Votes each party's data can move per query of an L1 job: its submissions times s.

    A silo's submissions are all trained on its data, so replacing that data can switch every one
    of their consistent votes from one class to another: k submissions of s students move k·s.

    Parameters
    ----------
    parties : sequence of hashable
        The party (silo) of each submission the job uses, one entry per submission.
    votes_per_submission : int
        Votes one submission casts: s for FedKT's consistent votes (s × its largest weight for a
        weighted vote).

    Returns
    -------
    dict
        party → vote shift (an integer ≥ ``votes_per_submission``).
    """
    _validate_count("votes_per_submission", votes_per_submission, 1)
    return {party: count * votes_per_submission for party, count in Counter(parties).items()}


def _validate_count(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(
            f"The number of {name} must be an integer of at least {minimum}, got {value!r}."
        )


def _validate_unit(unit: str) -> None:
    if unit not in (PARTY_LEVEL, EXAMPLE_LEVEL):
        raise ValueError(
            f"The unit of an L1 guarantee is {PARTY_LEVEL!r} or {EXAMPLE_LEVEL!r}, got {unit!r}."
        )


def _validate_design(
    *,
    mechanism,
    partitions: int,
    teachers: int,
    delta: float,
    n_queries: int = 0,
    vote_shift: int = 1,
) -> None:
    if not isinstance(mechanism, (LaplaceNoise, GaussianNoise, ConfidentGaussianNoise)):
        raise ValueError(
            "The noise mechanism must be LaplaceNoise, GaussianNoise or ConfidentGaussianNoise, "
            f"got {mechanism!r}."
        )
    validate_delta(delta)
    for name, value, minimum in (
        ("partitions", partitions, 1),
        ("teachers", teachers, 1),
        ("n_queries", n_queries, 0),
        ("votes a party moves (vote_shift)", vote_shift, 1),
    ):
        _validate_count(name, value, minimum)


def server_noise_privacy_bound(
    *,
    mechanism,
    n_queries: int,
    partitions: int,
    teachers: int,
    delta: float,
    vote_shift: int | None = None,
    unit: str = PARTY_LEVEL,
) -> PrivacyReport:
    """Data-independent party-level (or record-level) (ε, δ) of FedKT-L1, computable before the job runs.

    Parameters
    ----------
    mechanism : LaplaceNoise, GaussianNoise or ConfidentGaussianNoise
        Noise the server adds to the consistent-vote counts.
    n_queries : int
        Number of public examples queried.
    partitions, teachers : int
        s (one consistent submission adds s votes) and t.
    delta : float
        Target δ.
    vote_shift : int, optional
        Votes one party can move from one class to another per query, the party-level
        sensitivity: s × its submissions in the job (:func:`party_vote_shifts`), or s × its
        largest vote weight. Default s (one submission per party). Record-level: the party's submissions
        (one record moves one student's vote in each, the module docstring).
    unit : {"party-level", "example-level"}
        What the neighbours differ in: one silo's data (FedKT's consistent votes) or one record (every student
        votes, each fitted on a disjoint partition; the module docstring derives the √2 sensitivity).

    Returns
    -------
    PrivacyReport
        Unit ``unit``, ``data_dependent=False``.
    """
    vote_shift = partitions if vote_shift is None else vote_shift
    _validate_unit(unit)
    _validate_design(
        mechanism=mechanism,
        partitions=partitions,
        teachers=teachers,
        delta=delta,
        n_queries=n_queries,
        vote_shift=vote_shift,
    )
    composed = n_queries * mechanism.query_rdp(RENYI_ORDERS, vote_shift=vote_shift)
    return _report(
        mechanism,
        composed,
        delta=delta,
        unit=unit,
        n_queries=n_queries,
        partitions=partitions,
        teachers=teachers,
        data_dependent=False,
        vote_shift=vote_shift,
    )


def party_noise_privacy_bound(
    *, mechanism, n_queries: int, partitions: int, teachers: int, delta: float
) -> PrivacyReport:
    """Data-independent example-level (ε, δ) of one FedKT-L2 party.

    Parameters
    ----------
    mechanism : LaplaceNoise or GaussianNoise
        Noise the party adds to its teachers' vote counts.
    n_queries : int
        Public examples queried per partition; the party composes n_queries·s queries.
    partitions, teachers : int
        s and t.
    delta : float
        Target δ.

    Returns
    -------
    PrivacyReport
        Unit "example-level", ``n_queries`` = n_queries·s, ``data_dependent=False``.
    """
    _validate_design(
        mechanism=mechanism,
        partitions=partitions,
        teachers=teachers,
        delta=delta,
        n_queries=n_queries,
    )
    composed_queries = n_queries * partitions
    composed = composed_queries * mechanism.query_rdp(RENYI_ORDERS, vote_shift=1)
    return _report(
        mechanism,
        composed,
        delta=delta,
        unit=EXAMPLE_LEVEL,
        n_queries=composed_queries,
        partitions=partitions,
        teachers=teachers,
        data_dependent=False,
        vote_shift=1,
    )


def server_noise_privacy(
    *,
    mechanism,
    vote_counts: np.ndarray,
    partitions: int,
    teachers: int,
    delta: float,
    vote_shift: int | None = None,
    unit: str = PARTY_LEVEL,
) -> PrivacyAnalysis:
    """Data-independent and data-dependent party-level (or record-level) (ε, δ) of one FedKT-L1 run.

    Parameters
    ----------
    mechanism : LaplaceNoise, GaussianNoise or ConfidentGaussianNoise
        Noise the server added.
    vote_counts : numpy.ndarray of int, shape (n_queries, n_classes)
        The noiseless consistent-vote counts of the queried public examples (sums of the submissions' s_i ≤ s).
    partitions, teachers : int
        s and t.
    delta : float
        Target δ.
    vote_shift : int, optional
        Votes the worst-placed party can move per query (see :func:`server_noise_privacy_bound`);
        default s.
    unit : {"party-level", "example-level"}
        As for :func:`server_noise_privacy_bound`; record-level counts are every student's votes.

    Returns
    -------
    PrivacyAnalysis
        Both reports, unit ``unit``, for a party that moves ``vote_shift`` votes; for Confident-GNMax the
        data-independent one only (``data_dependent`` None: no smooth-sensitivity release is implemented).
    """
    vote_shift = partitions if vote_shift is None else vote_shift
    _validate_design(
        mechanism=mechanism,
        partitions=partitions,
        teachers=teachers,
        delta=delta,
        vote_shift=vote_shift,
    )
    counts = validate_vote_counts(vote_counts)
    if np.any(counts < 0):
        raise ValueError("Consistent-vote counts cannot be negative; pass the noiseless counts.")
    independent = server_noise_privacy_bound(
        mechanism=mechanism,
        n_queries=len(counts),
        partitions=partitions,
        teachers=teachers,
        delta=delta,
        vote_shift=vote_shift,
        unit=unit,
    )
    if isinstance(mechanism, ConfidentGaussianNoise):
        # Its data-dependent bound would be released only through smooth sensitivity (PATE-2018, sec. 4), which
        # is not implemented: no data-dependent ε at all (docs/budgets.md).
        return PrivacyAnalysis(data_independent=independent, data_dependent=None)
    composed = _composed_data_dependent_rdp(mechanism, counts, vote_shift=vote_shift)
    dependent = _report(
        mechanism,
        composed,
        delta=delta,
        unit=unit,
        n_queries=len(counts),
        partitions=partitions,
        teachers=teachers,
        data_dependent=True,
        vote_shift=vote_shift,
    )
    return PrivacyAnalysis(data_independent=independent, data_dependent=dependent)


def _party_counts(
    party_index: int, partition_counts: list, *, partitions: int, teachers: int
) -> np.ndarray:
    if len(partition_counts) != partitions:
        raise ValueError(
            f"Party {party_index} has vote counts for {len(partition_counts)} partitions, expected s = {partitions}."
        )
    arrays = [validate_vote_counts(counts) for counts in partition_counts]
    if len({array.shape[1] for array in arrays}) > 1:
        raise ValueError(f"Party {party_index}'s partitions disagree on the number of classes.")
    stacked = np.concatenate(arrays, axis=0)
    if np.any(stacked < 0) or np.any(stacked.sum(axis=1) > teachers):
        raise ValueError(
            f"Party {party_index} has vote counts that are negative or exceed the {teachers} teachers."
        )
    return stacked


def party_noise_privacy(
    *,
    mechanism,
    party_vote_counts: list[list[np.ndarray]],
    partitions: int,
    teachers: int,
    delta: float,
) -> PrivacyAnalysis:
    """Data-independent and data-dependent example-level (ε, δ) of FedKT-L2 (Theorem 4).

    Each party composes its queries over its s partitions; parties hold disjoint data, so the
    guarantee is the maximum over parties (parallel composition).

    Parameters
    ----------
    mechanism : LaplaceNoise or GaussianNoise
        Noise the parties added.
    party_vote_counts : list of list of numpy.ndarray of int
        ``party_vote_counts[party][partition]``, shape (n_queries, n_classes): the noiseless
        teacher vote counts.
    partitions, teachers : int
        s and t.
    delta : float
        Target δ.

    Returns
    -------
    PrivacyAnalysis
        Both reports for the worst party, unit "example-level"; ``n_queries`` counts that
        party's queries over its partitions.
    """
    _validate_design(mechanism=mechanism, partitions=partitions, teachers=teachers, delta=delta)
    if not party_vote_counts:
        raise ValueError("At least one party's vote counts are needed.")
    per_party = [
        _party_counts(index, counts, partitions=partitions, teachers=teachers)
        for index, counts in enumerate(party_vote_counts)
    ]
    independent_per_query = mechanism.query_rdp(RENYI_ORDERS, vote_shift=1)
    design = {
        "delta": delta,
        "unit": EXAMPLE_LEVEL,
        "partitions": partitions,
        "teachers": teachers,
        "vote_shift": 1,
    }
    independent = max(
        (
            _report(
                mechanism,
                len(counts) * independent_per_query,
                n_queries=len(counts),
                data_dependent=False,
                **design,
            )
            for counts in per_party
        ),
        key=lambda report: report.epsilon,
    )
    dependent = max(
        (
            _report(
                mechanism,
                _composed_data_dependent_rdp(mechanism, counts, vote_shift=1),
                n_queries=len(counts),
                data_dependent=True,
                **design,
            )
            for counts in per_party
        ),
        key=lambda report: report.epsilon,
    )
    return PrivacyAnalysis(data_independent=independent, data_dependent=dependent)
