"""What a silo's L2 (party-side, example-level) privacy declaration implies: the one reading of a
submission's ``privacy_parameters``, shared by the market's check at upload, the budget's charge and
the silo toolkit.

Two kinds of party-side noise are declared:

* **FedKT vote noise** (Li, He, Song, FedKT, Section 4, L2): Laplace (``gamma``) or Gaussian
  (``sigma``) noise on the party's teachers' votes, with ``delta``, ``partitions``, ``teachers``
  and ``queries`` (:func:`workers.privacy.accounting.party_noise_privacy_bound`);
* **DP-SGD** (``"mechanism": "dp_sgd"``): a network trained with Opacus
  (:mod:`workers.privacy.dp_sgd`), accounted with the market's RDP accountant.

Both give a data-independent report and its Rényi curve at
:data:`~workers.privacy.rdp.RENYI_ORDERS`, so an accepted declaration composes with the silo's
other costs (:func:`workers.privacy.costs.declared_cost`).
"""

from __future__ import annotations

import numpy as np

from workers.privacy.accounting import party_noise_privacy_bound
from workers.privacy.dp_sgd import DpSgdParameters, dp_sgd_privacy_bound, dp_sgd_rdp
from workers.privacy.mechanisms import GaussianNoise, LaplaceNoise
from workers.privacy.rdp import RENYI_ORDERS
from workers.privacy.reports import DP_SGD_MECHANISM, PrivacyReport
from workers.privacy.settings import noise_mechanism

FEDKT_PARAMETER_NAMES = ("delta", "partitions", "teachers", "queries")


def is_dp_sgd(privacy_parameters: dict) -> bool:
    """Whether a declaration is of DP-SGD training (else of FedKT vote noise)."""
    return privacy_parameters.get("mechanism") == DP_SGD_MECHANISM


def party_side_bound(
    privacy_parameters: dict, *, n_local_examples: int
) -> tuple[PrivacyReport, np.ndarray]:
    """The data-independent example-level (ε, δ) a declaration implies, and its Rényi curve.

    Parameters
    ----------
    privacy_parameters : dict
        FedKT vote noise ``{"gamma" or "sigma", "delta", "partitions", "teachers", "queries"}``, or
        DP-SGD ``{"mechanism": "dp_sgd", "accountant": "rdp", "noise_multiplier", "max_grad_norm",
        "batch_size", "epochs", "delta"}``.
    n_local_examples : int
        The examples the silo trained on (DP-SGD's n: its sample rate is 1/⌈n/B⌉).

    Returns
    -------
    (PrivacyReport, numpy.ndarray)

    Raises
    ------
    ValueError
        With a sentence naming what is missing or wrong.
    """
    if is_dp_sgd(privacy_parameters):
        return dp_sgd_privacy_bound(
            DpSgdParameters.from_declaration(privacy_parameters, n_examples=n_local_examples)
        )
    report = _fedkt_party_noise_bound(privacy_parameters)
    return report, party_side_rdp(report)


def _fedkt_party_noise_bound(privacy_parameters: dict) -> PrivacyReport:
    missing = [name for name in FEDKT_PARAMETER_NAMES if name not in privacy_parameters]
    noise_parameters = [name for name in ("gamma", "sigma") if name in privacy_parameters]
    if missing or len(noise_parameters) != 1:
        raise ValueError(
            "L2 privacy parameters must include 'delta', 'partitions', 'teachers', 'queries' (public "
            "examples labelled per partition) and one noise parameter: 'gamma' (Laplace) or "
            "'sigma' (Gaussian); or, for a network trained with DP-SGD, 'mechanism': 'dp_sgd', "
            "'accountant': 'rdp', 'noise_multiplier', 'max_grad_norm', 'batch_size', 'epochs' and "
            "'delta'."
        )
    try:
        noise = (
            LaplaceNoise(gamma=privacy_parameters["gamma"])
            if noise_parameters == ["gamma"]
            else GaussianNoise(sigma=privacy_parameters["sigma"])
        )
        return party_noise_privacy_bound(
            mechanism=noise,
            n_queries=privacy_parameters["queries"],
            partitions=privacy_parameters["partitions"],
            teachers=privacy_parameters["teachers"],
            delta=privacy_parameters["delta"],
        )
    except TypeError as error:
        raise ValueError(str(error)) from error


def party_side_rdp(report: PrivacyReport) -> np.ndarray:
    """The Rényi curve at :data:`RENYI_ORDERS` of a stored party-side report (FedKT vote noise or DP-SGD)."""
    if report.mechanism == DP_SGD_MECHANISM:
        if report.sigma is None or report.sample_rate is None:
            raise ValueError(
                "A DP-SGD report must carry its noise multiplier (sigma) and sample rate."
            )
        return dp_sgd_rdp(
            noise_multiplier=report.sigma, sample_rate=report.sample_rate, steps=report.n_queries
        )
    noise = noise_mechanism(mechanism=report.mechanism, gamma=report.gamma, sigma=report.sigma)
    return report.n_queries * noise.query_rdp(
        RENYI_ORDERS, vote_shift=1
    )  # n_queries counts q·s already


__all__ = ["FEDKT_PARAMETER_NAMES", "is_dp_sgd", "party_side_bound", "party_side_rdp"]
