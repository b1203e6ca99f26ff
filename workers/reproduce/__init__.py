"""Reproduction of the papers' experiments on the real data of ``make data`` (``var/data``; ``workers/data_files.py``)
(``python -m workers.reproduce fedkt --dataset adult``); results go to ``docs/results/``."""
