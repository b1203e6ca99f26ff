"""The model card: generated from the job and global-model records, never typed by hand.

A card is read by the public, so it shows what :func:`market.jobs.visibility.global_model_view` lets the public
see: the data-independent ε bound (data-dependent ε only where the federation publishes it), and nothing about
which silo contributed what unless the federation publishes contributions.
"""

from market.commerce.models import Listing, ListingAccess
from market.jobs.models import GlobalModel
from market.jobs.quality import GATE_RULE, PUBLISH_MARGIN, public_baselines, quality_verdict
from market.jobs.visibility import GlobalModelView, global_model_view, named_contributions
from workers.privacy.reports import EXAMPLE_LEVEL

HEADLINE_METRICS = ("accuracy", "balanced_accuracy", "macro_f1", "roc_auc")
PRIVACY_FIELDS = (
    "epsilon",
    "delta",
    "unit",
    "mechanism",
    "gamma",
    "sigma",
    "threshold",  # Confident-GNMax: the consensus check's threshold and noise
    "sigma_threshold",
    "n_queries",
    "partitions",
    "teachers",
)
LEVEL_STATEMENTS = {
    "L0": "No differential privacy: the silos trust each other and no noise was added.",
    "L1": "Party-level differential privacy: the server added noise to the silos' votes, so the model reveals "
    "little about whether any one silo took part.",
    "L2": "Example-level differential privacy: each silo added noise before uploading, so the model reveals little "
    "about any one record of a silo's data.",
}
#: The statement of an L1 model whose noise protects one record (``privacy.unit`` "record"), not a whole silo.
L1_RECORD_LEVEL_STATEMENT = (
    "Example-level (record-level) differential privacy: the server added noise to the votes of every silo's "
    "students, each fitted on its own disjoint part of its silo's rows (as the silo declared), so the model reveals "
    "little about any one record of a silo's data, but does not hide whether a silo took part."
)


def _headline(metrics: dict | None) -> dict:
    return {name: (metrics or {}).get(name) for name in HEADLINE_METRICS}


def metrics_comparison(global_model: GlobalModel, baselines: dict) -> dict:
    """The global model against its baselines on the same evaluation split (market.jobs.quality.
    public_baselines): the majority-class guess, the best single silo and the average silo, naming no silo, and
    what the operator has without the silos (``operator_only``; None for a model saved before it was measured)."""
    return {
        "global": _headline(global_model.metrics),
        "majority_class": baselines["majority_class"],
        "best_single_silo": baselines["best_single_silo"],
        "average_silo": baselines["average_silo"],
        "operator_only": baselines.get("operator_only"),
        "n_silos": baselines["n_silos"],
    }


def _labelled_bound(report: dict | None) -> dict | None:
    return (
        {field: report.get(field) for field in PRIVACY_FIELDS if field in report}
        if report
        else None
    )


def privacy_section(report: dict) -> dict:
    """The card's privacy statement from a :class:`GlobalModelView`'s privacy report (already filtered)."""
    level = report.get("level", "L0")
    section = {
        "level": level,
        "statement": LEVEL_STATEMENTS.get(level, ""),
        "epsilon": None,
        "delta": None,
        "unit": None,
        "bound": None,
    }
    if level == "L1" and report.get("data_independent"):
        bound = _labelled_bound(report["data_independent"])
        section.update(bound, bound="data-independent upper bound", details=bound)
        if bound.get("unit") == EXAMPLE_LEVEL:
            section["statement"] = L1_RECORD_LEVEL_STATEMENT
        if report.get("data_dependent"):
            section["data_dependent"] = _labelled_bound(report["data_dependent"])
    elif level == "L2" and report.get("weakest_silo_guarantee"):
        section.update(
            _labelled_bound(report["weakest_silo_guarantee"]),
            bound="largest ε among the contributing silos' own guarantees",
        )
    return section


def reproducibility_record(view: GlobalModelView) -> dict:
    global_model = view.global_model
    job = global_model.job
    return {
        "job": job.id,
        "kind": job.kind,
        "seed": job.seed,
        "parameters": job.parameters,
        # Issue 38: how many pre-flight estimates the operator read before choosing this job's parameters.
        "estimates_before_launch": job.estimates_before_launch,
        "public_data_sha256": job.public_dataset.content_sha256,
        "lineage": view.lineage,
        "files_sha256": {
            model_file.format: model_file.sha256 for model_file in global_model.files.all()
        },
        "finished_at": job.finished_at,
    }


def access_section(listing: Listing) -> dict:
    """What a purchase gives, in the sentences the card shows: the files, or predictions only with their limits."""
    if listing.access != ListingAccess.PREDICTIONS:
        return {
            "access": listing.access,
            "statement": "Download: buyers get the model's files and may also call the prediction API.",
            "limits": [],
        }
    limits = [
        f"at most {value} {unit}"
        for value, unit in (
            (listing.max_rows_per_call, "rows per call"),
            (listing.max_rows_per_day, "rows per day"),
            (listing.max_calls_per_minute, "calls per minute"),
        )
        if value is not None
    ]
    return {
        "access": listing.access,
        "statement": "Predictions only: buyers get an API token for this model's predict endpoint and never "
        "the model's files; every call is metered and audited.",
        "limits": limits,
    }


def model_card(listing: Listing) -> dict:
    """Everything a buyer may know about a listed model before buying it."""
    global_model, federation = listing.global_model, listing.federation
    public = global_model_view(global_model=global_model, user=None)  # whoever reads the card
    baselines = public_baselines(global_model)
    job = global_model.job
    files = list(global_model.files.all())
    card = {
        "access": access_section(listing),
        "task": {
            "federation": federation.slug,
            "federation_name": federation.name,
            "description": federation.description,
            "classes": federation.class_labels,
            "n_classes": global_model.n_classes,
            "n_features": global_model.n_features,
            # the raw columns a buyer's rows need (the raw-column ONNX reads them; names and types only)
            "input_columns": [
                {"name": column["name"], "type": column["type"]}
                for column in job.public_dataset.feature_spec["columns"]
            ],
        },
        "algorithm": {
            "kind": job.kind,
            "name": job.get_kind_display(),
            "model_family": global_model.model_family,
            "parameters": job.parameters,
        },
        "privacy": privacy_section(public.privacy_report),
        "contributing_silos": sum(
            1 for weight in global_model.contribution_weights.values() if weight > 0
        ),
        "public_data_sha256": job.public_dataset.content_sha256,
        "metrics": metrics_comparison(global_model, baselines),
        "quality": quality_section(listing, baselines=baselines),
        "evaluation_rows": job.evaluation_split.n_rows,
        "confusion_matrix": (global_model.metrics or {}).get("confusion_matrix"),
        "size_bytes": sum(model_file.size_bytes for model_file in files),
        "formats": [
            {
                "format": model_file.format,
                "role": model_file.role,
                "size_bytes": model_file.size_bytes,
                "sha256": model_file.sha256,
            }
            for model_file in files
        ],
        "reproducibility": reproducibility_record(public),
    }
    if public.every_silo:
        card["contributions"] = [
            {"organisation": line["organisation"], "weight": line["weight"]}
            for line in named_contributions(public)
        ]
    return card


def quality_section(listing: Listing, *, baselines: dict) -> dict:
    """The card's quality statement: the publish gate's numbers and rule, the operator's override, plain warnings
    for buyers (``warnings``, sentences): the gate's failure with its numbers, in balanced accuracy and accuracy
    (an overridden model, or one listed before the gate existed), and every baseline that did better than the
    model in either; and ``comparisons``: whether the model beats each baseline, by how much, with the interval."""
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
            "accuracy_over_majority_class": None
            if verdict.accuracy is None or verdict.majority_accuracy is None
            else verdict.accuracy - verdict.majority_accuracy,
            "beats_majority_accuracy": verdict.beats_majority_accuracy,
            "below_operator_only": list(verdict.below_operator_only),
            "failure": failure,
            "rule": GATE_RULE,
        },
        "override_reason": listing.publish_override_reason or None,
        "warnings": warnings + verdict.silo_warnings(),
        "comparisons": verdict.comparison_statements(),
    }
