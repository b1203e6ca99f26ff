"""What a buyer downloads: each format named with its size and purpose, the raw-column ONNX built on demand,
and a zip package that carries the model card (a Hugging Face style ``README.md`` with YAML metadata) and the
feature specification with every model file.

The raw-column ONNX (:mod:`workers.modelio.raw_columns`) exists for a model with an ONNX file and for every
ensemble bundle: a member that is not ONNX (XGBoost, safetensors) is converted to its ONNX twin in the sandbox
where uploaded models are loaded: the job stores each twin in the bundle (checked on the evaluation split), and a
bundle written without one is converted here (:func:`market.sandbox.stored_models_convert`, checked on the
federation's public rows). A twin is used only if it predicts the member's own probabilities; otherwise the model
has no raw-column ONNX and the download says which member failed.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass

from django.core.cache import cache

from market.commerce.delivery import (
    RAW_ONNX,
    ResolvedDownload,
    download_filename,
    prediction_models,
)
from market.commerce.models import Listing
from market.errors import DomainError, InvalidInput
from market.jobs.models import GlobalModel
from market.sandbox import stored_models_convert
from market.storage import arrays_from_npz_cached, artifact_read, sha256_of
from workers.modelio.base import ArtifactFormat
from workers.modelio.raw_columns import RawColumnMember, input_schema, raw_column_onnx

PURPOSES = {
    RAW_ONNX: (
        "ONNX, raw columns",
        "Feed the federation's raw columns (one input per CSV column); the encoding is "
        "inside the graph. Runs with onnxruntime alone. Start here.",
    ),
    ArtifactFormat.ONNX: (
        "ONNX, encoded features",
        "Reads the encoded feature matrix (apply the feature specification first); "
        "for ONNX runtimes and converters.",
    ),
    ArtifactFormat.SKOPS: (
        "scikit-learn (skops)",
        "The fitted scikit-learn estimator, for skops.io.load in Python.",
    ),
    ArtifactFormat.XGBOOST_JSON: (
        "XGBoost JSON",
        "The booster, for xgboost.Booster(model_file=...), on encoded features.",
    ),
    ArtifactFormat.SAFETENSORS: (
        "PyTorch safetensors",
        "Weights of a zoo network (spec in the metadata), on encoded features.",
    ),
    ArtifactFormat.KERNEL_NPZ: (
        "Kernel student (NPZ)",
        "Support vectors and dual coefficients of the kernel-distilled student.",
    ),
    ArtifactFormat.BUNDLE: (
        "Ensemble bundle (zip)",
        "Every member file, each non-ONNX member's ONNX twin, and manifest.json with the "
        "members' weights, views and classes.",
    ),
}


@dataclass(frozen=True)
class DownloadChoice:
    format: str
    title: str
    purpose: str
    size_bytes: int
    sha256: str


#: How many of the public dataset's rows a member's ONNX twin must predict as the member does.
CONVERSION_CHECK_ROWS = 2000


def raw_column_members(global_model: GlobalModel) -> list[RawColumnMember]:
    """The ONNX members a raw-column model is built from: an ensemble's member that is not ONNX is replaced by its
    ONNX twin (stored in the bundle by the job, else converted now by :func:`market.sandbox.stored_models_convert`
    and checked on the public dataset's rows); InvalidInput naming a member that cannot be converted."""
    from workers.modelio import identify_format
    from workers.modelio.base import ModelFormat

    try:
        models, weights, views = prediction_models(global_model, onnx_twins=True)
    except DomainError as error:
        raise InvalidInput(
            f"Global model #{global_model.id} has no raw-column ONNX: {error}"
        ) from error
    unconverted = [
        index for index, data in enumerate(models) if identify_format(data) != ModelFormat.ONNX
    ]
    if unconverted:
        public = global_model.job.public_dataset
        outcomes = stored_models_convert(
            [models[index] for index in unconverted],
            views=[views[index] for index in unconverted],
            one_hot_features=arrays_from_npz_cached(public.features_file)["features"][
                :CONVERSION_CHECK_ROWS
            ],
            feature_spec=public.feature_spec,
            n_classes=global_model.n_classes,
        )
        for index, outcome in zip(unconverted, outcomes):
            if outcome.error:
                raise InvalidInput(
                    f"Global model #{global_model.id} has no raw-column ONNX: member {index + 1} "
                    f"({identify_format(models[index])}) could not be converted to ONNX: {outcome.error} Use the "
                    "prediction API, or the bundle with the feature specification."
                )
            models[index] = outcome.onnx
    return [
        RawColumnMember(data=data, weight=weight, feature_view=view)
        for data, weight, view in zip(models, weights, views)
    ]


def raw_column_model(global_model: GlobalModel) -> bytes:
    """The raw-column ONNX of a global model (InvalidInput when its members cannot be expressed in one graph)."""
    members = raw_column_members(global_model)
    try:
        return raw_column_onnx(
            members,
            spec=global_model.job.public_dataset.feature_spec,
            class_labels=global_model.federation.class_labels,
            description=f"Onefold global model #{global_model.id} of "
            f"{global_model.federation.name}, reading the federation's raw columns.",
        )
    except ValueError as error:
        raise InvalidInput(
            f"Global model #{global_model.id} has no raw-column ONNX: {error}"
        ) from error


def _raw_facts(global_model: GlobalModel) -> tuple[int, str] | None:
    """The raw-column ONNX's size in bytes and SHA-256, or None where the model has none."""
    key = f"onefold:raw-onnx-facts:{global_model.id}"
    facts = cache.get(key)
    if facts is None:
        try:
            data = raw_column_model(global_model)
            facts = (len(data), sha256_of(data))
        except InvalidInput:
            facts = ()
        cache.set(key, facts, 24 * 3600)  # a global model never changes
    return tuple(facts) if facts else None


def download_choices(global_model: GlobalModel) -> list[DownloadChoice]:
    """The raw-column ONNX first (where it exists), then every stored file, each with its size, SHA-256 and
    purpose: the formats a buyer can download."""
    choices = []
    raw_facts = _raw_facts(global_model)
    if raw_facts is not None:
        choices.append(DownloadChoice(RAW_ONNX, *PURPOSES[RAW_ONNX], *raw_facts))
    for model_file in global_model.files.all():
        title, purpose = PURPOSES.get(
            model_file.format, (model_file.format, "A stored file of the model.")
        )
        choices.append(
            DownloadChoice(
                model_file.format, title, purpose, model_file.size_bytes, model_file.sha256
            )
        )
    return choices


# --- the model card as README.md ---


def _yaml(value) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON scalar or flow collection is valid YAML


def _metric_lines(metrics: dict) -> list[str]:
    return [
        f"      - {{type: {name}, value: {round(float(metrics[name]), 4)}}}"
        for name in ("accuracy", "balanced_accuracy", "macro_f1", "roc_auc")
        if metrics.get(name) is not None
    ]


def raw_onnx_filename(global_model: GlobalModel) -> str:
    """The raw-column ONNX's file name, in its package and as a download (the snippet opens this name)."""
    return f"onefold-global-model-{global_model.id}.raw.onnx"


def usage_snippet(global_model: GlobalModel) -> str:
    """Python that runs the raw-column ONNX, as its package names it, on ``rows.csv`` (the federation's raw
    columns, with a header) with onnxruntime and numpy."""
    return f'''import csv
import numpy as np
import onnxruntime

session = onnxruntime.InferenceSession("{raw_onnx_filename(global_model)}")
rows = list(csv.DictReader(open("rows.csv", newline="")))  # the federation's raw columns
inputs = {{}}
for graph_input in session.get_inputs():
    values = [row[graph_input.name] for row in rows]
    if graph_input.type == "tensor(double)":   # numeric column: NaN is missing
        inputs[graph_input.name] = np.array([float(v) if v else np.nan for v in values])[:, None]
    else:                                       # categorical column: "" is missing
        inputs[graph_input.name] = np.array(values, dtype=object)[:, None]
probabilities, labels = session.run(["probabilities", "label"], inputs)
print(labels[:5], probabilities[:5])  # classes: {", ".join(global_model.federation.class_labels)}
'''


def prediction_curl(global_model: GlobalModel, *, base_url: str) -> str:
    """The shell line that sends ``rows.csv`` to the prediction API with an API token in ``$ONEFOLD_TOKEN``;
    ``base_url``: the market's address, without a trailing slash."""
    return (
        f'curl -sS -X POST -H "Authorization: Token $ONEFOLD_TOKEN" -H "Content-Type: text/csv" '
        f"--data-binary @rows.csv {base_url}/api/global-models/{global_model.id}/predict/"
    )


def model_card_readme(global_model: GlobalModel, listing: Listing | None) -> str:
    """A Hugging Face style model card: YAML metadata (licence, library, task, tags, evaluation results), then
    the task, the input schema, how to run it, the privacy statement and the licence text."""
    from market.commerce.cards import model_card

    federation, job = global_model.federation, global_model.job
    card = model_card(listing) if listing is not None else None
    name = listing.name if listing is not None else f"Onefold global model #{global_model.id}"
    metrics = global_model.metrics or {}
    lines = [
        "---",
        "license: other",
        f"license_name: {_yaml(f'onefold-listing-{listing.id}' if listing else 'onefold')}",
        "library_name: onnx",
        "pipeline_tag: tabular-classification",
        f"tags: {_yaml(['onefold', 'federated-learning', 'tabular-classification', job.kind, global_model.model_family, f'privacy-{job.privacy_level}'])}",
        "model-index:",
        f"- name: {_yaml(name)}",
        "  results:",
        "  - task: {type: tabular-classification}",
        f"    dataset: {{name: {_yaml(federation.name + ' evaluation split')}, type: {_yaml('onefold/' + federation.slug)}}}",
        "    metrics:",
        *_metric_lines(metrics),
        "---",
        "",
        f"# {name}",
        "",
    ]
    lines += [
        listing.description
        if listing is not None and listing.description
        else federation.description,
        "",
        f"Federation **{federation.name}** (`{federation.slug}`), job #{job.id} ({job.get_kind_display()}, "
        f"{job.privacy_level}), model family `{global_model.model_family}`.",
        "",
        f"Classes, in output order: {', '.join(f'`{label}`' for label in federation.class_labels)}.",
        "",
        "## Inputs",
        "",
        "| column | type | missing value | categories |",
        "|---|---|---|---|",
    ]
    for column in input_schema(job.public_dataset.feature_spec):
        categories = ", ".join(column.get("categories", []))
        lines.append(
            f"| {column['name']} | {column['onnx_type']} | {column['missing']} | {categories} |"
        )
    lines += [
        "",
        "## Use this model",
        "",
        "```python",
        usage_snippet(global_model).rstrip(),
        "```",
        "",
    ]
    if card is not None:
        lines += ["## Privacy", "", card["privacy"]["statement"], ""]
        if card["privacy"].get("epsilon") is not None:
            lines += [
                f"ε = {card['privacy']['epsilon']:.3g}, δ = {card['privacy']['delta']:.3g} "
                f"({card['privacy'].get('unit') or ''}, {card['privacy'].get('bound') or ''}).",
                "",
            ]
        lines += ["## Licence", "", listing.licence_text, ""]
    lines += [
        "## Evaluation",
        "",
        "Measured by the market on the federation's private evaluation split:",
        "",
    ]
    lines += [
        f"- {name.replace('_', ' ')}: {float(metrics[name]):.3f}"
        for name in ("accuracy", "balanced_accuracy", "macro_f1", "roc_auc")
        if metrics.get(name) is not None
    ]
    return "\n".join(lines) + "\n"


# --- packages ---


def _listing_of(global_model: GlobalModel) -> Listing | None:
    return global_model.listings.order_by("-published_at", "-id").first()


def download_content(resolved: ResolvedDownload) -> tuple[str, bytes]:
    """The filename and bytes a resolved link delivers (see :class:`ResolvedDownload`)."""
    model_file = resolved.model_file
    global_model = model_file.global_model
    if resolved.variant == RAW_ONNX:
        filename, data = raw_onnx_filename(global_model), raw_column_model(global_model)
    else:
        filename, data = download_filename(model_file), artifact_read(model_file.stored_name)
    if not resolved.package:
        return filename, data
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(filename, data)
        archive.writestr("README.md", model_card_readme(global_model, _listing_of(global_model)))
        archive.writestr(
            "feature-spec.json", json.dumps(global_model.job.public_dataset.feature_spec, indent=2)
        )
    return f"{filename}.zip", buffer.getvalue()
