"""Parameters of each job kind: defaults, validation with sentences that say what to fix, and the resolved
privacy parameters of an L1 job (the contract with the budgets app: ``parameters["privacy"]``).

What is stored on the job is the validated dictionary with every default filled in, so a job can be
repeated exactly from its row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from market.errors import InvalidInput
from market.federations.models import Federation, PrivacyLevel

FINAL_MODEL_FAMILIES = ("logistic_regression", "random_forest", "xgboost", "mlp")
DEFAULT_FINAL_MODEL = {"family": "random_forest", "n_estimators": 100, "max_depth": 8}
HELP = {
    "partitions": "s: students per submission (each FedKT submission holds one student per partition).",
    "teachers": "t: teachers per partition the silos trained (enters the privacy analysis).",
    "query": "Public examples the server queries: a count (e.g. 500) or a fraction of the public data (e.g. 0.1).",
    "final_model": 'The global model\'s learner: {"family": one of ' + ", ".join(FINAL_MODEL_FAMILIES)
                   + ", ...hyperparameters}.",
    "selection": 'Ensemble and distillation: which members to use: {"strategy": all | cross_validation | data | random, '
                 '"k": top k or null, "threshold": minimum validation score or examples, or null}.',
    "student": 'Distillation: "kernel" (Guha eq. 3) or {"family": one of ' + ", ".join(FINAL_MODEL_FAMILIES)
               + ', ...}; with "target" soft | argmax, "temperature" and "hard_label_weight".',
    "privacy": 'L1 only: {"mechanism": "laplace" with "gamma" | "gaussian" with "sigma", "delta"}.',
}
KIND_KEYS = {
    "fedkt": ("partitions", "teachers", "query", "final_model", "privacy"),
}
# Kinds whose parameters the engine validates itself (its ``validate`` fills in the defaults, see
# workers/algorithms/fusions.py): they can run as soon as workers.algorithms registers them.
ENGINE_VALIDATED_KINDS = ("ensemble", "distill", "cpfl", "fd")


def _engine_validated(kind: str, given: dict) -> dict:
    from workers.algorithms import registry

    if kind not in registry.ALGORITHMS:
        raise InvalidInput(f"Jobs of kind '{kind}' cannot run yet: its engine is not installed.")
    try:
        return dict(registry.algorithm_get(kind).validate(given))
    except (TypeError, ValueError) as error:
        raise InvalidInput(f"The {kind} parameters are not valid: {error}") from error


def _integer(parameters: Mapping, name: str, *, minimum: int, maximum: int) -> int:
    value = parameters[name]
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InvalidInput(f"'{name}' must be a whole number from {minimum} to {maximum}, not {value!r}. {HELP.get(name, '')}")
    return value


def _query(value, *, n_public: int) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"'query' must be a count or a fraction, not {value!r}. {HELP['query']}")
    if isinstance(value, float) and not 0.0 < value <= 1.0:
        raise InvalidInput(f"A query fraction must lie in (0, 1], not {value}. {HELP['query']}")
    if isinstance(value, int) and not 1 <= value <= n_public:
        raise InvalidInput(f"The server can query 1 to {n_public} public examples (the public data's size), not {value}.")
    return value


def resolved_query_count(query: int | float, *, n_public: int) -> int:
    """How many public rows a query setting means (the same rule as ``workers.algorithms.transfer.select_queries``)."""
    return int(math.ceil(query * n_public)) if isinstance(query, float) else int(query)


def _final_model(value) -> dict:
    if not isinstance(value, Mapping) or value.get("family") not in FINAL_MODEL_FAMILIES:
        raise InvalidInput(f"'final_model' is not valid: {value!r}. {HELP['final_model']}")
    from workers.learners import make_learner

    try:
        make_learner(dict(value))
    except (TypeError, ValueError) as error:
        raise InvalidInput(f"The final model's hyperparameters are not valid: {error}") from error
    return dict(value)


def _privacy(value, *, federation: Federation, n_queries: int) -> dict:
    defaults = federation.default_parameters or {}
    value = dict(value or {})
    mechanism = value.get("mechanism", "gaussian" if "sigma" in value else "laplace")
    if mechanism not in ("laplace", "gaussian"):
        raise InvalidInput(f"The noise mechanism must be 'laplace' or 'gaussian', not {mechanism!r}.")
    noise_name = "gamma" if mechanism == "laplace" else "sigma"
    noise = value.get(noise_name, defaults.get(noise_name, 0.04 if mechanism == "laplace" else 40.0))
    delta = value.get("delta", float(federation.default_delta))
    for name, number in ((noise_name, noise), ("delta", delta)):
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number) or number <= 0:
            raise InvalidInput(f"'privacy.{name}' must be a positive number, not {number!r}. {HELP['privacy']}")
    if delta >= 1:
        raise InvalidInput(f"'privacy.delta' must be below 1, not {delta}.")
    return {"mechanism": mechanism, "gamma": float(noise) if mechanism == "laplace" else None,
            "sigma": float(noise) if mechanism == "gaussian" else None, "delta": float(delta), "n_queries": n_queries}


def job_parameters_validate(*, kind: str, privacy_level: str, parameters: Mapping | None, federation: Federation,
                            n_public: int) -> dict:
    """The job's parameters with defaults filled in, or InvalidInput naming the first problem."""
    if parameters is not None and not isinstance(parameters, Mapping):
        raise InvalidInput('Give the parameters as a JSON object, e.g. {"partitions": 2, "query": 0.1}.')
    given = dict(parameters or {})
    if privacy_level == PrivacyLevel.L1 and kind != "fedkt":
        raise InvalidInput("Server noise (L1) is only available for FedKT jobs; choose L0 or L2 for this kind.")
    if kind in ENGINE_VALIDATED_KINDS:
        return _engine_validated(kind, given)
    if kind not in KIND_KEYS:
        raise InvalidInput(f"Jobs of kind '{kind}' cannot run yet; choose one of "
                           f"{', '.join([*KIND_KEYS, *ENGINE_VALIDATED_KINDS])}.")
    unknown = sorted(set(given) - set(KIND_KEYS[kind]) - {"seed"})
    if unknown:
        raise InvalidInput(f"Unknown parameter(s) for a {kind} job: {', '.join(unknown)}. "
                           f"Known: {', '.join(KIND_KEYS[kind])}.")
    if "privacy" in given and privacy_level != PrivacyLevel.L1:
        raise InvalidInput("Only L1 jobs take privacy parameters: the server adds noise only at L1.")
    defaults = {"partitions": 2, "teachers": 5, "query": (federation.default_parameters or {}).get("query_fraction", 1.0),
                "final_model": DEFAULT_FINAL_MODEL}
    result: dict = {}
    for name in KIND_KEYS[kind]:
        if name == "privacy":
            continue
        value = given.get(name, defaults[name])
        if name in ("partitions", "teachers"):
            result[name] = _integer({name: value}, name, minimum=1, maximum=64)
        elif name == "query":
            result[name] = _query(value, n_public=n_public)
        elif name == "final_model":
            result[name] = _final_model(value)
    if privacy_level == PrivacyLevel.L1:
        n_queries = resolved_query_count(result["query"], n_public=n_public)
        result["privacy"] = _privacy(given.get("privacy"), federation=federation, n_queries=n_queries)
    return result


def job_parameter_defaults(*, kind: str, federation: Federation, n_public: int, privacy_level: str) -> dict:
    """The defaults of a kind, as the launcher form shows them."""
    return job_parameters_validate(kind=kind, privacy_level=privacy_level, parameters={}, federation=federation,
                                   n_public=n_public)
