"""Fusion algorithms of the pure core. Importing the package registers every job kind in
:mod:`workers.algorithms.registry` ("fedkt" in :mod:`workers.algorithms.fedkt_fusion`,
"ensemble" and "distill" in :mod:`workers.algorithms.ensemble_fusion`, "cpfl" in :mod:`workers.algorithms.cohort_fusion`, "stack" in
:mod:`workers.algorithms.stack_fusion`), in the order the
launcher offers them (FedKT, the paper's, first)."""

# isort: off
from workers.algorithms import fedkt_fusion  # noqa: F401  (registers the job kinds)
from workers.algorithms import ensemble_fusion  # noqa: F401
from workers.algorithms import cohort_fusion  # noqa: F401
from workers.algorithms import stack_fusion  # noqa: F401

# isort: on
from workers.algorithms.registry import algorithm_get, kind_choices

__all__ = ["algorithm_get", "kind_choices"]
