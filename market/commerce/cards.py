"""The model card: generated from the job and global-model records, never typed by hand.

What a card shows about privacy follows the federation's policy: the data-independent ε bound (data-dependent
ε only where the federation publishes it), and nothing about which silo contributed what unless the federation
publishes contributions.
"""

from market.commerce.models import Listing
from market.commerce.quality import public_baselines, quality_section
from market.jobs.models import GlobalModel

HEADLINE_METRICS = ("accuracy", "balanced_accuracy", "macro_f1", "roc_auc")
PRIVACY_FIELDS = ("epsilon", "delta", "unit", "mechanism", "gamma", "sigma", "n_queries", "partitions", "teachers")
# Lineage fields that say nothing about which silo contributed what (market.jobs.runner writes the lineage).
PUBLIC_LINEAGE_KEYS = {"job", "kind", "privacy_level", "public_dataset", "evaluation_split", "code_version", "seed",
                       "seeds", "parameters", "dp_noise", "verification", "public_data_sha256"}
LEVEL_STATEMENTS = {
    "L0": "No differential privacy: the silos trust each other and no noise was added.",
    "L1": "Party-level differential privacy: the server added noise to the silos' votes, so the model reveals "
          "little about whether any one silo took part.",
    "L2": "Example-level differential privacy: each silo added noise before uploading, so the model reveals little "
          "about any one record of a silo's data.",
}


def _headline(metrics: dict | None) -> dict:
    return {name: (metrics or {}).get(name) for name in HEADLINE_METRICS}


def metrics_comparison(global_model: GlobalModel) -> dict:
    """The global model against its baselines on the same evaluation split (market.commerce.quality): the
    majority-class guess, the best single silo and the average silo. Reads every submission's metrics, but shows
    only these aggregates, which name no silo."""
    baselines = public_baselines(global_model)
    return {"global": _headline(global_model.metrics), "majority_class": baselines["majority_class"],
            "best_single_silo": baselines["best_single_silo"], "average_silo": baselines["average_silo"],
            "n_silos": baselines["n_silos"]}


def _labelled_bound(report: dict | None) -> dict | None:
    return {field: report.get(field) for field in PRIVACY_FIELDS if field in report} if report else None


def privacy_section(report: dict, *, publish_data_dependent: bool) -> dict:
    level = report.get("level", "L0")
    section = {"level": level, "statement": LEVEL_STATEMENTS.get(level, ""), "epsilon": None, "delta": None,
               "unit": None, "bound": None}
    if level == "L1" and report.get("data_independent"):
        bound = _labelled_bound(report["data_independent"])
        section.update(bound, bound="data-independent upper bound", details=bound)
        if publish_data_dependent and report.get("data_dependent"):
            section["data_dependent"] = _labelled_bound(report["data_dependent"])
    elif level == "L2" and report.get("submissions"):
        # The weakest guarantee among the silos, without saying whose it is.
        weakest = max(report["submissions"].values(), key=lambda silo: silo.get("epsilon") or 0.0)
        section.update(_labelled_bound(weakest), bound="largest ε among the contributing silos' own guarantees")
    return section


def reproducibility_record(global_model: GlobalModel, *, publish_contributions: bool) -> dict:
    job = global_model.job
    lineage = global_model.lineage or {}
    if not publish_contributions:  # submissions and fusion details (member weights) would say who gave what
        lineage = {key: value for key, value in lineage.items() if key in PUBLIC_LINEAGE_KEYS}
    return {"job": job.id, "kind": job.kind, "seed": job.seed, "parameters": job.parameters,
            "public_data_sha256": job.public_dataset.content_sha256, "lineage": lineage,
            "files_sha256": {model_file.format: model_file.sha256 for model_file in global_model.files.all()},
            "finished_at": job.finished_at}


def contributions_section(global_model: GlobalModel) -> list[dict]:
    from market.accounts.models import Organisation

    names = Organisation.objects.in_bulk([int(key) for key in global_model.contribution_weights if key.isdigit()])
    return [{"organisation": names[int(key)].name if int(key) in names else key, "weight": weight}
            for key, weight in sorted(global_model.contribution_weights.items(), key=lambda item: -item[1])]


def model_card(listing: Listing) -> dict:
    """Everything a buyer may know about a listed model before buying it."""
    global_model, federation = listing.global_model, listing.federation
    job = global_model.job
    files = list(global_model.files.all())
    card = {
        "task": {"federation": federation.slug, "federation_name": federation.name,
                 "description": federation.description, "classes": federation.class_labels,
                 "n_classes": global_model.n_classes, "n_features": global_model.n_features},
        "algorithm": {"kind": job.kind, "name": job.get_kind_display(), "model_family": global_model.model_family,
                      "parameters": job.parameters},
        "privacy": privacy_section(global_model.privacy_report or {},
                                   publish_data_dependent=federation.publish_data_dependent_epsilon),
        "contributing_silos": sum(1 for weight in global_model.contribution_weights.values() if weight > 0),
        "public_data_sha256": job.public_dataset.content_sha256,
        "metrics": metrics_comparison(global_model),
        "quality": quality_section(listing),
        "evaluation_rows": job.evaluation_split.n_rows,
        "confusion_matrix": (global_model.metrics or {}).get("confusion_matrix"),
        "size_bytes": sum(model_file.size_bytes for model_file in files),
        "formats": [{"format": model_file.format, "role": model_file.role, "size_bytes": model_file.size_bytes,
                     "sha256": model_file.sha256} for model_file in files],
        "reproducibility": reproducibility_record(global_model,
                                                  publish_contributions=federation.publish_contributions),
    }
    if federation.publish_contributions:
        card["contributions"] = contributions_section(global_model)
    return card
