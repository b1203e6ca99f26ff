"""The toolkit's training defaults, one owner for ``train``'s options, its ``--help`` and the metadata it writes.

Plain values with no imports, so that ``onefold --help`` works with the client's ``requests`` alone; the
learners they name are built by :mod:`workers.silo.training` (``pip install 'onefold-toolkit[train]'``).
"""

from __future__ import annotations

#: FedKT's design when the silo does not choose it (workers.silo.training.fedkt_design): s partitions of t teachers
#: each, fewer teachers for a silo too small to give each of them MIN_ROWS_PER_TEACHER rows.
DEFAULT_PARTITIONS = 2
DEFAULT_TEACHERS = 5
MIN_ROWS_PER_TEACHER = 10
#: A silo with fewer training rows than MIN_ROWS_PER_TEACHER still trains, with s = t = 1 (one teacher on all its
#: rows), down to this many rows; below it there is nothing to learn from.
MIN_TRAINING_ROWS = 5
#: The toolkit's default learners, chosen on training and validation data only (docs/results/defaults.md):
#: single depth-6 trees as teachers keep a skewed party's minority-class votes that forests drown.
DEFAULT_TEACHER = {"family": "decision_tree", "max_depth": 6}
#: Students are forests of 25 depth-6 trees: on Adult's validation rows 10, 25, 50 and 100 trees score
#: 83.65, 83.62, 83.63 and 83.69 % (3 seeds, sd ≈ 0.4) at a quarter of the 100-tree work (benchmarks/engine.md).
DEFAULT_STUDENT = {"family": "random_forest", "n_estimators": 25, "max_depth": 6}
#: The silo's own model on all its training rows (issue 31: its best model, what it could sell alone), uploaded
#: beside its students where the federation accepts own models. Chosen on the tabular suite's validation rows
#: (benchmarks/own_model_defaults.md): its best silo scores 0.807 balanced accuracy (XGBoost 0.806, logistic
#: regression 0.764) and its mean silo 0.616 (0.620, 0.622); depth 12 scores as unlimited depth (0.807, 0.616) at a
#: quarter of the file on a 10,000-row silo (3.1 against 11.8 MB).
DEFAULT_OWN_MODEL = {"family": "random_forest", "n_estimators": 100, "max_depth": 12}


def learner_described(learner: dict) -> str:
    """``{"family": "random_forest", "n_estimators": 25}`` → ``"random_forest (n_estimators=25)"``."""
    settings = ", ".join(f"{name}={value}" for name, value in learner.items() if name != "family")
    return f"{learner['family']} ({settings})" if settings else learner["family"]


__all__ = [
    "DEFAULT_OWN_MODEL",
    "DEFAULT_PARTITIONS",
    "DEFAULT_STUDENT",
    "DEFAULT_TEACHER",
    "DEFAULT_TEACHERS",
    "MIN_ROWS_PER_TEACHER",
    "MIN_TRAINING_ROWS",
    "learner_described",
]
