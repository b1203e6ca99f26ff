"""Fusion algorithms of the pure core. Importing the package registers every job kind in
:mod:`workers.algorithms.registry` (see :mod:`workers.algorithms.fusions`)."""

from workers.algorithms import fusions  # noqa: F401  (registers the job kinds)
