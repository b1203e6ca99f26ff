"""The "cpfl" job kind: cohort distillation (CPFL, Dhasade et al. 2024, section 3.1) behind
:mod:`workers.algorithms.registry`. Each member is one cohort's FedAvg model, uploaded with the
cohort's aggregated label distribution (``Member.label_distribution``: counts or shares per class;
shares are scaled by ``n_examples``).

Params (validated by ``validate``):

- ``student`` (learner mapping, default ``{"family": "mlp", "hidden_sizes": [100], "epochs": 20}``):
  a torch family ("mlp", "cnn"); ``final_model`` is accepted as an alias.
- ``loss`` ("l1" | "kl", default "l1"): L1 between logits (the paper) or softened KL.
- ``temperature`` (float > 0, default 1.0): KL only.
- ``query_fraction`` (0 < f ≤ 1, default 1) or ``query_count`` (rows ≥ 1): the public rows used as proxy;
  ``proxy`` and ``query`` are read where unambiguous (:func:`workers.algorithms.schema.query_setting`).

Signal: the cohort's logits (log-probabilities shifted by ``−log 1e-8`` so that they are ≥ 0; a
per-class constant the weighted average carries through and ``fuse`` removes) times its count of
each class; ``fuse`` divides the sum by the class totals. Its arg-max is therefore the member's
count-weighted preference, which is what the contribution rule (agreement counts) sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.special import softmax

from workers.algorithms.cohort import label_counts_of, log_probabilities
from workers.algorithms.logits import PROBABILITY_FLOOR
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
from workers.algorithms.transfer import child_seeds, queried_rows
from workers.modelio.families import NETWORK_FAMILIES

DEFAULT_STUDENT = {"family": "mlp", "hidden_sizes": [100], "epochs": 20}
SHIFT = -np.log(PROBABILITY_FLOOR)  # makes log-probabilities non-negative


#: The distillation losses: L1 between logits (the paper's) or KL.
LOSSES = ("l1", "kl")


class CohortFusion(NoiselessFusion):
    """CPFL's one-shot distillation of cohort models into one student (module docstring)."""

    name = "cpfl"
    label = "Cohort-parallel distillation"
    keys: tuple[str, ...] = ("student", "loss", "temperature", "query_fraction", "query_count")
    choices = {"loss": LOSSES}
    help = {
        "student": 'Cohort distillation: a torch network {"family": "mlp" | "cnn", ...}.',
        "loss": '"l1" between logits (the paper) or "kl"; "temperature" (0, 100] for kl.',
        "query_fraction": QUERY_HELP,
        "query_count": QUERY_HELP,
    }

    def validate(self, params: Mapping) -> dict:
        params = dict(params or {})
        unknown_keys_refused(
            params, known=self.keys, what="a cpfl job", old_names=("final_model", "query", "proxy")
        )
        if "student" in params and "final_model" in params:
            raise ValueError("Give 'student' only ('final_model' is its other name).")
        return {
            "student": learner(
                params.get("student", params.get("final_model", DEFAULT_STUDENT)),
                name="student",
                families=NETWORK_FAMILIES,
            ),
            "loss": one_of(params.get("loss", "l1"), name="loss", choices=LOSSES),
            "temperature": real_number(
                params.get("temperature", 1.0),
                name="temperature",
                minimum=0.0,
                maximum=100.0,
                above_minimum=True,
            ),
            **query_setting(params, legacy=("query", "proxy")),
        }

    @staticmethod
    def valuation_rule(settings: Mapping, details: Mapping) -> str:
        """``cohort``: log-probabilities averaged per class, weighted by each cohort's declared class counts."""
        return "cohort"

    def estimate(self, settings: Mapping, *, n_public: int, n_member_models: int) -> WorkEstimate:
        rows = min(query_rows(settings, n_public=n_public), n_public)
        return WorkEstimate(
            rows,
            prediction_work(n_public=n_public, n_member_models=n_member_models)
            + learner_work(settings["student"], n_rows=rows),
        )

    def select(self, members: Sequence[Member], params: Mapping, *, seed: int) -> list[int]:
        self.validate(params)
        missing = [m.key for m in members if m.label_distribution is None]
        if missing:
            raise ValueError(
                f"Cohort distillation needs each cohort's label distribution; submissions "
                f"{', '.join(missing)} declare none."
            )
        if not members:
            raise ValueError("Cohort distillation needs at least one cohort model.")
        return list(range(len(members)))

    def member_signal(
        self, probabilities, *, member: Member, n_classes: int, params: Mapping
    ) -> np.ndarray:
        counts = self._counts(member, n_classes)
        # the member's best probabilities: its silo's own model's when it has one, else its models' average
        best = member_probabilities_split(probabilities, member=member).best
        logits = log_probabilities(best) + SHIFT
        return logits * counts[None, :]

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
        from workers.algorithms.neural_distillation import distil_torch

        self.noise_refused(noise)
        settings = self.validate(params)
        totals = np.sum([self._counts(m, n_classes) for m in members], axis=0)
        teacher = np.full(np.shape(signal_sum), np.log(PROBABILITY_FLOOR))
        held = totals > 0
        teacher[:, held] = np.asarray(signal_sum)[:, held] / totals[held] - SHIFT
        target = teacher if settings["loss"] == "l1" else softmax(teacher, axis=1)
        public_features = np.asarray(public_features)
        proxy_seed, student_seed = child_seeds(seed, 2)
        proxy = queried_rows(len(public_features), settings, seed=proxy_seed)
        student = distil_torch(
            settings["student"],
            public_features[proxy],
            target[proxy],
            loss=settings["loss"],
            temperature=settings["temperature"],
            seed=student_seed,
        )
        trained = np.zeros(len(public_features), dtype=bool)
        trained[proxy] = True
        agreement = float(
            np.mean(student.predict(public_features[proxy]) == teacher[proxy].argmax(axis=1))
        )
        details = {
            "n_cohorts": len(members),
            "n_proxy": int(len(proxy)),
            "loss": settings["loss"],
            "fidelity": agreement,
            "classes_without_cohort": np.flatnonzero(~held).tolist(),
        }
        return Fusion(student, teacher.argmax(axis=1), trained, None, details)

    @staticmethod
    def _counts(member: Member, n_classes: int) -> np.ndarray:
        if member.label_distribution is None or len(member.label_distribution) != n_classes:
            raise ValueError(
                f"Submission {member.key} must declare a label distribution over {n_classes} classes."
            )
        return label_counts_of(member.label_distribution, member.n_examples)


CPFL = register(CohortFusion())
