"""The parameter schema of the job kinds: every hyperparameter a job takes, with its type, range and
default, and the work a job's settings imply. The engines of :mod:`workers.algorithms.fedkt_fusion`, :mod:`workers.algorithms.ensemble_fusion` and
:mod:`workers.algorithms.cohort_fusion` build their ``validate`` from these checks, so the API, the
launcher and the runner read one definition (the engine registry owns a job kind).

Every check returns the validated value or raises ``ValueError`` with a sentence naming the key and
what to write instead. Ranges are wide enough for every experiment of the papers and narrow enough
that no single value can hold a worker for hours (``n_estimators = 10¹²`` is refused here; what the
values imply together is bounded by :func:`learner_work` against the market's work limit).

Queried public rows are stated by meaning, never by the type of a JSON number (a page that re-serialises
``1.0`` writes ``1``): ``query_fraction`` (0 < f ≤ 1 of the public rows) or ``query_count`` (a whole
number of rows). The old ``query`` (and ``proxy``) key is read only where its meaning is unambiguous.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, overload

import numpy as np

from workers.modelio.families import NETWORK_FAMILIES, feature_view_for
from workers.views import ONE_HOT_VIEW

MAX_QUERY_COUNT = 10_000_000
#: The fewest queried public rows a global model is trained on (and never fewer than the classes).
MIN_TRAINING_ROWS = 10
#: Every key that names a job's queried public rows: the two :func:`query_setting` writes and the legacy ones it
#: reads where their meaning is unambiguous.
QUERY_KEYS = ("query_fraction", "query_count", "query", "proxy")
QUERY_HELP = (
    'Public rows the server queries: "query_fraction" (0 < f ≤ 1 of the public data, 1 = all rows) '
    'or "query_count" (a whole number of rows, e.g. 500).'
)


def finite_number(value) -> bool:
    """A number (not a boolean) that a float holds exactly enough: not ±inf, NaN or an integer beyond 1e308."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


@overload
def whole_number(
    value, *, name: str, minimum: int, maximum: int, allow_none: Literal[False] = False
) -> int: ...


@overload
def whole_number(
    value, *, name: str, minimum: int, maximum: int, allow_none: bool
) -> int | None: ...


def whole_number(
    value, *, name: str, minimum: int, maximum: int, allow_none: bool = False
) -> int | None:
    """``value`` as an int in [minimum, maximum] (``None`` too where allowed)."""
    if value is None and allow_none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or not minimum <= value <= maximum
    ):
        also = " or null" if allow_none else ""
        raise ValueError(
            f"'{name}' must be a whole number from {minimum} to {maximum}{also}, not {value!r}."
        )
    return int(value)


def real_number(
    value, *, name: str, minimum: float, maximum: float, above_minimum: bool = False
) -> float:
    """``value`` as a finite float in [minimum, maximum], or (minimum, maximum] when ``above_minimum``."""
    valid = (
        finite_number(value)
        and (value > minimum if above_minimum else value >= minimum)
        and value <= maximum
    )
    if not valid:
        low = "(" if above_minimum else "["
        raise ValueError(
            f"'{name}' must be a number in {low}{minimum:g}, {maximum:g}], not {value!r}."
        )
    return float(value)


def one_of(value, *, name: str, choices: tuple):
    """``value`` if it is one of ``choices``."""
    if isinstance(value, (list, dict)) or value not in choices:
        raise ValueError(f"'{name}' must be one of {', '.join(map(repr, choices))}, not {value!r}.")
    return value


def boolean(value, *, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"'{name}' must be true or false, not {value!r}.")
    return value


def sizes(value, *, name: str, length: tuple[int, int], maximum: int) -> list[int]:
    """A list of whole numbers from 1 to ``maximum`` whose length lies in ``length``."""
    if not isinstance(value, (list, tuple)) or not length[0] <= len(value) <= length[1]:
        raise ValueError(
            f"'{name}' must be a list of {length[0]} to {length[1]} whole numbers, not {value!r}."
        )
    return [whole_number(item, name=name, minimum=1, maximum=maximum) for item in value]


def unknown_keys_refused(
    params: Mapping, *, known: tuple[str, ...], what: str, old_names: tuple[str, ...] = ()
) -> None:
    """A ValueError listing the keys of ``params`` that are neither ``known`` nor accepted ``old_names``."""
    unknown = sorted(set(params) - set(known) - set(old_names))
    if unknown:
        raise ValueError(
            f"Unknown parameter(s) for {what}: {', '.join(unknown)}. Known: {', '.join(known)}."
        )


# --- queried public rows -------------------------------------------------------------------------------------


def query_setting(
    params: Mapping, *, legacy: tuple[str, ...] = ("query",), default: dict | None = None
) -> dict:
    """``{"query_fraction": float}`` or ``{"query_count": int}`` from ``params`` (``default`` when none is given).

    A legacy key (``query``, ``proxy``) is read as a count when it is a whole number ≥ 2 and as a fraction
    when it lies strictly between 0 and 1; ``1`` and ``1.0`` are refused, because JSON tools turn one into
    the other and they mean one row or every row.
    """
    given = [key for key in ("query_fraction", "query_count", *legacy) if key in params]
    if len(given) > 1:
        raise ValueError(f"Give one of {', '.join(given)}, not several. {QUERY_HELP}")
    if not given:
        return dict(default or {"query_fraction": 1.0})
    key, value = given[0], params[given[0]]
    if key == "query_fraction":
        return {
            "query_fraction": real_number(
                value, name=key, minimum=0.0, maximum=1.0, above_minimum=True
            )
        }
    if key == "query_count":
        return {"query_count": whole_number(value, name=key, minimum=1, maximum=MAX_QUERY_COUNT)}
    return _legacy_query(key, value)


def _legacy_query(key: str, value) -> dict:
    if not finite_number(value):
        raise ValueError(f"'{key}' must be a count or a fraction, not {value!r}. {QUERY_HELP}")
    if value == 1:
        raise ValueError(
            f"'{key}': {value!r} is ambiguous (one public row, or all of them?): write "
            '"query_fraction": 1 for every public row or "query_count": 1 for one row.'
        )
    if 0 < value < 1:
        return {"query_fraction": float(value)}
    if isinstance(value, (int, np.integer)) and value >= 2:
        return {"query_count": whole_number(value, name=key, minimum=2, maximum=MAX_QUERY_COUNT)}
    if value > 1 and float(value).is_integer():
        raise ValueError(
            f"'{key}': {value!r} is a count written as a fraction; write \"query_count\": {int(value)}."
        )
    raise ValueError(f"A query fraction must lie in (0, 1], not {value}. {QUERY_HELP}")


def names_query(params: Mapping) -> bool:
    """Whether a job's parameters (as given, or validated) say which public rows it queries."""
    return any(key in params for key in QUERY_KEYS)


def takes_query(keys: tuple[str, ...]) -> bool:
    """Whether a kind with these parameter ``keys`` queries public rows (an ensemble fits nothing and queries none)."""
    return "query_fraction" in keys


def query_defaults(defaults: Mapping, *, keys: tuple[str, ...]) -> dict:
    """The query a federation's default parameters name (its ``query_fraction`` or ``query_count``), for a kind
    with these parameter ``keys`` that takes one; else nothing."""
    if not takes_query(keys):
        return {}
    return {
        key: value for key, value in defaults.items() if key in ("query_fraction", "query_count")
    }


def query_of(rows: int | float) -> dict:
    """A query as a job's parameters write it, the inverse of :func:`query_argument`: a float is a fraction of the
    public rows (``query_fraction``), an int a count of them (``query_count``); checked by :func:`query_setting`."""
    key = "query_count" if isinstance(rows, (int, np.integer)) else "query_fraction"
    return query_setting({key: rows})


def with_query_count(params: Mapping, count: int) -> dict:
    """``params`` querying ``count`` public rows instead of whatever query they named."""
    return {
        **{key: value for key, value in params.items() if key not in QUERY_KEYS},
        "query_count": count,
    }


def query_within(setting: Mapping, *, n_public: int) -> None:
    """A ValueError where a validated query counts more rows than the ``n_public`` rows of the public data."""
    if setting.get("query_count", 0) > n_public:
        raise ValueError(
            f"The server can query 1 to {n_public} public examples (the public data's size), "
            f"not {setting['query_count']}."
        )


def too_few_training_rows(training_rows: int | None, *, n_classes: int) -> str | None:
    """Why a fit on ``training_rows`` queried rows cannot train a model on ``n_classes`` classes (it needs
    :data:`MIN_TRAINING_ROWS` and at least one row per class), or None (``None`` rows: nothing is fitted)."""
    needed = max(MIN_TRAINING_ROWS, n_classes)
    if training_rows is None or training_rows >= needed:
        return None
    return (
        f"These settings query {training_rows} public row(s), too few to train a model "
        f'on {n_classes} classes; query at least {needed} (e.g. "query_count": {needed}, or '
        '"query_fraction": 1 for every row).'
    )


def query_rows(setting: Mapping, *, n_public: int) -> int:
    """How many public rows a :func:`query_setting` means on ``n_public`` rows (as ``select_queries`` draws them)."""
    if "query_fraction" in setting:
        return int(math.ceil(setting["query_fraction"] * n_public))
    return int(setting["query_count"])


def query_argument(setting: Mapping) -> int | float:
    """The ``query`` argument of :func:`workers.algorithms.transfer.select_queries` (a float is a fraction)."""
    return (
        float(setting["query_fraction"])
        if "query_fraction" in setting
        else int(setting["query_count"])
    )


# --- learners ------------------------------------------------------------------------------------------------


def _fraction(name):
    return lambda value: real_number(value, name=name, minimum=0.0, maximum=1.0, above_minimum=True)


def _range(name, low, high, above=False):
    return lambda value: real_number(
        value, name=name, minimum=low, maximum=high, above_minimum=above
    )


def _whole(name, low, high, allow_none=False):
    return lambda value: whole_number(
        value, name=name, minimum=low, maximum=high, allow_none=allow_none
    )


def _choice(name, *choices):
    return lambda value: one_of(value, name=name, choices=choices)


_CLASS_WEIGHT = _choice("class_weight", None, "balanced")
_TORCH = {
    "hidden_sizes": lambda value: sizes(value, name="hidden_sizes", length=(1, 8), maximum=4096),
    "epochs": _whole("epochs", 1, 1000),
    "batch_size": _whole("batch_size", 1, 65_536),
    "learning_rate": _range("learning_rate", 0.0, 1.0, above=True),
    "optimizer": _choice("optimizer", "adam", "sgd"),
    "weight_decay": _range("weight_decay", 0.0, 1.0),
    "device": _choice("device", "auto", "cpu", "cuda"),
}
#: Each learner family's hyperparameters, with their checks (a job may set only these).
LEARNER_HYPERPARAMETERS: dict[str, dict] = {
    "random_forest": {
        "n_estimators": _whole("n_estimators", 1, 1000),
        "max_depth": _whole("max_depth", 1, 64, allow_none=True),
        "min_samples_split": _whole("min_samples_split", 2, 1_000_000),
        "min_samples_leaf": _whole("min_samples_leaf", 1, 1_000_000),
        "max_features": lambda value: (
            value if value in ("sqrt", "log2", None) else _fraction("max_features")(value)
        ),
        "criterion": _choice("criterion", "gini", "entropy", "log_loss"),
        "class_weight": _choice("class_weight", None, "balanced", "balanced_subsample"),
        "bootstrap": lambda value: boolean(value, name="bootstrap"),
    },
    "xgboost": {
        "n_estimators": _whole("n_estimators", 1, 2000),
        "max_depth": _whole("max_depth", 1, 16),
        "learning_rate": _range("learning_rate", 0.0, 1.0, above=True),
        "subsample": _fraction("subsample"),
        "colsample_bytree": _fraction("colsample_bytree"),
        "min_child_weight": _range("min_child_weight", 0.0, 1e6),
        "reg_lambda": _range("reg_lambda", 0.0, 1e6),
        "reg_alpha": _range("reg_alpha", 0.0, 1e6),
        "gamma": _range("gamma", 0.0, 1e6),
        "max_bin": _whole("max_bin", 2, 1024),
    },
    "logistic_regression": {
        "C": _range("C", 0.0, 1e6, above=True),
        "max_iter": _whole("max_iter", 1, 10_000),
        "tol": _range("tol", 0.0, 1.0, above=True),
        "class_weight": _CLASS_WEIGHT,
        "fit_intercept": lambda value: boolean(value, name="fit_intercept"),
    },
    "mlp": _TORCH,
    "cnn": {
        **_TORCH,
        "image_shape": lambda value: sizes(value, name="image_shape", length=(3, 3), maximum=1024),
        "conv_channels": lambda value: sizes(
            value, name="conv_channels", length=(1, 4), maximum=512
        ),
        "kernel_size": _whole("kernel_size", 1, 15),
    },
    "kernel": {
        "gamma": lambda value: (
            value if value == "scale" else _range("gamma", 0.0, 1e6, above=True)(value)
        ),
        "ridge": _range("ridge", 0.0, 1e6),
        "solver": _choice("solver", "auto", "cholesky", "cg"),
    },
}


def learner(value, *, name: str, families: tuple[str, ...]) -> dict:
    """A learner mapping ``{"family": ..., **hyperparameters}`` (a bare family name is accepted) with every
    hyperparameter checked against :data:`LEARNER_HYPERPARAMETERS`."""
    mapping = (
        {"family": value}
        if isinstance(value, str)
        else dict(value)
        if isinstance(value, Mapping)
        else None
    )
    if mapping is None or mapping.get("family") not in families:
        raise ValueError(
            f"'{name}' must be a mapping with a 'family' of {', '.join(families)}, not {value!r}."
        )
    family = mapping.pop("family")
    checks = LEARNER_HYPERPARAMETERS[family]
    unknown_keys_refused(mapping, known=tuple(checks), what=f"the {name} ({family})")
    checked = {"family": family}
    for key, item in mapping.items():
        try:
            checked[key] = checks[key](item)
        except ValueError as error:  # name the key by its full path, as the job's JSON holds it
            raise ValueError(str(error).replace(f"'{key}'", f"'{name}.{key}'", 1)) from error
    return checked


# --- work ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkEstimate:
    """What a job's settings imply before it runs.

    Attributes
    ----------
    training_rows : int or None
        Public rows the global model is fitted on, at most (``None``: nothing is fitted, an ensemble).
    work : float
        Row-passes: each member model predicts every public row once, plus :func:`learner_work` of the fit.
    aggregator_fits : int
        Fits of a stacked aggregator (:mod:`workers.algorithms.stacking`: a logistic regression or the members'
        weights, on the members' probabilities of evaluation rows) at most, on a line of their own and not in
        ``work``: their rows are the evaluation split's, which the estimate is not given.
    """

    training_rows: int | None
    work: float
    aggregator_fits: int = 0


def learner_work(setting: Mapping, *, n_rows: int) -> float:
    """A coarse count of row-passes to fit ``setting`` on ``n_rows`` rows: trees × depth × rows for forests
    and boosting, iterations × rows for logistic regression, epochs × rows × (hidden units / 100) for
    networks, rows² for the kernel student (it solves an n × n system)."""
    family = setting["family"]
    if family == "random_forest":
        return setting.get("n_estimators", 100) * (setting.get("max_depth") or 32) * n_rows
    if family == "xgboost":
        return setting.get("n_estimators", 100) * setting.get("max_depth", 6) * n_rows
    if family == "logistic_regression":
        return setting.get("max_iter", 1000) * n_rows
    if family in NETWORK_FAMILIES:
        units = sum(setting.get("hidden_sizes", (100, 100)))
        return setting.get("epochs", 20) * n_rows * max(1.0, units / 100)
    return float(n_rows) * n_rows


def prediction_work(*, n_public: int, n_member_models: int) -> float:
    """Row-passes of the members' predictions on the public data."""
    return float(n_public) * n_member_models


def fitted_feature_view(settings: Mapping) -> str:
    """The view of the federation's features (:mod:`workers.views`) that the global model of a job with these
    validated ``settings`` is fitted and evaluated on: its learner's (FedKT's ``final_model``, distillation's
    ``student``), ordinal for tree families, else one-hot, as for an ensemble, which fits nothing."""
    learner = settings.get("final_model") or settings.get("student")
    family = learner.get("family") if isinstance(learner, Mapping) else learner
    return feature_view_for(family) if isinstance(family, str) else ONE_HOT_VIEW
