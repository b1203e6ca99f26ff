import json

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.privacy import (
    GaussianNoise,
    LaplaceNoise,
    party_noise_privacy,
    party_noise_privacy_bound,
    server_noise_privacy,
    server_noise_privacy_bound,
)

DELTA = 1e-5
PROPERTY = settings(max_examples=30, deadline=None)


def not_below(larger: float, smaller: float) -> bool:
    """``larger >= smaller`` up to floating-point rounding: with a factor of 1 + 1e-9 the two sides are the same ε
    computed along different roundings, and may differ in their last bit."""
    return larger >= smaller * (1 - 1e-12)


mechanisms = st.one_of(
    st.builds(LaplaceNoise, gamma=st.floats(0.01, 2.0)),
    st.builds(GaussianNoise, sigma=st.floats(0.5, 100.0)),
)


def consistent_vote_counts(draw, partitions):
    """Consistent-vote counts: each of up to 20 parties adds s votes to one class or abstains."""
    n_classes = draw(st.integers(2, 4))
    rows = draw(
        st.lists(
            st.lists(st.integers(0, 20), min_size=n_classes, max_size=n_classes),
            min_size=1,
            max_size=40,
        )
    )
    return partitions * np.array(rows, dtype=np.int64)


@st.composite
def server_runs(draw):
    partitions = draw(st.integers(1, 3))
    return draw(mechanisms), consistent_vote_counts(draw, partitions), partitions


@st.composite
def party_runs(draw):
    teachers, partitions = draw(st.integers(1, 9)), draw(st.integers(1, 3))
    n_classes, n_queries = draw(st.integers(2, 4)), draw(st.integers(1, 30))

    def partition_counts():
        winners = draw(
            st.lists(
                st.integers(0, n_classes - 1),
                min_size=n_queries * teachers,
                max_size=n_queries * teachers,
            )
        )
        one_hot = np.eye(n_classes, dtype=np.int64)[winners]  # one vote per teacher
        return one_hot.reshape(n_queries, teachers, n_classes).sum(axis=1)

    parties = [
        [partition_counts() for _ in range(partitions)] for _ in range(draw(st.integers(1, 3)))
    ]
    return draw(mechanisms), parties, partitions, teachers


# The headline setting: Adult, L1, s = 2, γ = 0.04, 0.5 % of 6,105 public rows queried.
def test_server_noise_bound_for_the_papers_adult_setting():
    report = server_noise_privacy_bound(
        mechanism=LaplaceNoise(gamma=0.04), n_queries=31, partitions=2, teachers=5, delta=DELTA
    )
    assert report.epsilon == pytest.approx(2.6786, abs=1e-4)
    assert report.epsilon < 31 * 2 * 2 * 0.04  # far below basic composition of ε0 = 2sγ
    assert (report.unit, report.mechanism, report.gamma, report.sigma) == (
        "party-level",
        "laplace",
        0.04,
        None,
    )
    assert (report.n_queries, report.partitions, report.teachers, report.data_dependent) == (
        31,
        2,
        5,
        False,
    )


def test_party_noise_bound_composes_the_queries_of_all_partitions():
    report = party_noise_privacy_bound(
        mechanism=LaplaceNoise(gamma=0.04), n_queries=31, partitions=2, teachers=5, delta=DELTA
    )
    assert report.epsilon == pytest.approx(1.8767, abs=1e-4)
    assert (report.unit, report.n_queries) == ("example-level", 62)


def test_gaussian_server_noise_bound_agrees_with_dp_accounting():
    sigma, partitions, n_queries = 20.0, 2, 100
    report = server_noise_privacy_bound(
        mechanism=GaussianNoise(sigma=sigma),
        n_queries=n_queries,
        partitions=partitions,
        teachers=5,
        delta=DELTA,
    )
    accountant = RdpAccountant()  # L2 sensitivity of one party: √2·s
    accountant.compose(
        SelfComposedDpEvent(
            GaussianDpEvent(noise_multiplier=sigma / (np.sqrt(2) * partitions)), n_queries
        )
    )
    assert report.epsilon == pytest.approx(
        accountant.get_epsilon(DELTA), rel=1e-3
    )  # the grids differ
    assert (report.mechanism, report.gamma, report.sigma) == ("gaussian", None, 20.0)


def test_report_is_json_ready_and_labelled():
    analysis = server_noise_privacy(
        mechanism=LaplaceNoise(gamma=0.1),
        vote_counts=np.array([[10, 0], [4, 6]]),
        partitions=2,
        teachers=5,
        delta=DELTA,
    )
    as_dict = analysis.data_dependent.as_dict()
    assert set(as_dict) == {
        "epsilon",
        "delta",
        "unit",
        "mechanism",
        "gamma",
        "sigma",
        "n_queries",
        "partitions",
        "teachers",
        "data_dependent",
        "order",
        "vote_shift",
    }
    assert json.loads(json.dumps(as_dict)) == as_dict
    assert as_dict["data_dependent"] is True and as_dict["order"] > 1


def test_no_queries_cost_nothing():
    report = server_noise_privacy_bound(
        mechanism=LaplaceNoise(gamma=0.1), n_queries=0, partitions=2, teachers=5, delta=DELTA
    )
    assert report.epsilon == 0.0


def test_landslide_votes_cost_far_less_than_the_bound():
    counts = np.tile([[40, 0]], (1_000, 1))  # 20 parties × s = 2, all consistent on class 0
    analysis = server_noise_privacy(
        mechanism=LaplaceNoise(gamma=0.25),
        vote_counts=counts,
        partitions=2,
        teachers=5,
        delta=DELTA,
    )
    assert analysis.data_dependent.epsilon < 0.02 * analysis.data_independent.epsilon


def test_mixed_designs_are_accounted_at_the_jobs_s_never_under_charged():
    """A submission with s_i = 1 in a job with s = 2 adds one consistent vote (issue 45: the L1 vote failed on
    counts that were not multiples of s); the analysis takes them and charges every party for s."""
    mixed = np.array([[3, 0], [1, 2], [5, 0]])  # two silos of s = 2 and one of s = 1
    analysis = server_noise_privacy(
        mechanism=LaplaceNoise(gamma=0.1), vote_counts=mixed, partitions=2, teachers=5, delta=DELTA
    )
    even = server_noise_privacy(
        mechanism=LaplaceNoise(gamma=0.1),
        vote_counts=np.array([[4, 0], [2, 2], [6, 0]]),
        partitions=2,
        teachers=5,
        delta=DELTA,
    )
    assert analysis.data_independent.vote_shift == 2
    assert analysis.data_independent.epsilon == even.data_independent.epsilon
    assert analysis.data_dependent.epsilon <= analysis.data_independent.epsilon


@pytest.mark.parametrize(
    "bad",
    [
        {"delta": 0.0},
        {"delta": 1.5},
        {"partitions": 0},
        {"teachers": 0},
        {"n_queries": -1},
        {"partitions": 1.5},
    ],
)
def test_bounds_refuse_bad_parameters(bad):
    arguments = {
        "mechanism": LaplaceNoise(gamma=0.1),
        "n_queries": 10,
        "partitions": 2,
        "teachers": 5,
        "delta": DELTA,
    } | bad
    with pytest.raises(ValueError):
        server_noise_privacy_bound(**arguments)


def test_accounting_refuses_an_unknown_mechanism():
    with pytest.raises(ValueError, match="LaplaceNoise, GaussianNoise or ConfidentGaussianNoise"):
        server_noise_privacy_bound(
            mechanism=None, n_queries=10, partitions=2, teachers=5, delta=DELTA
        )


def test_party_noise_privacy_refuses_a_wrong_number_of_partitions():
    counts = np.array([[3, 2]])
    with pytest.raises(ValueError, match="1 partitions, expected s = 2"):
        party_noise_privacy(
            mechanism=LaplaceNoise(gamma=0.1),
            party_vote_counts=[[counts]],
            partitions=2,
            teachers=5,
            delta=DELTA,
        )


def test_party_noise_privacy_refuses_more_votes_than_teachers():
    counts = np.array([[5, 2]])
    with pytest.raises(ValueError, match="exceed the 5 teachers"):
        party_noise_privacy(
            mechanism=LaplaceNoise(gamma=0.1),
            party_vote_counts=[[counts, counts]],
            partitions=2,
            teachers=5,
            delta=DELTA,
        )


def test_party_noise_privacy_reports_the_worst_party():
    split, unanimous = np.array([[3, 2]] * 20), np.array([[5, 0]] * 20)
    busy_party = [np.vstack([split, split]), split]  # 60 queries over its two partitions
    quiet_party = [unanimous, unanimous]  # 40 confident queries
    analysis = party_noise_privacy(
        mechanism=LaplaceNoise(gamma=0.5),
        party_vote_counts=[quiet_party, busy_party],
        partitions=2,
        teachers=5,
        delta=DELTA,
    )
    alone = party_noise_privacy(
        mechanism=LaplaceNoise(gamma=0.5),
        party_vote_counts=[busy_party],
        partitions=2,
        teachers=5,
        delta=DELTA,
    )
    assert analysis == alone
    assert analysis.data_independent.n_queries == 60
    assert (
        analysis.data_independent.epsilon
        == party_noise_privacy_bound(
            mechanism=LaplaceNoise(gamma=0.5), n_queries=30, partitions=2, teachers=5, delta=DELTA
        ).epsilon
    )


@PROPERTY
@given(mechanisms, st.integers(0, 500), st.integers(1, 500), st.integers(1, 4))
def test_data_independent_epsilon_never_decreases_with_more_queries(
    mechanism, n_queries, extra, partitions
):
    for bound in (server_noise_privacy_bound, party_noise_privacy_bound):
        fewer = bound(
            mechanism=mechanism, n_queries=n_queries, partitions=partitions, teachers=5, delta=DELTA
        )
        more = bound(
            mechanism=mechanism,
            n_queries=n_queries + extra,
            partitions=partitions,
            teachers=5,
            delta=DELTA,
        )
        assert not_below(more.epsilon, fewer.epsilon)


@PROPERTY
@given(st.floats(0.01, 1.0), st.floats(1.0, 3.0), st.integers(1, 300), st.integers(1, 3))
def test_data_independent_epsilon_never_decreases_with_gamma_or_one_over_sigma(
    noise, factor, n_queries, partitions
):
    for bound in (server_noise_privacy_bound, party_noise_privacy_bound):

        def epsilon(mechanism, bound=bound):
            return bound(
                mechanism=mechanism,
                n_queries=n_queries,
                partitions=partitions,
                teachers=5,
                delta=DELTA,
            ).epsilon

        assert not_below(
            epsilon(LaplaceNoise(gamma=noise * factor)), epsilon(LaplaceNoise(gamma=noise))
        )
        assert not_below(
            epsilon(GaussianNoise(sigma=10 * noise)),
            epsilon(GaussianNoise(sigma=10 * noise * factor)),
        )


@PROPERTY
@given(mechanisms, st.integers(1, 200))
def test_server_noise_epsilon_grows_with_the_number_of_partitions(mechanism, n_queries):
    epsilons = [
        server_noise_privacy_bound(
            mechanism=mechanism, n_queries=n_queries, partitions=s, teachers=5, delta=DELTA
        ).epsilon
        for s in (1, 2, 3)
    ]
    assert epsilons[0] <= epsilons[1] <= epsilons[2]
    assert epsilons[0] < epsilons[2]


@PROPERTY
@given(server_runs())
def test_server_noise_data_dependent_epsilon_is_at_most_the_independent_one(run):
    mechanism, counts, partitions = run
    analysis = server_noise_privacy(
        mechanism=mechanism, vote_counts=counts, partitions=partitions, teachers=5, delta=DELTA
    )
    assert analysis.data_dependent.epsilon <= analysis.data_independent.epsilon
    assert analysis.data_dependent.data_dependent and not analysis.data_independent.data_dependent


@PROPERTY
@given(server_runs(), st.data())
def test_server_noise_data_dependent_epsilon_never_decreases_with_more_queries(run, data):
    mechanism, counts, partitions = run
    prefix = data.draw(st.integers(0, len(counts) - 1))

    def epsilon(rows):
        return server_noise_privacy(
            mechanism=mechanism, vote_counts=rows, partitions=partitions, teachers=5, delta=DELTA
        ).data_dependent.epsilon

    assert epsilon(counts) >= epsilon(counts[:prefix])


@PROPERTY
@given(party_runs())
def test_party_noise_data_dependent_epsilon_is_at_most_the_independent_one(run):
    mechanism, parties, partitions, teachers = run
    analysis = party_noise_privacy(
        mechanism=mechanism,
        party_vote_counts=parties,
        partitions=partitions,
        teachers=teachers,
        delta=DELTA,
    )
    assert analysis.data_dependent.epsilon <= analysis.data_independent.epsilon
    assert analysis.data_dependent.unit == analysis.data_independent.unit == "example-level"


@PROPERTY
@given(party_runs())
def test_party_noise_data_dependent_epsilon_never_decreases_with_more_queries(run):
    mechanism, parties, partitions, teachers = run
    halved = [[counts[: len(counts) // 2] for counts in party] for party in parties]

    def epsilon(counts):
        return party_noise_privacy(
            mechanism=mechanism,
            party_vote_counts=counts,
            partitions=partitions,
            teachers=teachers,
            delta=DELTA,
        ).data_dependent.epsilon

    assert epsilon(parties) >= epsilon(halved)
