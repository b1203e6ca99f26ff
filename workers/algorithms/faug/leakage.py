"""FAug's two privacy leakages of the seeds (Jeong et al. 2018, Section 3): what the server learns of a silo's
target labels from its upload, and what the other silos learn of them from the published generator.

They are fractions, not ε: they measure how well the seeds hide *which* labels a silo lacks, not what they say of
any one sample (the DP-SGD generator's ε is :mod:`workers.algorithms.faug.training`'s). numpy only, so the market
shows them without loading torch.
"""

from __future__ import annotations

import numpy as np


def device_server_leakage(n_target: int, n_redundant: int) -> float:
    """The paper's device–server privacy leakage of one silo's seed upload: |target| / (|target| + |redundant|).

    Parameters
    ----------
    n_target : int
        Seed samples of the silo's target labels (what it wants generated), at least 1.
    n_redundant : int
        Samples of other labels uploaded alongside, to hide which labels are targets.

    Returns
    -------
    float in (0, 1]
        1 when only target samples are uploaded (the server learns exactly which labels the silo lacks).
    """
    for name, value, minimum in (("n_target", n_target, 1), ("n_redundant", n_redundant, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"'{name}' must be an integer of at least {minimum}, not {value!r}.")
    return int(n_target) / (int(n_target) + int(n_redundant))


def inter_device_leakage(n_target: int, n_pooled: int) -> float:
    """What another silo learns of one silo's target labels from the published generator: the silo's target seeds
    as a share of every seed the generator was trained on, |target| / Σ over silos (|target| + |redundant|).

    Every member downloads the generator, and the generator can show which labels were among the pooled seeds, not
    who uploaded them. A silo that guesses another's target labels from it, picking one pooled seed at random,
    names one of that silo's targets with this probability. With one silo it equals
    :func:`device_server_leakage`; with N silos uploading alike it is that divided by N. The paper (Section 3)
    defines an inter-device leakage besides the device–server one; its exact formula could not be consulted
    offline, so this is the market's definition, built the same way as the device–server fraction.

    Parameters
    ----------
    n_target : int
        Seed samples of the silo's target labels, at least 1.
    n_pooled : int
        Seed samples of every silo pooled for the generator (this silo's included), at least ``n_target``.

    Returns
    -------
    float in (0, 1]
    """
    for name, value, minimum in (("n_target", n_target, 1), ("n_pooled", n_pooled, n_target)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"'{name}' must be an integer of at least {minimum}, not {value!r}.")
    return int(n_target) / int(n_pooled)
