"""Record-level L1 (issue 40, item 2): GNMax over every student of every silo, each student fitted on a disjoint
partition of its silo's rows. One record moves one vote: the histogram's L2 sensitivity is √2 per query, charged
example-level, never composed into a party-level claim."""

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant
from sklearn.datasets import make_classification

import workers.algorithms  # noqa: F401  (registers the engines)
from workers.algorithms.fedkt import disjoint_partition_students
from workers.algorithms.registry import Member, algorithm_get
from workers.privacy import GaussianNoise
from workers.privacy.costs import compose_costs, fedkt_l1_cost
from workers.privacy.reports import EXAMPLE_LEVEL, PARTY_LEVEL
from workers.privacy.settings import PrivacySettings, privacy_unit

DELTA = 1e-5
TREE = {"family": "decision_tree", "max_depth": 4}
RECORD = {"partitions": 4, "privacy": {"unit": "record"}}


def dp_accounting_epsilon(*, sigma: float, n_queries: int, l2_sensitivity: float) -> float:
    accountant = RdpAccountant()
    accountant.compose(
        SelfComposedDpEvent(GaussianDpEvent(noise_multiplier=sigma / l2_sensitivity), n_queries)
    )
    return accountant.get_epsilon(DELTA)


def student_votes(features, labels, public, *, partitions: int) -> np.ndarray:
    """The record-level vote histogram (n_public, 2) of one silo's disjoint-partition students."""
    students = disjoint_partition_students(
        features, labels, n_classes=2, learner=TREE, partitions=partitions, seed=3
    )
    predictions = np.stack([student.predict(public) for student in students])
    return np.stack([(predictions == label).sum(axis=0) for label in (0, 1)], axis=1)


def test_one_changed_record_moves_the_histogram_by_at_most_root_two_on_every_query():
    features, labels = make_classification(n_samples=400, n_features=6, random_state=0)
    public = make_classification(n_samples=300, n_features=6, random_state=1)[0]
    before = student_votes(features, labels, public, partitions=4)
    changed = 0
    for record in range(0, 400, 37):  # replace one record at a time: its features and its label
        neighbour_x, neighbour_y = features.copy(), labels.copy()
        neighbour_x[record], neighbour_y[record] = -5 * features[record], 1 - labels[record]
        after = student_votes(neighbour_x, neighbour_y, public, partitions=4)
        shift = np.linalg.norm(after - before, axis=1)
        assert shift.max() <= np.sqrt(2) + 1e-12
        assert np.abs(after - before).sum(axis=1).max() <= 2  # one vote leaves a class for another
        changed += int(shift.max() > 0)
    assert changed > 0  # the neighbours do move some votes: the bound is met, not vacuous


def test_the_students_partitions_are_disjoint_and_cover_every_row():
    features, labels = make_classification(n_samples=103, n_features=4, random_state=0)
    students = disjoint_partition_students(
        features, labels, n_classes=2, learner=TREE, partitions=4, seed=0
    )
    assert len(students) == 4
    with pytest.raises(ValueError, match="cannot fit 5 students on disjoint partitions"):
        disjoint_partition_students(
            features[:4], labels[:4], n_classes=2, learner=TREE, partitions=5, seed=0
        )


@pytest.mark.parametrize(("sigma", "n_queries"), [(25.0, 270), (50.0, 1000), (8.0, 20)])
def test_the_record_level_price_agrees_with_dp_accounting_at_sensitivity_root_two(sigma, n_queries):
    engine = algorithm_get("fedkt")
    settings = engine.validate(RECORD)
    cost = engine.l1_cost(
        settings,
        privacy=PrivacySettings(
            mechanism="gaussian", sigma=sigma, delta=DELTA, n_queries=n_queries
        ),
    )
    expected = dp_accounting_epsilon(sigma=sigma, n_queries=n_queries, l2_sensitivity=np.sqrt(2))
    assert cost.report.epsilon == pytest.approx(expected, rel=1e-3)  # the order grids differ
    assert (cost.report.unit, cost.report.vote_shift, cost.report.partitions) == (
        EXAMPLE_LEVEL,
        1,
        4,
    )
    party = engine.l1_cost(
        engine.validate({"partitions": 4}),
        privacy=PrivacySettings(
            mechanism="gaussian", sigma=sigma, delta=DELTA, n_queries=n_queries
        ),
    )
    # the party-level price of the same noise: sensitivity √2·s, s = 4
    assert party.report.epsilon == pytest.approx(
        dp_accounting_epsilon(sigma=sigma, n_queries=n_queries, l2_sensitivity=4 * np.sqrt(2)),
        rel=1e-3,
    )
    assert party.report.unit == PARTY_LEVEL and party.report.epsilon > cost.report.epsilon


def test_a_silo_with_two_submissions_is_charged_for_two_votes():
    engine = algorithm_get("fedkt")
    settings = engine.validate(RECORD)
    privacy = PrivacySettings(mechanism="gaussian", sigma=20.0, delta=DELTA, n_queries=100)
    two = engine.l1_cost(settings, privacy=privacy, vote_shift=2)
    assert two.report.epsilon == pytest.approx(
        dp_accounting_epsilon(sigma=20.0, n_queries=100, l2_sensitivity=2 * np.sqrt(2)), rel=1e-3
    )


def test_a_record_level_cost_never_makes_a_ledger_claim_a_party_level_guarantee():
    party = fedkt_l1_cost(
        mechanism="gaussian", gamma=None, sigma=20.0, delta=DELTA, n_queries=50, partitions=2
    )
    record = fedkt_l1_cost(
        mechanism="gaussian",
        gamma=None,
        sigma=20.0,
        delta=DELTA,
        n_queries=50,
        partitions=2,
        vote_shift=1,
        unit=EXAMPLE_LEVEL,
    )
    assert compose_costs([party], delta=DELTA).unit == PARTY_LEVEL
    assert compose_costs([record], delta=DELTA).unit == EXAMPLE_LEVEL
    both = compose_costs([party, party, record], delta=DELTA)
    assert both.unit == EXAMPLE_LEVEL
    assert both.epsilon > compose_costs([party, party], delta=DELTA).epsilon


def test_the_unit_is_read_from_a_job_or_a_report_and_anything_else_is_refused():
    assert privacy_unit(None) == "party"
    assert privacy_unit({"unit": "record"}) == "record"
    assert privacy_unit({"unit": EXAMPLE_LEVEL}) == "record"
    assert PrivacySettings.of(
        {"mechanism": "gaussian", "sigma": 3.0, "delta": DELTA, "n_queries": 5, "unit": PARTY_LEVEL}
    ).as_dict() == {
        "mechanism": "gaussian",
        "gamma": None,
        "sigma": 3.0,
        "delta": DELTA,
        "n_queries": 5,
    }
    with pytest.raises(ValueError, match=r"'privacy.unit' must be one of 'party', 'record'"):
        privacy_unit({"unit": "silo"})
    resolved = PrivacySettings.resolved(
        {"unit": "record", "sigma": 4.0}, defaults={}, default_delta=DELTA, n_queries=9
    )
    assert resolved.as_dict()["unit"] == "record" and resolved.unit_label == EXAMPLE_LEVEL


def test_the_kind_refuses_a_record_level_job_with_another_vote_or_undeclared_partitions():
    engine = algorithm_get("fedkt")
    with pytest.raises(ValueError, match="takes the paper's vote only"):
        engine.validate({**RECORD, "vote": "class_weighted"})
    with pytest.raises(ValueError, match="'privacy.unit' must be one of"):
        engine.validate({"privacy": {"unit": "everyone"}})
    members = [
        Member(key="7", organisation="1", n_examples=50, validation_score=0.8, n_models=4),
        Member(
            key="8",
            organisation="2",
            n_examples=50,
            validation_score=0.8,
            n_models=4,
            disjoint_partitions=True,
        ),
    ]
    with pytest.raises(ValueError, match=r"submission\(s\) #7 do not declare it"):
        engine.select(members, RECORD, seed=0)
    assert engine.select(members[1:], RECORD, seed=0) == [0]
    assert engine.select(members, {"partitions": 4}, seed=0) == [
        0,
        1,
    ]  # party level needs no declaration
    settings = engine.validate(RECORD)
    assert (engine.votes_per_submission(settings), engine.votes_cast_per_submission(settings)) == (
        1,
        4,
    )


def test_a_record_level_fusion_counts_every_students_vote_and_reports_example_level():
    engine = algorithm_get("fedkt")
    member = Member(
        key="1",
        organisation="1",
        n_examples=9,
        validation_score=0.8,
        n_models=4,
        disjoint_partitions=True,
    )
    # 4 students, 3 public rows: class 1 probabilities
    class_one = np.array([[0.9, 0.2, 0.6], [0.8, 0.3, 0.4], [0.1, 0.1, 0.7], [0.7, 0.4, 0.9]])
    probabilities = np.stack([1 - class_one, class_one], axis=2)
    signal = engine.member_signal(probabilities, member=member, n_classes=2, params=RECORD)
    assert signal.tolist() == [[1, 3], [4, 0], [1, 3]]  # votes, not consistent votes
    consistent = engine.member_signal(
        probabilities, member=member, n_classes=2, params={"partitions": 4}
    )
    assert consistent.tolist() == [[0, 0], [4, 0], [0, 0]]
    rng = np.random.default_rng(0)
    public = rng.normal(size=(40, 3))
    votes = np.stack([np.full(40, 10), np.full(40, 30)], axis=1)
    votes[:20] = votes[:20, ::-1]
    members = [
        member,
        Member(**{**member.__dict__, "key": "2"}),
        Member(**{**member.__dict__, "key": "3", "organisation": "2"}),
    ]
    fusion = engine.fuse(
        votes,
        public,
        members=members,
        n_classes=2,
        params={**RECORD, "query_count": 40, "final_model": {"family": "logistic_regression"}},
        noise=GaussianNoise(sigma=5.0),
        seed=0,
    )
    report = fusion.privacy.data_independent
    assert (report.unit, report.vote_shift, report.n_queries) == (EXAMPLE_LEVEL, 2, 40)
    assert fusion.privacy.data_dependent.unit == EXAMPLE_LEVEL
    assert report.epsilon == pytest.approx(
        dp_accounting_epsilon(sigma=5.0, n_queries=40, l2_sensitivity=2 * np.sqrt(2)), rel=1e-3
    )
