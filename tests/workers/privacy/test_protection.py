"""ε in words (workers.privacy.protection): the scale's bounds, hand-checked at and around each edge."""

import math

import pytest

from workers.privacy.protection import protection_words


@pytest.mark.parametrize(
    ("epsilon", "words"),
    [
        (0.0, "strong protection"),
        (1.0, "strong protection"),
        (1.0001, "moderate protection"),
        (2.5, "moderate protection"),
        (5.0, "moderate protection"),
        (5.01, "weak protection"),
        (10.0, "weak protection"),
        (10.5, "little protection"),
        (math.inf, "no formal protection"),
    ],
)
def test_protection_words_read_epsilon_on_the_scale_of_docs_budgets(epsilon, words):
    assert protection_words(epsilon) == words


@pytest.mark.parametrize("epsilon", [-0.1, math.nan])
def test_protection_words_refuse_what_is_not_an_epsilon(epsilon):
    with pytest.raises(ValueError, match="ε must be a non-negative number"):
        protection_words(epsilon)


def test_the_docs_table_is_the_scale():
    from pathlib import Path

    from workers.privacy.protection import BEYOND_SCALE, PROTECTION_SCALE

    budgets = (Path(__file__).resolve().parents[3] / "docs" / "budgets.md").read_text()
    for bound, words in PROTECTION_SCALE:
        assert (
            f"| ≤ {bound:g} | ≤ {math.exp(bound):,.{0 if bound > 1 else 1}f} | {words} |" in budgets
        )
    assert f"| above {PROTECTION_SCALE[-1][0]:g} | more | {BEYOND_SCALE} |" in budgets
