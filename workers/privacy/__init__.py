"""Differential privacy for FedKT's votes: noise mechanisms and privacy accounting (pure core).

``mechanisms`` adds secure, unseeded OpenDP noise to integer vote counts; ``accounting`` turns
a run's parameters (and its noiseless votes) into labelled (ε, δ) reports; ``rdp`` and
``data_dependent`` hold the underlying Rényi-DP curves; ``settings`` is an L1 job's noise as one type
(:class:`PrivacySettings`), resolved once and read back by its price, its run and its estimate.
"""

from workers.privacy.accounting import (
    PrivacyAnalysis,
    PrivacyReport,
    party_noise_privacy,
    party_noise_privacy_bound,
    party_vote_shifts,
    server_noise_privacy,
    server_noise_privacy_bound,
)
from workers.privacy.mechanisms import GaussianNoise, LaplaceNoise
from workers.privacy.settings import PrivacySettings

__all__ = [
    "GaussianNoise",
    "LaplaceNoise",
    "PrivacyAnalysis",
    "PrivacyReport",
    "PrivacySettings",
    "party_noise_privacy",
    "party_noise_privacy_bound",
    "party_vote_shifts",
    "server_noise_privacy",
    "server_noise_privacy_bound",
]
