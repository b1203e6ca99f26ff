"""The publish gate and the card's plain warnings: a global model against its baselines (market.jobs.baselines).

A model is published only if its balanced accuracy beats the majority-class guess by at least
``PUBLISH_MARGIN`` (in points of balanced accuracy), unless an operator overrides with a written reason. Being
below the best single silo or the average silo does not stop publishing; the card says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from market.commerce.models import Listing
from market.jobs.baselines import baselines_visible, global_model_baselines
from market.jobs.models import GlobalModel
from market.jobs.visibility import visibility_for

PUBLISH_MARGIN = 0.05  # balanced accuracy, 0..1: five percentage points


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %"


def _points(value: float) -> str:
    return f"{100 * abs(value):.1f} points"


@dataclass(frozen=True)
class QualityVerdict:
    """Balanced accuracies (0..1, ``None`` where not measured) of a global model and of its baselines."""

    global_model_id: int
    balanced_accuracy: float | None
    majority_class: float | None
    majority_label: str
    best_single_silo: float | None
    average_silo: float | None
    below_withheld: tuple[str, ...] = ()  # silo baselines shown without scores that beat the model

    @property
    def margin_over_majority(self) -> float | None:
        if self.balanced_accuracy is None or self.majority_class is None:
            return None
        return self.balanced_accuracy - self.majority_class

    @property
    def passes_gate(self) -> bool:
        margin = self.margin_over_majority
        return (
            margin is not None and round(margin, 9) >= PUBLISH_MARGIN
        )  # rounded: 0.55 - 0.50 is 0.0499…9

    def gate_failure(self) -> str | None:
        """Why the model may not be published without an override (``None`` when it passes)."""
        if self.passes_gate:
            return None
        margin = self.margin_over_majority
        needed = f"at least {_points(PUBLISH_MARGIN)} of balanced accuracy"
        if margin is None:
            return (
                f"Global model #{self.global_model_id} has no balanced accuracy on the evaluation split to "
                f"compare with the majority-class guess, which it must beat by {needed}."
            )
        standing = (
            f"{_points(margin)} below it"
            if margin < 0
            else f"only {_points(margin)} above it, {_points(PUBLISH_MARGIN - margin)} short"
        )
        return (
            f"Global model #{self.global_model_id} does not beat the majority-class guess (always "
            f"'{self.majority_label}') by {needed}: it scores {_percent(self.balanced_accuracy)} and the guess "
            f"{_percent(self.majority_class)}, {standing}."
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

    def silo_warnings(self) -> list[str]:
        """Plain sentences for buyers where a single silo alone did better than the federation's model."""
        warnings = []
        for name, value in (
            ("the best single silo", self.best_single_silo),
            ("the average silo", self.average_silo),
        ):
            if (
                self.balanced_accuracy is not None
                and value is not None
                and self.balanced_accuracy < value
            ):
                warnings.append(
                    f"This model is below {name}: its balanced accuracy is "
                    f"{_percent(self.balanced_accuracy)} against {_percent(value)} for {name} on the "
                    f"same evaluation rows ({_points(value - self.balanced_accuracy)} lower)."
                )
        for name in self.below_withheld:
            warnings.append(
                f"This model is below {name.replace('_', ' ')} in balanced accuracy on the same evaluation rows "
                "(single silos' scores are not shown in a federation this small)."
            )
        return warnings


def _label(labels: list, class_index: int | None) -> str:
    return (
        str(labels[class_index])
        if class_index is not None and class_index < len(labels)
        else str(class_index)
    )


def quality_verdict(global_model: GlobalModel, *, baselines: dict | None = None) -> QualityVerdict:
    """The model against its baselines (``baselines``: as market.jobs.baselines gives them; read when omitted)."""
    baselines = baselines if baselines is not None else global_model_baselines(global_model)
    labels = global_model.federation.class_labels or []

    def balanced(name):
        return (baselines.get(name) or {}).get("balanced_accuracy")

    return QualityVerdict(
        global_model_id=global_model.id,
        balanced_accuracy=(global_model.metrics or {}).get("balanced_accuracy"),
        majority_class=balanced("majority_class"),
        majority_label=_label(labels, (baselines.get("majority_class") or {}).get("class")),
        best_single_silo=balanced("best_single_silo"),
        average_silo=balanced("average_silo"),
        below_withheld=tuple(
            f"the {name}"
            for name in ("best_single_silo", "average_silo")
            if ((baselines.get(name) or {}).get("model_is_better") or {}).get("balanced_accuracy")
            is False
        ),
    )


def public_baselines(global_model: GlobalModel) -> dict:
    """The baselines as anyone may see them (market.jobs.baselines.baselines_visible under the public's rule of
    market.jobs.visibility), the majority class named by its label."""
    public = visibility_for(user=None, federation=global_model.federation)
    baselines = baselines_visible(global_model, every_silo=public.every_silo, organisation_id=None)
    majority = baselines.get("majority_class")
    labels = global_model.federation.class_labels or []
    return {
        **baselines,
        "majority_class": None
        if majority is None
        else {**majority, "label": _label(labels, majority["class"])},
    }


def quality_section(listing: Listing, *, baselines: dict) -> dict:
    """The card's quality statement: the publish gate's numbers, the operator's override and plain warnings for
    buyers (``warnings``, sentences): the gate's failure with its numbers (an overridden model, or one listed
    before the gate existed), and every baseline silo that did better than the model."""
    verdict = quality_verdict(listing.global_model, baselines=baselines)
    failure = verdict.gate_failure()
    warnings = []
    if failure and listing.publish_override_reason:
        warnings.append(
            f"Published by an operator's override of the publish gate. {failure} "
            f"The operator's reason: {listing.publish_override_reason}"
        )
    elif failure:
        warnings.append(failure)
    return {
        "gate": {
            "passes": verdict.passes_gate,
            "required_margin": PUBLISH_MARGIN,
            "margin_over_majority_class": verdict.margin_over_majority,
            "failure": failure,
        },
        "override_reason": listing.publish_override_reason or None,
        "warnings": warnings + verdict.silo_warnings(),
    }
