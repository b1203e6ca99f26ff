"""Fusion algorithms of the pure core. Importing the package registers every job kind in
:mod:`workers.algorithms.registry` ("fedkt", "ensemble", "distill" in
:mod:`workers.algorithms.fusions`, "cpfl" in :mod:`workers.algorithms.cohort_fusion`)."""

from workers.algorithms import cohort_fusion, fusions  # noqa: F401  (registers the job kinds)
from workers.algorithms.registry import algorithm_get

__all__ = ["algorithm_get"]
