"""ε in words: the plain-language scale the market's pages print beside every ε a buyer or a prospective member
reads (docs/budgets.md, "ε in words", explains it once).

The scale reads ε as what it bounds: an observer's odds about any one protected row (or silo, as the unit says)
change by at most a factor e^ε (Dwork & Roth 2014, "The Algorithmic Foundations of Differential Privacy",
Definition 2.4 and §2.3's odds reading). At ε = 1 that factor is 2.7, at 5 it is 148, at 10 it is 22,026.
"""

import math

#: (largest ε, words): the first bound ε does not exceed names its protection.
PROTECTION_SCALE = (
    (1.0, "strong protection"),
    (5.0, "moderate protection"),
    (10.0, "weak protection"),
)
BEYOND_SCALE = "little protection"


def protection_words(epsilon: float) -> str:
    """The scale's words for a privacy loss ``epsilon`` (ε ≥ 0, in nats, as every ε of the market).

    Parameters
    ----------
    epsilon : float
        The (ε, δ)-DP guarantee's ε; ``inf`` (no noise, level L0) reads "no formal protection".

    Returns
    -------
    str
        "strong protection" for ε ≤ 1, "moderate protection" for ε ≤ 5, "weak protection" for ε ≤ 10,
        "little protection" above, "no formal protection" for an infinite ε.
    """
    if epsilon < 0 or math.isnan(epsilon):
        raise ValueError(f"ε must be a non-negative number, not {epsilon!r}.")
    if math.isinf(epsilon):
        return "no formal protection"
    return next((words for bound, words in PROTECTION_SCALE if epsilon <= bound), BEYOND_SCALE)
