"""The job kinds behind :mod:`workers.algorithms.registry`: "fedkt", "ensemble", "distill".

Importing this module (``import workers.algorithms`` does) registers them. Each validates its
``params`` with ``validate(params) -> dict`` (defaults filled in, a ValueError whose sentence
names the key otherwise); ``select``, ``member_signal`` and ``fuse`` call it themselves.

**fedkt** — Li, He, Song, *Practical One-Shot Federated Learning for Cross-Silo Setting*,
Algorithm 1 lines 10-14 (the server side; the silos ran lines 1-9 and uploaded s students each):

- ``partitions`` (int ≥ 1, default: each member's ``n_models``): s, students per submission.
- ``teachers`` (int ≥ 1, default 5): t, recorded in the privacy report only.
- ``query`` (int count ≥ 1 or float fraction in (0, 1], default 1.0): public rows queried.
- ``final`` (learner, default ``{"family": "random_forest"}``): the global model, a
  ``{"family": ..., **hyperparameters}`` mapping (:func:`workers.learners.make_learner`).
- ``privacy`` (mapping, optional): at L1 its ``delta`` (default 1e-5) is the δ of the report.
- signal: the member's consistent votes (s on the class all its students predict, else 0);
  ``fuse`` adds ``noise`` (L1) to the summed counts of the queried rows, labels by arg-max and
  fits ``final`` on the non-abstaining rows. With noise, ``Fusion.privacy`` is the
  :func:`workers.privacy.accounting.server_noise_privacy` analysis of the noiseless counts.

**ensemble** — Guha, Talwalkar, Smith, *One-Shot Federated Learning*, section 3:

- ``strategy`` ("all" | "cross_validation" | "data" | "random", default "all"), ``k`` (int ≥ 1
  or null, default null = no cut), ``threshold`` (number or null, default null; validation score
  for cross_validation, local examples for data): :mod:`workers.algorithms.selection`.
- signal: the member's class probabilities averaged over its model files; ``fuse`` returns
  ``model=None`` (the global model is the bundle of selected members, equal weights) and the
  arg-max of the averaged probabilities.

**distill** — Guha section 3 "Distillation" (eq. 3) / Hinton et al.: the ensemble above is the
teacher, the student is fitted on the public rows (:mod:`workers.algorithms.distillation`):

- the selection keys of ``ensemble``;
- ``student`` (default "kernel"): "kernel" | ``{"family": "kernel", "gamma": float|"scale",
  "ridge": float (1e-6), "solver": "auto"|"cholesky"|"cg"}`` | a learner mapping
  (random_forest, xgboost, logistic_regression, mlp, cnn);
- ``target`` ("soft" | "argmax", default "soft"): labels of scikit-learn students;
- ``temperature`` (float > 0, default 2.0), ``hard_label_weight`` (float in [0, 1], default 0.0):
  torch students;
- ``proxy`` (count or fraction, default 1.0): public rows used as proxy points (seeded draw).
- ``Fusion.details["fidelity"]``: agreement of the student with the teacher on the proxy rows.

Aliases (the shape ``market.jobs.parameters`` stores): ``final_model`` for ``final`` (fedkt) and
for ``student`` (distill), ``query`` for ``proxy`` (distill), the selection keys nested as
``selection: {"strategy", "k", "threshold"}``, and the strategy names ``validation_score`` for
``cross_validation`` and ``data_size`` for ``data``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from workers.algorithms.registry import Fusion, Member, register
from workers.algorithms.selection import select_members, selection_parameters
from workers.algorithms.transfer import child_seeds, select_queries

DEFAULT_FINAL = {"family": "random_forest"}
STRATEGY_ALIASES = {"validation_score": "cross_validation", "data_size": "data"}


def _normalised(params: Mapping) -> dict:
    """``params`` with the aliases of the module docstring resolved (selection keys at the top)."""
    params = dict(params or {})
    selection = params.pop("selection", None)
    if selection is not None:
        if not isinstance(selection, Mapping):
            raise ValueError(f"selection must be a mapping with strategy, k and threshold, not {selection!r}.")
        params.update({key: value for key, value in selection.items() if key in ("strategy", "k", "threshold")})
    params["strategy"] = STRATEGY_ALIASES.get(params.get("strategy", "all"), params.get("strategy", "all"))
    return params


def _check_query(value, key: str):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{key} must be a count of public rows or a fraction in (0, 1], not {value!r}.")
    if isinstance(value, (float, np.floating)) and not 0.0 < value <= 1.0:
        raise ValueError(f"{key} as a fraction must lie in (0, 1], not {value}.")
    if isinstance(value, (int, np.integer)) and value < 1:
        raise ValueError(f"{key} as a count must be at least 1, not {value}.")
    return value


def _positive_int(params: Mapping, key: str, default):
    value = params.get(key, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
        raise ValueError(f"{key} must be a positive integer, not {value!r}.")
    return value


def _learner(value, key: str):
    from workers.learners import LEARNER_FAMILIES

    family = value if isinstance(value, str) else value.get("family") if isinstance(value, Mapping) else None
    known = ("kernel", *LEARNER_FAMILIES) if key == "student" else tuple(LEARNER_FAMILIES)
    if family not in known:
        raise ValueError(f"{key} must be one of {', '.join(known)} or a mapping with such a 'family', not {value!r}.")
    return value if isinstance(value, str) else dict(value)


def _rows(n_public: int, query, seed: int) -> np.ndarray:
    return select_queries(n_public, query, seed=seed)


class FedKTFusion:
    """FedKT's server side over uploaded student sets (module docstring: params)."""

    name = "fedkt"

    def validate(self, params: Mapping) -> dict:
        params = _normalised(params)
        privacy = params.get("privacy") or {}
        if not isinstance(privacy, Mapping):
            raise ValueError("privacy must be a mapping of the L1 noise settings.")
        return {"partitions": _positive_int(params, "partitions", None), "teachers": _positive_int(params, "teachers", 5),
                "query": _check_query(params.get("query", 1.0), "query"),
                "final": _learner(params.get("final", params.get("final_model", DEFAULT_FINAL)), "final"), "delta": float(privacy.get("delta", 1e-5))}

    def select(self, members: Sequence[Member], params: Mapping, *, seed: int) -> list[int]:
        settings = self.validate(params)
        if settings["partitions"] is not None:
            wrong = [m.key for m in members if m.n_models != settings["partitions"]]
            if wrong:
                raise ValueError(f"Submissions {', '.join(wrong)} do not hold s = {settings['partitions']} students.")
        return list(range(len(members)))

    def member_signal(self, probabilities, *, member: Member, n_classes: int, params: Mapping) -> np.ndarray:
        from workers.algorithms.voting import consistent_vote_counts

        probabilities = np.asarray(probabilities)
        partitions = self.validate(params)["partitions"] or member.n_models
        predictions = probabilities.argmax(axis=2)[None]           # (1 party, s, n_public)
        return consistent_vote_counts(predictions, n_classes, partitions)

    def fuse(self, signal_sum, public_features, *, members: Sequence[Member], n_classes: int, params: Mapping,
             noise=None, seed: int) -> Fusion:
        from workers.algorithms.transfer import fit_on_votes

        settings = self.validate(params)
        counts, public_features = np.asarray(signal_sum, dtype=np.int64), np.asarray(public_features)
        query_seed, model_seed = child_seeds(seed, 2)                  # as fedkt.server_fit derives them
        queried = _rows(len(public_features), settings["query"], query_seed)
        model, _, labels, trained = fit_on_votes(counts[queried], public_features[queried], learner=settings["final"],
                                                 n_classes=n_classes, seed=model_seed, noise=noise)
        all_labels, all_trained = np.full(len(public_features), -1, dtype=np.int64), np.zeros(len(public_features), bool)
        all_labels[queried[trained]], all_trained[queried[trained]] = labels[trained], True
        privacy = None
        if noise is not None:
            from workers.privacy.accounting import server_noise_privacy

            partitions = settings["partitions"] or (members[0].n_models if members else 1)
            privacy = server_noise_privacy(mechanism=noise, vote_counts=counts[queried], partitions=partitions,
                                           teachers=settings["teachers"], delta=settings["delta"])
        details = {"n_queried": int(len(queried)), "n_abstained": int(len(queried) - trained.sum()),
                   "n_trained": int(trained.sum())}
        return Fusion(model, all_labels, all_trained, privacy, details)


class EnsembleFusion:
    """Guha's selected ensemble, kept as a bundle of its members (module docstring: params)."""

    name = "ensemble"

    def validate(self, params: Mapping) -> dict:
        return selection_parameters(_normalised(params))

    def select(self, members: Sequence[Member], params: Mapping, *, seed: int) -> list[int]:
        return select_members(members, **selection_parameters(_normalised(params)), seed=seed)

    def member_signal(self, probabilities, *, member: Member, n_classes: int, params: Mapping) -> np.ndarray:
        probabilities = np.asarray(probabilities, dtype=np.float64)
        if probabilities.ndim != 3 or probabilities.shape[2] != n_classes:
            raise ValueError(f"Expected probabilities of shape (n_models, n_public, {n_classes}), "
                             f"got {probabilities.shape}.")
        return probabilities.mean(axis=0)

    def teacher(self, signal_sum, members: Sequence[Member]) -> np.ndarray:
        if not members:
            raise ValueError("An ensemble needs at least one member.")
        return np.asarray(signal_sum, dtype=np.float64) / len(members)

    def fuse(self, signal_sum, public_features, *, members: Sequence[Member], n_classes: int, params: Mapping,
             noise=None, seed: int) -> Fusion:
        if noise is not None:
            raise ValueError("Ensembles add no noise; run them at L0 or on L2 submissions.")
        averaged = self.teacher(signal_sum, members)
        details = {"n_members": len(members), **self.validate(params),
                   "mean_confidence": float(averaged.max(axis=1).mean()) if len(averaged) else 0.0}
        return Fusion(None, averaged.argmax(axis=1), np.zeros(len(averaged), dtype=bool), None, details)


class DistillFusion(EnsembleFusion):
    """The selected ensemble distilled into one student on the public rows (module docstring)."""

    name = "distill"

    def validate(self, params: Mapping) -> dict:
        params = _normalised(params)
        settings = selection_parameters(params)
        student = params.get("student", params.get("final_model", "kernel"))
        target = params.get("target", "soft")
        if target not in ("soft", "argmax"):
            raise ValueError(f"target must be 'soft' or 'argmax', not {target!r}.")
        temperature = float(params.get("temperature", 2.0))
        hard_label_weight = float(params.get("hard_label_weight", 0.0))
        if not temperature > 0 or not 0.0 <= hard_label_weight <= 1.0:
            raise ValueError("temperature must be positive and hard_label_weight must lie in [0, 1].")
        return {**settings, "student": _learner(student, "student"), "target": target, "temperature": temperature,
                "hard_label_weight": hard_label_weight, "proxy": _check_query(params.get("proxy", params.get("query", 1.0)), "proxy")}

    def fuse(self, signal_sum, public_features, *, members: Sequence[Member], n_classes: int, params: Mapping,
             noise=None, seed: int) -> Fusion:
        from workers.algorithms.distillation import distil, fidelity, student_family

        if noise is not None:
            raise ValueError("Distillation adds no noise; run it at L0 or on L2 submissions.")
        settings = self.validate(params)
        teacher, public_features = self.teacher(signal_sum, members), np.asarray(public_features)
        proxy_seed, student_seed = child_seeds(seed, 2)
        proxy = _rows(len(public_features), settings["proxy"], proxy_seed)
        student = distil(settings["student"], public_features[proxy], teacher[proxy], seed=student_seed,
                         target=settings["target"], temperature=settings["temperature"],
                         hard_label_weight=settings["hard_label_weight"])
        trained = np.zeros(len(public_features), dtype=bool)
        trained[proxy] = True
        details = {"n_members": len(members), "n_proxy": int(len(proxy)),
                   "student": student_family(settings["student"]),
                   "fidelity": fidelity(student, public_features[proxy], teacher[proxy])}
        return Fusion(student, teacher.argmax(axis=1), trained, None, details)


FEDKT = register(FedKTFusion())
ENSEMBLE = register(EnsembleFusion())
DISTILL = register(DistillFusion())
