"""The publish gate and the card's plain warnings: a global model against its baselines (market.jobs.baselines).

A model is published only if its balanced accuracy beats the majority-class guess by at least
``PUBLISH_MARGIN`` (in points of balanced accuracy), its accuracy is above the guess's, and it is above the
operator-only model (what the operator has without the silos, issue 39) in accuracy and in balanced accuracy,
unless an operator overrides with a written reason; a model no more accurate than the guess, or below the best
single silo, is flagged in the catalog too. Being below the best single silo or the average silo does not stop
publishing; the launcher (from a pre-flight estimate or a previous job), the job page and the card say so first.
The card also says which baselines the model beats and by how much, with the paired bootstrap's interval
(workers.metrics.paired_difference): a difference inside it is called level, not a win. This module owns every
such sentence, for global models and for pre-flight estimates (market.jobs.preflight) alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from market.federations.visibility import visibility_for
from market.jobs.baselines import baselines_visible, global_model_baselines
from market.jobs.models import GlobalModel
from workers.numbers import percent_text

PUBLISH_MARGIN = 0.05  # balanced accuracy, 0..1: five percentage points
#: The publish gate in one sentence, as the card and the publish form state it.
GATE_RULE = (
    f"To be published without an operator's override, a model must beat the majority-class guess by "
    f"{100 * PUBLISH_MARGIN:.0f} points of balanced accuracy, be more accurate than it, and be above the "
    "operator's own rows alone (the model the market fits on the evaluation split's other half, which costs no "
    "silo anything) in accuracy and in balanced accuracy."
)
SILO_BASELINES = (
    ("best_single_silo", "the best single silo"),
    ("average_silo", "the average silo"),
)
#: Every baseline a model is warned about being below: the silos', and what the operator has without them (issue 39).
COMPARED_BASELINES = (
    *SILO_BASELINES,
    ("operator_only", "the operator's own rows alone (a model of no silo's data)"),
)
METRIC_NAMES = {"accuracy": "accuracy", "balanced_accuracy": "balanced accuracy"}


def _points(value: float) -> str:
    return f"{100 * abs(value):.1f} points"


def _below(value: float | None, baseline: float | None) -> bool:
    return value is not None and baseline is not None and round(value - baseline, 9) < 0


@dataclass(frozen=True)
class QualityVerdict:
    """A model's accuracy and balanced accuracy (0..1, ``None`` where not measured) against its baselines'.

    ``subject`` names the model in the sentences ("Global model #7", or an estimate's "The expected private
    model"); ``majority_class``, ``best_single_silo`` and ``average_silo`` are balanced accuracies and the
    ``*_accuracy`` fields accuracies; ``operator_only_rows`` the rows the operator-only model was fitted on.
    ``below_withheld``: ``(baseline, metric)`` pairs of silo baselines shown without scores that beat the model in
    that metric; ``comparisons``: ``(baseline, comparison)`` pairs, each baseline's paired comparison with the
    model as the viewer may see it (workers.metrics.paired_difference)."""

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
    operator_only: float | None = None
    operator_only_accuracy: float | None = None
    operator_only_rows: int | None = None
    below_withheld: tuple[tuple[str, str], ...] = ()
    comparisons: tuple[tuple[str, dict], ...] = ()

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
    def below_operator_only(self) -> tuple[str, ...]:
        """The metrics in which the model is not above the operator-only model (none where that is unknown)."""
        model = {"accuracy": self.accuracy, "balanced_accuracy": self.balanced_accuracy}
        free = {"accuracy": self.operator_only_accuracy, "balanced_accuracy": self.operator_only}
        return tuple(
            metric
            for metric in ("accuracy", "balanced_accuracy")
            if model[metric] is not None
            and free[metric] is not None
            and round(model[metric] - free[metric], 9) <= 0
        )

    @property
    def passes_gate(self) -> bool:
        margin = self.margin_over_majority
        return (
            margin is not None
            and round(margin, 9) >= PUBLISH_MARGIN  # rounded: 0.55 - 0.50 is 0.0499…9
            and self.beats_majority_accuracy
            and not self.below_operator_only
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
            f"'{self.majority_label}') by {needed}: it scores {percent_text(self.balanced_accuracy)} and the guess "
            f"{percent_text(self.majority_class)}, {standing}."
        )

    def accuracy_failure(self) -> str | None:
        """The plain sentence for a model no more accurate than the majority-class guess (``None`` otherwise)."""
        if self.beats_majority_accuracy:
            return None
        gap = self.accuracy - self.majority_accuracy
        standing = f"{_points(gap)} below it" if round(gap, 9) < 0 else "level with it"
        return (
            f"{self.subject} is not more accurate than the majority-class guess (always "
            f"'{self.majority_label}'): its accuracy is {percent_text(self.accuracy)} and the guess's "
            f"{percent_text(self.majority_accuracy)}, {standing}."
        )

    def operator_only_failure(self) -> str | None:
        """The plain sentence for a model not above the operator-only model (``None`` otherwise)."""
        below = self.below_operator_only
        if not below:
            return None
        model = {"accuracy": self.accuracy, "balanced_accuracy": self.balanced_accuracy}
        free = {"accuracy": self.operator_only_accuracy, "balanced_accuracy": self.operator_only}
        scores = " and ".join(
            f"its {METRIC_NAMES[metric]} is {percent_text(model[metric])} against {percent_text(free[metric])}"
            for metric in below
        )
        rows = f" on {self.operator_only_rows} rows" if self.operator_only_rows else ""
        return (
            f"{self.subject} does not beat what the operator has without the silos, a model fitted on the "
            f"operator's own labelled rows alone{rows}: {scores}, on the same evaluation rows."
        )

    def gate_failure(self) -> str | None:
        """Why the model may not be published without an override (``None`` when it passes): it must beat the
        majority-class guess by :data:`PUBLISH_MARGIN` of balanced accuracy, be more accurate than it, and be
        above the operator-only model in accuracy and balanced accuracy."""
        if self.passes_gate:
            return None
        return " ".join(
            sentence
            for sentence in (
                self._balanced_failure(),
                self.accuracy_failure(),
                self.operator_only_failure(),
            )
            if sentence
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

    def baseline_scores(self, name: str) -> dict[str, float | None]:
        return {
            "accuracy": getattr(self, f"{name}_accuracy"),
            "balanced_accuracy": getattr(self, name),
        }

    def silo_warnings(self) -> list[str]:
        """Plain sentences where a single silo alone, or the operator's rows alone, did better than the model, in
        accuracy or balanced accuracy: the model is still publishable, but the launcher, the job page and the card
        say so first."""
        model = {"accuracy": self.accuracy, "balanced_accuracy": self.balanced_accuracy}
        warnings = []
        for name, words in COMPARED_BASELINES:
            scores = self.baseline_scores(name)
            lower = [
                metric
                for metric in ("balanced_accuracy", "accuracy")
                if _below(model[metric], scores[metric])
            ]
            if len(lower) == 1:
                metric = lower[0]
                warnings.append(
                    f"This model is below {words}: its {METRIC_NAMES[metric]} is {percent_text(model[metric])} "
                    f"against {percent_text(scores[metric])} for {words} on the same evaluation rows "
                    f"({_points(scores[metric] - model[metric])} lower)."
                )
            elif lower:
                warnings.append(
                    f"This model is below {words}: its accuracy is {percent_text(model['accuracy'])} against "
                    f"{percent_text(scores['accuracy'])} ({_points(scores['accuracy'] - model['accuracy'])} lower) "
                    f"and its balanced accuracy {percent_text(model['balanced_accuracy'])} against "
                    f"{percent_text(scores['balanced_accuracy'])} "
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
                    "(single silos' scores are shown to the federation's operators only)."
                )
        return warnings

    def statements(self) -> list[str]:
        """Every plain statement about the model, the most serious first: the gate's failure, then each silo
        baseline that did better."""
        failure = self.gate_failure()
        return ([failure] if failure else []) + self.silo_warnings()

    def comparison_statements(self) -> list[str]:
        """For each baseline with a paired comparison: whether the model beats it, is level with it or is below
        it, in accuracy and in balanced accuracy, by how much and with the interval (what a buyer reads first on
        the card: only a difference whose whole interval is above zero is called a win)."""
        return [
            f"Against {COMPARISON_WORDS.get(name, name)}: "
            + "; ".join(
                _comparison_phrase(METRIC_NAMES[metric], comparison[metric])
                for metric in ("accuracy", "balanced_accuracy")
                if metric in comparison
            )
            + "."
            for name, comparison in self.comparisons
        ]


#: How the card names each baseline it compares the model with.
COMPARISON_WORDS = {
    "majority_class": "the majority-class guess",
    "best_single_silo": "the best single silo",
    "operator_only": "the operator's own rows alone (what the operator has without the silos)",
}
VERDICT_WORDS = {"beats": "beats it", "level": "level with it", "below": "below it"}


def _signed_points(value: float) -> str:
    return f"{100 * value:+.1f}"


def _comparison_phrase(metric: str, measured: dict) -> str:
    """``"accuracy +3.2 points (95 % interval +1.0 to +5.4): beats it"``; the verdict alone where the viewer
    may not see the numbers."""
    verdict = VERDICT_WORDS[measured["verdict"]]
    if measured.get("difference") is None:
        return f"{metric} {verdict}"
    return (
        f"{metric} {_signed_points(measured['difference'])} points (95 % interval "
        f"{_signed_points(measured['low'])} to {_signed_points(measured['high'])}): {verdict}"
    )


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
        operator_only=score("operator_only", "balanced_accuracy"),
        operator_only_accuracy=score("operator_only", "accuracy"),
        operator_only_rows=score("operator_only", "fit_rows"),
        comparisons=tuple(
            (name, baselines[name]["comparison"])
            for name in COMPARISON_WORDS
            if (baselines.get(name) or {}).get("comparison")
        ),
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


def catalog_flags(global_model: GlobalModel) -> list[str]:
    """The catalog's short flags for a model no more accurate than the majority-class guess, below the best single
    silo, or not above the operator's own rows alone (an overridden model): buyers see them in the list, not only
    on the card."""
    verdict = quality_verdict(global_model, baselines=public_baselines_of(global_model))
    flags = []
    if not verdict.beats_majority_accuracy:
        flags.append(
            f"Accuracy {percent_text(verdict.accuracy)}: not above always guessing "
            f"'{verdict.majority_label}' ({percent_text(verdict.majority_accuracy)})"
        )
    model = {"accuracy": verdict.accuracy, "balanced_accuracy": verdict.balanced_accuracy}
    below_best = [
        METRIC_NAMES[metric]
        for metric in ("accuracy", "balanced_accuracy")
        if _below(model[metric], verdict.baseline_scores("best_single_silo")[metric])
        or ("best_single_silo", metric) in verdict.below_withheld
    ]
    if below_best:
        flags.append(f"Below the best single silo in {' and '.join(below_best)}")
    if verdict.below_operator_only:
        flags.append(
            "Not above the operator's own rows alone in "
            + " and ".join(METRIC_NAMES[metric] for metric in verdict.below_operator_only)
        )
    return flags


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
