"""An L1 FedKT fusion reports the privacy of the silo whose submissions move the most votes."""

import numpy as np

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.registry import Member, algorithm_get
from workers.privacy.accounting import server_noise_privacy_bound
from workers.privacy.mechanisms import LaplaceNoise


def test_a_silo_with_two_submissions_sets_the_jobs_vote_shift_to_twice_s():
    rng = np.random.default_rng(0)
    public_x = rng.normal(size=(40, 3))
    truth = (public_x[:, 0] > 0).astype(int)
    probabilities = np.stack(
        [np.eye(2)[truth]] * 2
    )  # both students of every member predict the truth
    members = [
        Member(key=key, organisation=organisation, n_examples=100, validation_score=0.8, n_models=2)
        for key, organisation in (("1", "north"), ("2", "north"), ("3", "south"))
    ]
    fedkt = algorithm_get("fedkt")
    params = {
        "partitions": 2,
        "teachers": 5,
        "privacy": {"delta": 1e-5},
        "final_model": {"family": "logistic_regression"},
    }
    signal = sum(
        fedkt.member_signal(probabilities, member=member, n_classes=2, params=params)
        for member in members
    )
    fusion = fedkt.fuse(
        signal,
        public_x,
        members=members,
        n_classes=2,
        params=params,
        noise=LaplaceNoise(gamma=0.1),
        seed=0,
    )
    # "north" holds two submissions of s = 2 students: 4 votes per row move with its data.
    assert fusion.privacy.data_independent == server_noise_privacy_bound(
        mechanism=LaplaceNoise(gamma=0.1),
        n_queries=40,
        partitions=2,
        teachers=5,
        delta=1e-5,
        vote_shift=4,
    )
    assert fusion.privacy.data_dependent.vote_shift == 4
