"""The publish gate and the card's plain warnings: a global model against its baselines (market.jobs.baselines).

A model is published only if its balanced accuracy beats the majority-class guess by at least
``PUBLISH_MARGIN`` (in points of balanced accuracy) and its accuracy is above the guess's, unless an operator
overrides with a written reason; a model no more accurate than the guess is flagged in the catalog too. Being
below the best single silo or the average silo (in accuracy or balanced accuracy) does not stop publishing; the
launcher (from a pre-flight estimate or a previous job), the job page and the card say so first. This module owns
every such sentence, for global models and for pre-flight estimates (market.jobs.preflight) alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from market.federations.visibility import visibility_for
from market.jobs.baselines import baselines_visible, global_model_baselines
from market.jobs.models import GlobalModel

PUBLISH_MARGIN = 0.05  # balanced accuracy, 0..1: five percentage points
SILO_BASELINES = (
    ("best_single_silo", "the best single silo"),
    ("average_silo", "the average silo"),
)
METRIC_NAMES = {"accuracy": "accuracy", "balanced_accuracy": "balanced accuracy"}


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %"


def _points(value: float) -> str:
    return f"{100 * abs(value):.1f} points"


def _below(value: float | None, baseline: float | None) -> bool:
    return value is not None and baseline is not None and round(value - baseline, 9) < 0


@dataclass(frozen=True)
class QualityVerdict:
    """A model's accuracy and balanced accuracy (0..1, ``None`` where not measured) against its baselines'.

    ``subject`` names the model in the sentences ("Global model #7", or an estimate's "The expected private
    model"); ``majority_class``, ``best_single_silo`` and ``average_silo`` are balanced accuracies and the
    ``*_accuracy`` fields accuracies. ``below_withheld``: ``(baseline, metric)`` pairs of silo baselines shown
    without scores that beat the model in that metric."""

    subject: str
    balanced_accuracy: float | None
    majority_class: float | None
    majority_label: str
    best_single_silo: float | None
    average_silo: float | None
    accuracy: float | None = None
    majority_accuracy: float | None = None
    best_single_silo_accuracy: float | None = None
    average_silo_accuracy: float | None = None
    below_withheld: tuple[tuple[str, str], ...] = ()

    @property
    def margin_over_majority(self) -> float | None:
        if self.balanced_accuracy is None or self.majority_class is None:
            return None
        return self.balanced_accuracy - self.majority_class

    @property
    def beats_majority_accuracy(self) -> bool:
        """The model is more accurate than always guessing the majority class (True where either is unknown:
        the balanced accuracy's gate then speaks)."""
        if self.accuracy is None or self.majority_accuracy is None:
            return True
        return round(self.accuracy - self.majority_accuracy, 9) > 0

    @property
    def passes_gate(self) -> bool:
        margin = self.margin_over_majority
        return (
            margin is not None
            and round(margin, 9) >= PUBLISH_MARGIN  # rounded: 0.55 - 0.50 is 0.0499…9
            and self.beats_majority_accuracy
        )

    def _balanced_failure(self) -> str | None:
        margin = self.margin_over_majority
        needed = f"at least {_points(PUBLISH_MARGIN)} of balanced accuracy"
        if margin is None:
            return (
                f"{self.subject} has no balanced accuracy on the evaluation split to "
                f"compare with the majority-class guess, which it must beat by {needed}."
            )
        if round(margin, 9) >= PUBLISH_MARGIN:
            return None
        standing = (
            f"{_points(margin)} below it"
            if margin < 0
            else f"only {_points(margin)} above it, {_points(PUBLISH_MARGIN - margin)} short"
        )
        return (
            f"{self.subject} does not beat the majority-class guess (always "
            f"'{self.majority_label}') by {needed}: it scores {_percent(self.balanced_accuracy)} and the guess "
            f"{_percent(self.majority_class)}, {standing}."
        )

    def accuracy_failure(self) -> str | None:
        """The plain sentence for a model no more accurate than the majority-class guess (``None`` otherwise)."""
        if self.beats_majority_accuracy:
            return None
        gap = self.accuracy - self.majority_accuracy
        standing = f"{_points(gap)} below it" if round(gap, 9) < 0 else "level with it"
        return (
            f"{self.subject} is not more accurate than the majority-class guess (always "
            f"'{self.majority_label}'): its accuracy is {_percent(self.accuracy)} and the guess's "
            f"{_percent(self.majority_accuracy)}, {standing}."
        )

    def gate_failure(self) -> str | None:
        """Why the model may not be published without an override (``None`` when it passes): it must beat the
        majority-class guess by :data:`PUBLISH_MARGIN` of balanced accuracy and be more accurate than it."""
        if self.passes_gate:
            return None
        return " ".join(
            sentence for sentence in (self._balanced_failure(), self.accuracy_failure()) if sentence
        )

    def refusal(self) -> str | None:
        failure = self.gate_failure()
        return (
            None
            if failure is None
            else (
                f"{failure} Publishing is refused; an operator may publish it anyway "
                f"with a written override reason, which buyers will see."
            )
        )

    def _silo_scores(self, name: str) -> dict[str, float | None]:
        return {
            "accuracy": getattr(self, f"{name}_accuracy"),
            "balanced_accuracy": getattr(self, name),
        }

    def silo_warnings(self) -> list[str]:
        """Plain sentences where a single silo alone did better than the model, in accuracy or balanced accuracy:
        the model is still publishable, but the launcher, the job page and the card say so first."""
        model = {"accuracy": self.accuracy, "balanced_accuracy": self.balanced_accuracy}
        warnings = []
        for name, words in SILO_BASELINES:
            scores = self._silo_scores(name)
            lower = [
                metric
                for metric in ("balanced_accuracy", "accuracy")
                if _below(model[metric], scores[metric])
            ]
            if len(lower) == 1:
                metric = lower[0]
                warnings.append(
                    f"This model is below {words}: its {METRIC_NAMES[metric]} is {_percent(model[metric])} "
                    f"against {_percent(scores[metric])} for {words} on the same evaluation rows "
                    f"({_points(scores[metric] - model[metric])} lower)."
                )
            elif lower:
                warnings.append(
                    f"This model is below {words}: its accuracy is {_percent(model['accuracy'])} against "
                    f"{_percent(scores['accuracy'])} ({_points(scores['accuracy'] - model['accuracy'])} lower) "
                    f"and its balanced accuracy {_percent(model['balanced_accuracy'])} against "
                    f"{_percent(scores['balanced_accuracy'])} "
                    f"({_points(scores['balanced_accuracy'] - model['balanced_accuracy'])} lower), for {words} "
                    "on the same evaluation rows."
                )
        for name, words in SILO_BASELINES:
            metrics = [
                METRIC_NAMES[metric]
                for metric in ("balanced_accuracy", "accuracy")
                if (name, metric) in self.below_withheld
            ]
            if metrics:
                warnings.append(
                    f"This model is below {words} in {' and '.join(metrics)} on the same evaluation rows "
                    "(single silos' scores are not shown in a federation this small)."
                )
        return warnings

    def statements(self) -> list[str]:
        """Every plain statement about the model, the most serious first: the gate's failure, then each silo
        baseline that did better."""
        failure = self.gate_failure()
        return ([failure] if failure else []) + self.silo_warnings()


def _label(labels: list, class_index: int | None) -> str:
    return (
        str(labels[class_index])
        if class_index is not None and class_index < len(labels)
        else str(class_index)
    )


def verdict_of(
    *, subject: str, metrics: dict, baselines: dict, class_labels: list
) -> QualityVerdict:
    """A model's verdict from its headline ``metrics`` and ``baselines`` (as market.jobs.baselines gives them):
    a global model's, or the expected metrics of a pre-flight estimate (market.jobs.preflight)."""

    def score(name, metric):
        return (baselines.get(name) or {}).get(metric)

    return QualityVerdict(
        subject=subject,
        balanced_accuracy=(metrics or {}).get("balanced_accuracy"),
        accuracy=(metrics or {}).get("accuracy"),
        majority_class=score("majority_class", "balanced_accuracy"),
        majority_accuracy=score("majority_class", "accuracy"),
        majority_label=_label(class_labels, (baselines.get("majority_class") or {}).get("class")),
        best_single_silo=score("best_single_silo", "balanced_accuracy"),
        best_single_silo_accuracy=score("best_single_silo", "accuracy"),
        average_silo=score("average_silo", "balanced_accuracy"),
        average_silo_accuracy=score("average_silo", "accuracy"),
        below_withheld=tuple(
            (name, metric)
            for name, _ in SILO_BASELINES
            for metric in ("balanced_accuracy", "accuracy")
            if ((baselines.get(name) or {}).get("model_is_better") or {}).get(metric) is False
        ),
    )


def quality_verdict(global_model: GlobalModel, *, baselines: dict | None = None) -> QualityVerdict:
    """The model against its baselines (``baselines``: as market.jobs.baselines gives them; read when omitted)."""
    return verdict_of(
        subject=f"Global model #{global_model.id}",
        metrics=global_model.metrics or {},
        baselines=baselines if baselines is not None else global_model_baselines(global_model),
        class_labels=global_model.federation.class_labels or [],
    )


#: How an estimate's verdict names its model (market.jobs.preflight).
ESTIMATE_SUBJECT = "The expected private model"


def estimate_verdict(*, result: dict, class_labels: list) -> QualityVerdict:
    """A succeeded pre-flight estimate's verdict: its mean accuracy and balanced accuracy over the simulated draws
    against its baselines, for the operator's eyes only (market.jobs.visibility.estimate_visible)."""
    private = result["private"]
    return verdict_of(
        subject=ESTIMATE_SUBJECT,
        metrics={name: spread["mean"] for name, spread in private.items()},
        baselines=result["baselines"],
        class_labels=class_labels,
    )


def launcher_statements(*, result: dict, class_labels: list) -> dict:
    """What the launcher says beside its Launch button about an estimate: ``gate`` (the sentence when the model is
    expected to fail the publish gate, else None) and ``silos`` (each silo baseline it is expected to be below)."""
    verdict = estimate_verdict(result=result, class_labels=class_labels)
    failure = verdict.gate_failure()
    return {
        "passes_gate": verdict.passes_gate,
        "gate": None
        if failure is None
        else f"Launching is not advised: this job's model would fail the publish gate. {failure}",
        "silos": [
            warning.replace("This model", "The expected private model", 1)
            for warning in verdict.silo_warnings()
        ],
    }


def catalog_accuracy_flag(global_model: GlobalModel) -> str | None:
    """The catalog's short flag for a model no more accurate than the majority-class guess (else None): buyers see
    it in the list, not only on the card."""
    verdict = quality_verdict(global_model, baselines=public_baselines_of(global_model))
    if verdict.beats_majority_accuracy:
        return None
    return (
        f"Accuracy {_percent(verdict.accuracy)}: not above always guessing "
        f"'{verdict.majority_label}' ({_percent(verdict.majority_accuracy)})"
    )


def public_baselines_of(global_model: GlobalModel) -> dict:
    """The baselines as the public may see them, unlabelled (market.jobs.baselines.baselines_visible)."""
    public = visibility_for(user=None, federation=global_model.federation)
    return baselines_visible(global_model, every_silo=public.every_silo, organisation_id=None)


def public_baselines(global_model: GlobalModel) -> dict:
    """The baselines as anyone may see them (market.jobs.baselines.baselines_visible under the public's rule of
    market.jobs.visibility), the majority class named by its label."""
    baselines = public_baselines_of(global_model)
    majority = baselines.get("majority_class")
    labels = global_model.federation.class_labels or []
    return {
        **baselines,
        "majority_class": None
        if majority is None
        else {**majority, "label": _label(labels, majority["class"])},
    }
