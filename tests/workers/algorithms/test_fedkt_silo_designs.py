"""Issue 45 item 3: every silo design the toolkit produces fuses in every FedKT job it is allowed in. The toolkit
picks s = 1 for a small silo (one teacher) and s = 2 otherwise, t up to its default, and a silo may choose s
itself; a FedKT job with s takes submissions of 1 to s students. Mixed designs vote together at L0 and at L1,
where every silo is charged at the job's s (never under-charged), and the final model answers every class even
when no released label names one."""

import itertools

import numpy as np
import pytest

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.registry import Member, algorithm_get
from workers.privacy.accounting import server_noise_privacy_bound
from workers.privacy.mechanisms import GaussianNoise, LaplaceNoise
from workers.silo.training import DEFAULT_TEACHERS, TrainingSettings, fedkt_design

N_CLASSES = 3


def _toolkit_designs() -> set[tuple[int, int]]:
    """The (s, t) the toolkit chooses over silo sizes from its smallest to large, plus the s a silo may name."""
    chosen = {
        fedkt_design(n_rows, TrainingSettings()) for n_rows in (5, 12, 25, 40, 1_000, 100_000)
    }
    named = {(partitions, DEFAULT_TEACHERS) for partitions in (1, 2, 3, 4)}
    return chosen | named


def _fused(designs, *, job_partitions: int, noise, rows: int = 60):
    rng = np.random.default_rng(job_partitions)
    public_x = rng.normal(size=(rows, 3))
    truth = np.digitize(public_x[:, 0], [-0.4, 0.4])  # three classes
    members = [
        Member(
            key=str(index),
            organisation=f"silo-{index}",
            n_examples=100,
            validation_score=0.8,
            n_models=partitions,
            teachers=teachers,
        )
        for index, (partitions, teachers) in enumerate(designs)
    ]
    fedkt = algorithm_get("fedkt")
    params = {
        "partitions": job_partitions,
        "final_model": {"family": "logistic_regression"},
        "vote": "consistent_hard",
        "privacy": {"delta": 1e-5},
    }
    signal = sum(
        fedkt.member_signal(
            np.stack([np.eye(N_CLASSES)[truth]] * member.n_models),
            member=member,
            n_classes=N_CLASSES,
            params=params,
        )
        for member in members
    )
    assert fedkt.select(members, params, seed=0) == list(range(len(members)))
    return fedkt.fuse(
        signal, public_x, members=members, n_classes=N_CLASSES, params=params, noise=noise, seed=0
    )


def test_the_toolkit_produces_small_and_large_designs():
    designs = _toolkit_designs()
    assert (1, 1) in designs and any(partitions == 2 for partitions, _ in designs)


@pytest.mark.parametrize("noise", [None, LaplaceNoise(gamma=0.1), GaussianNoise(sigma=4.0)])
def test_every_mix_of_toolkit_designs_fuses_and_is_charged_at_the_jobs_s(noise):
    designs = sorted(_toolkit_designs())
    for mix in itertools.combinations(designs, 2):
        job_partitions = max(partitions for partitions, _ in mix)
        fusion = _fused(mix, job_partitions=job_partitions, noise=noise)
        probabilities = fusion.model.predict_proba(np.zeros((1, 3)))
        assert probabilities.shape == (1, N_CLASSES), mix
        if noise is None:
            assert fusion.privacy is None
            continue
        # one submission per silo: each moves s of the job's votes, whatever it holds
        assert fusion.privacy.data_independent == server_noise_privacy_bound(
            mechanism=noise,
            n_queries=60,
            partitions=job_partitions,
            teachers=fusion.privacy.data_independent.teachers,
            delta=1e-5,
            vote_shift=job_partitions,
        ), mix
        assert fusion.privacy.data_dependent.epsilon <= fusion.privacy.data_independent.epsilon


def test_a_final_model_whose_labels_miss_a_class_still_answers_every_class_and_exports():
    """10 queried rows of a 3-class task that all vote one class: the model is anchored on the others
    (workers.algorithms.transfer.with_every_class) instead of failing the export after the noise was drawn."""
    from workers.jobs.export import export_global_model

    fusion = _fused([(2, 5), (1, 1)], job_partitions=2, noise=None, rows=10)
    assert fusion.details["unlabelled_classes"]  # the ten rows lie in fewer than three classes
    files = export_global_model(fusion.model, n_features=3, n_classes=N_CLASSES)
    assert files
    assert fusion.model.predict_proba(np.zeros((2, 3))).shape == (2, N_CLASSES)
