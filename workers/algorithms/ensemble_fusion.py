"""Guha, Talwalkar, Smith's job kinds behind :mod:`workers.algorithms.registry`: "ensemble" and "distill"
(importing this module, as ``import workers.algorithms`` does, registers them). Each validates its ``params`` with
``validate(params) -> dict`` (defaults filled in, every key typed and bounded by :mod:`workers.algorithms.schema`, a
ValueError whose sentence names the key otherwise; what it returns is what a job stores).

**ensemble** — Guha, Talwalkar, Smith, *One-Shot Federated Learning*, section 3:

- ``strategy`` ("all" | "cross_validation" | "data" | "random", default "all"), ``k`` (int ≥ 1
  or null, default null = no cut), ``threshold`` (number or null, default null; validation score
  for cross_validation, local examples for data): :mod:`workers.algorithms.selection`.
- signal: the member's best probabilities: its silo's own model's when its submission carries one, else its
  students' average (:func:`workers.algorithms.registry.member_probabilities_split`); ``fuse`` returns
  ``model=None`` (the global model is the bundle of selected members, equal weights) and the
  arg-max of the averaged probabilities.

**distill** — Guha section 3 "Distillation" (eq. 3) / Hinton et al.: the ensemble above is the
teacher, the student is fitted on the public rows (:mod:`workers.algorithms.distillation`):

- the selection keys of ``ensemble``;
- ``student`` (default ``{"family": "kernel"}``): ``{"family": "kernel", "gamma": float|"scale",
  "ridge": float (1e-6), "solver": "auto"|"cholesky"|"cg"}`` | a learner mapping
  (random_forest, xgboost, logistic_regression, mlp, cnn);
- ``target`` ("soft" | "argmax", default "soft"): labels of scikit-learn students;
- ``temperature`` (float in (0, 100], default 2.0), ``hard_label_weight`` (float in [0, 1], default 0.0):
  torch students;
- ``query_fraction`` / ``query_count`` (default all rows): public rows used as proxy points (seeded draw).
- ``Fusion.details["fidelity"]``: agreement of the student with the teacher on the proxy rows.

Aliases read on input: ``final_model`` for ``student`` (distill), ``query`` and ``proxy`` for a query where
unambiguous, the selection keys nested as ``selection: {"strategy", "k", "threshold"}``, and the strategy names
``validation_score`` for ``cross_validation`` and ``data_size`` for ``data``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from workers.algorithms.fedkt_fusion import FINAL_MODEL_FAMILIES
from workers.algorithms.registry import (
    Fusion,
    Member,
    NoiselessFusion,
    member_probabilities_split,
    register,
)
from workers.algorithms.schema import (
    QUERY_HELP,
    WorkEstimate,
    learner,
    learner_work,
    one_of,
    prediction_work,
    query_rows,
    query_setting,
    real_number,
    unknown_keys_refused,
)
from workers.algorithms.selection import select_members, selection_parameters
from workers.algorithms.transfer import child_seeds, queried_rows
from workers.modelio.families import ModelFamily

STRATEGY_ALIASES = {"validation_score": "cross_validation", "data_size": "data"}
STUDENT_FAMILIES = (ModelFamily.KERNEL, *FINAL_MODEL_FAMILIES, ModelFamily.CNN)
#: What the distilled student learns: the teacher's soft probabilities or its argmax labels.
DISTILL_TARGETS = ("soft", "argmax")
SELECTION_KEYS = ("selection", "strategy", "k", "threshold")
SELECTION_HELP = (
    'Ensemble and distillation: which members to use: {"strategy": all | cross_validation | data | '
    'random, "k": top k or null, "threshold": minimum validation score or examples, or null}.'
)


def _normalised(params: Mapping) -> dict:
    """``params`` with the aliases of the module docstring resolved (selection keys at the top)."""
    params = dict(params or {})
    selection = params.pop("selection", None)
    if selection is not None:
        if not isinstance(selection, Mapping):
            raise ValueError(
                f"selection must be a mapping with strategy, k and threshold, not {selection!r}."
            )
        params.update(
            {
                key: value
                for key, value in selection.items()
                if key in ("strategy", "k", "threshold")
            }
        )
    strategy = params.get("strategy", "all")
    params["strategy"] = (
        STRATEGY_ALIASES.get(strategy, strategy) if isinstance(strategy, str) else strategy
    )
    return params


class EnsembleFusion(NoiselessFusion):
    """Guha's selected ensemble, kept as a bundle of its members (module docstring: params)."""

    name = "ensemble"
    label = "Ensemble of local models"
    keys: tuple[str, ...] = SELECTION_KEYS
    help = {"selection": SELECTION_HELP}

    def validate(self, params: Mapping) -> dict:
        unknown_keys_refused(dict(params or {}), known=self.keys, what=f"an {self.name} job")
        return selection_parameters(_normalised(params))

    @staticmethod
    def valuation_rule(settings: Mapping, details: Mapping) -> str:
        """``average``: the members' probabilities are averaged (so too in distillation and the stack)."""
        return "average"

    def estimate(self, settings: Mapping, *, n_public: int, n_member_models: int) -> WorkEstimate:
        return WorkEstimate(
            None, prediction_work(n_public=n_public, n_member_models=n_member_models)
        )

    def select(self, members: Sequence[Member], params: Mapping, *, seed: int) -> list[int]:
        return select_members(members, **selection_parameters(_normalised(params)), seed=seed)

    def member_signal(
        self, probabilities, *, member: Member, n_classes: int, params: Mapping
    ) -> np.ndarray:
        """The member's best probabilities (:func:`~workers.algorithms.registry.member_probabilities_split`): its
        silo's own model's when the submission carries one, else its students' average."""
        probabilities = np.asarray(probabilities, dtype=np.float64)
        if probabilities.ndim != 3 or probabilities.shape[2] != n_classes:
            raise ValueError(
                f"Expected probabilities of shape (n_models, n_public, {n_classes}), "
                f"got {probabilities.shape}."
            )
        return member_probabilities_split(probabilities, member=member).best

    def teacher(self, signal_sum, members: Sequence[Member]) -> np.ndarray:
        if not members:
            raise ValueError("An ensemble needs at least one member.")
        # Guha's ensemble weighs its members equally: the summed probabilities over their number.
        return np.asarray(signal_sum, dtype=np.float64) / len(members)

    def fuse(
        self,
        signal_sum,
        public_features,
        *,
        members: Sequence[Member],
        n_classes: int,
        params: Mapping,
        noise=None,
        seed: int,
    ) -> Fusion:
        self.noise_refused(noise)
        averaged = self.teacher(signal_sum, members)
        details = {
            "n_members": len(members),
            **self.validate(params),
            "mean_confidence": float(averaged.max(axis=1).mean()) if len(averaged) else 0.0,
        }
        return Fusion(
            None, averaged.argmax(axis=1), np.zeros(len(averaged), dtype=bool), None, details
        )


class DistillFusion(EnsembleFusion):
    """The selected ensemble distilled into one student on the public rows (module docstring)."""

    name = "distill"
    label = "Ensemble distilled into one model"
    keys: tuple[str, ...] = (
        *SELECTION_KEYS,
        "student",
        "target",
        "temperature",
        "hard_label_weight",
        "query_fraction",
        "query_count",
    )
    choices = {"target": DISTILL_TARGETS}
    help = {
        "selection": SELECTION_HELP,
        "student": 'Distillation: "kernel" (Guha eq. 3) or {"family": one of '
        + ", ".join(STUDENT_FAMILIES[1:])
        + ', ...}; with "target" soft | argmax, "temperature" (0, 100] and "hard_label_weight" [0, 1].',
        "query_fraction": QUERY_HELP,
        "query_count": QUERY_HELP,
    }

    def validate(self, params: Mapping) -> dict:
        params = _normalised(params)
        unknown_keys_refused(
            params,
            known=self.keys,
            what="a distill job",
            old_names=("final_model", "query", "proxy"),
        )
        if "student" in params and "final_model" in params:
            raise ValueError("Give 'student' only ('final_model' is its other name).")
        return {
            **selection_parameters(params),
            "student": learner(
                params.get("student", params.get("final_model", "kernel")),
                name="student",
                families=STUDENT_FAMILIES,
            ),
            "target": one_of(params.get("target", "soft"), name="target", choices=DISTILL_TARGETS),
            "temperature": real_number(
                params.get("temperature", 2.0),
                name="temperature",
                minimum=0.0,
                maximum=100.0,
                above_minimum=True,
            ),
            "hard_label_weight": real_number(
                params.get("hard_label_weight", 0.0),
                name="hard_label_weight",
                minimum=0.0,
                maximum=1.0,
            ),
            **query_setting(params, legacy=("query", "proxy")),
        }

    def estimate(self, settings: Mapping, *, n_public: int, n_member_models: int) -> WorkEstimate:
        rows = min(query_rows(settings, n_public=n_public), n_public)
        return WorkEstimate(
            rows,
            prediction_work(n_public=n_public, n_member_models=n_member_models)
            + learner_work(settings["student"], n_rows=rows),
        )

    def fuse(
        self,
        signal_sum,
        public_features,
        *,
        members: Sequence[Member],
        n_classes: int,
        params: Mapping,
        noise=None,
        seed: int,
    ) -> Fusion:
        from workers.algorithms.distillation import distil, fidelity, student_family

        self.noise_refused(noise)
        settings = self.validate(params)
        teacher, public_features = self.teacher(signal_sum, members), np.asarray(public_features)
        # Two independent streams from the job's seed: changing the student's learner must not change which proxy
        # rows were drawn (and so the rows a comparison between two students reads).
        proxy_seed, student_seed = child_seeds(seed, 2)
        proxy = queried_rows(len(public_features), settings, seed=proxy_seed)
        student = distil(
            settings["student"],
            public_features[proxy],
            teacher[proxy],
            seed=student_seed,
            target=settings["target"],
            temperature=settings["temperature"],
            hard_label_weight=settings["hard_label_weight"],
        )
        trained = np.zeros(len(public_features), dtype=bool)
        trained[proxy] = True
        details = {
            "n_members": len(members),
            "n_proxy": int(len(proxy)),
            "student": student_family(settings["student"]),
            "fidelity": fidelity(student, public_features[proxy], teacher[proxy]),
        }
        return Fusion(student, teacher.argmax(axis=1), trained, None, details)


ENSEMBLE = register(EnsembleFusion())
DISTILL = register(DistillFusion())
