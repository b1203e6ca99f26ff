"""Reproduction of the papers' experiments on the real data of ``../shared/data``
(``python -m workers.reproduce fedkt --dataset adult``); results go to ``docs/results/``."""
