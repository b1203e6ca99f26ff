"""The skops file of a fitted scikit-learn model (what a buyer loads with ``skops.io.load`` in Python).

The server only writes skops files; it never loads one. Importing ``skops.io`` builds its default list of trusted
types for *loading*, and to name every scikit-learn estimator it calls ``sklearn.utils.all_estimators``, which
imports every scikit-learn module (and torch through scikit-learn's array-API shim): 1.5 s on an idle machine and
minutes on a loaded one, in a worker child that only wants to write a file. :func:`skops_io` imports ``skops.io``
with that list built from :data:`EXPORTED_ESTIMATORS` instead. Writing does not read the list, so the file is the
same; a buyer's own ``skops.io.load`` builds its own list in the buyer's process.
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType

_import_lock = threading.Lock()


def exported_estimators() -> list[tuple[str, type]]:
    """``(name, class)`` of the scikit-learn classifiers the market exports, in ``all_estimators``' shape: the
    learners' families (:data:`workers.learners.LEARNER_FAMILIES`) that scikit-learn fits."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier

    return [
        (estimator.__name__, estimator)
        for estimator in (DecisionTreeClassifier, LogisticRegression, RandomForestClassifier)
    ]


def skops_io() -> ModuleType:
    """``skops.io``, imported (once per process) without walking every scikit-learn module: while it is imported,
    ``sklearn.utils.all_estimators`` answers :func:`exported_estimators`."""
    import sklearn.utils

    with _import_lock:  # also keeps a second thread from seeing a half-imported skops.io
        if "skops.io" in sys.modules:
            return sys.modules["skops.io"]
        walking = sklearn.utils.all_estimators
        sklearn.utils.all_estimators = lambda type_filter=None: exported_estimators()
        try:
            import skops.io
        finally:
            sklearn.utils.all_estimators = walking
    return skops.io


def skops_file(estimator) -> bytes:
    """The skops bytes of a fitted scikit-learn estimator (``skops.io.dumps``)."""
    return skops_io().dumps(estimator)
