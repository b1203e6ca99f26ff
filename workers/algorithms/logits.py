"""Logits taken of probabilities, as the distillations take them (numpy only: no torch)."""

#: The smallest probability a logit is taken of (cohort and neural distillation alike): log(1e-8) ≈ -18.4.
PROBABILITY_FLOOR = 1e-8

__all__ = ["PROBABILITY_FLOOR"]
