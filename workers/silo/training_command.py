"""``train``: FedKT students (or one local model) on the silo's own data, offline, with the pure core.

This module needs the toolkit's ``[train]`` extra (numpy, pandas, scikit-learn, XGBoost, the ONNX exporters,
OpenDP: the tree families), and ``[neural]`` (torch, Opacus) for networks and DP-SGD, which only those import;
:mod:`workers.silo.commands` imports it only when ``train`` runs, so that the client commands work with
``requests`` alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from workers.features import view_width
from workers.learners.registry import make_learner
from workers.numbers import epsilon_text, percent_number, percent_text
from workers.silo.errors import DataError
from workers.silo.folders import METADATA_FILE, pulled_folder
from workers.silo.students import export_student
from workers.silo.table import encode_silo_table, load_table
from workers.silo.training import (
    DEFAULT_OWN_MODEL,
    DEFAULT_STUDENT,
    DEFAULT_TEACHER,
    TrainingSettings,
    local_train,
    per_label_logits,
    silo_train,
)


def parse_parameters(pairs: list[str], family: str) -> dict:
    """``["n_estimators=50", "criterion=gini"]`` → ``{"family": ..., "n_estimators": 50, "criterion": "gini"}``."""
    learner = {"family": family}
    for pair in pairs:
        name, separator, value = pair.partition("=")
        if not separator or not name:
            raise DataError(f"Hyperparameters are NAME=VALUE, not {pair!r}.")
        try:
            learner[name] = json.loads(value)
        except ValueError:
            learner[name] = value
    return learner


def learner_setting(family: str | None, pairs: list[str], default: dict) -> dict:
    """The learner ``--teacher``/``--student`` and their ``--*-param`` pairs ask for; the toolkit's default
    (with its hyperparameters) when no family is named or the default's family is."""
    base = dict(default) if family in (None, default["family"]) else {"family": family}
    setting = {**base, **parse_parameters(pairs, base["family"])}
    try:
        make_learner(setting)
    except ValueError as error:
        raise DataError(str(error)) from None
    return setting


def parse_queries(text: str) -> int | float:
    try:
        return float(text) if "." in text or "e" in text.lower() else int(text)
    except ValueError:
        raise DataError(
            f"--queries must be a count (e.g. 300) or a fraction (e.g. 0.1), not {text!r}."
        ) from None


def read_pulled(folder: Path, slug: str) -> tuple[dict, dict, np.ndarray]:
    try:
        federation = json.loads((folder / "federation.json").read_text())
        spec = json.loads((folder / "feature-spec.json").read_text())
        with np.load(folder / "features.npz", allow_pickle=False) as arrays:
            public_features = arrays["features"]
    except (OSError, ValueError, KeyError) as error:
        raise DataError(
            f"{folder} does not hold a complete pull of '{slug}' ({error}); run "
            f"`python -m workers.silo pull {slug}` first."
        ) from error
    if federation.get("slug") != slug:
        raise DataError(f"{folder} holds a pull of '{federation.get('slug')}', not of '{slug}'.")
    return federation, spec, public_features


def privacy_level_chosen(args, federation: dict) -> str:
    """The level asked for, else the federation's default (what the upload page preselects); a default of L2
    needs its noise named, which only the silo can choose."""
    if args.privacy_level is None and federation.get("default_privacy_level") == "L2":
        noise_named = any(
            value is not None
            for value in (args.gamma, args.sigma, args.noise_multiplier, args.target_epsilon)
        )
        if not noise_named:
            raise DataError(
                f"'{args.federation}' defaults to L2: give its noise (--gamma or --sigma; with --local "
                "--noise-multiplier or --target-epsilon), or choose another level with --privacy-level."
            )
    level = args.privacy_level or federation.get("default_privacy_level", "L0")
    if level not in federation["allowed_privacy_levels"]:
        raise DataError(
            f"'{args.federation}' allows privacy levels {', '.join(federation['allowed_privacy_levels'])}, "
            f"not {level}."
        )
    return level


def train(args):
    federation, spec, public_features = read_pulled(pulled_folder(args), args.federation)
    privacy_level = privacy_level_chosen(args, federation)
    settings = TrainingSettings(
        own_model=own_model_setting(args, federation, privacy_level),
        partitions=args.partitions,
        teachers=args.teachers,
        disjoint_partitions=args.disjoint_partitions,
        teacher=learner_setting(args.teacher, args.teacher_param, DEFAULT_TEACHER),
        student=learner_setting(args.student, args.student_param, DEFAULT_STUDENT),
        privacy_level=privacy_level,
        gamma=args.gamma,
        sigma=args.sigma,
        delta=args.delta,
        queries=parse_queries(args.queries),
        validation_fraction=args.validation_fraction,
        min_rows_per_teacher=args.min_rows_per_teacher,
        seed=args.seed,
        noise_multiplier=args.noise_multiplier,
        target_epsilon=args.target_epsilon,
        max_grad_norm=args.max_grad_norm,
    )
    if not args.local and (args.noise_multiplier is not None or args.target_epsilon is not None):
        raise DataError(
            "DP-SGD trains one local network: add --local (FedKT students at L2 take --gamma or --sigma)."
        )
    n_classes = len(federation["class_labels"])
    view = settings.feature_view(local=args.local)
    say(args, f"Reading {args.data}...")
    frame = load_table(args.data)
    label_column = args.label_column or federation["label_column"]
    say(
        args,
        f"Training {'one local model' if args.local else 'FedKT teachers and students'} on {len(frame)} rows"
        f"{'' if args.local or settings.own_model is None else ', then your own model'}...",
    )
    if args.local:
        data = encode_silo_table(
            frame,
            spec,
            label_column=label_column,
            class_labels=federation["class_labels"],
            view=view,
        )
        result = local_train(
            data,
            n_classes=n_classes,
            settings=settings,
            progress=lambda message: say(args, message),
        )
    else:
        result, data = silo_train(
            frame,
            spec,
            public_features,
            label_column=label_column,
            class_labels=federation["class_labels"],
            settings=settings,
            progress=lambda message: say(args, message),
        )
    below = models_below_majority(result.metadata)
    if args.strict and below:
        raise DataError(
            f"--strict: {', '.join(below)} did not beat always answering the majority class on your held-out "
            "rows (accuracy and balanced accuracy); nothing was written. Run without --strict to see the "
            "scores, then try more rows or a stronger learner."
        )
    output = args.output or pulled_folder(args) / ("local-model" if args.local else "students")
    output.mkdir(parents=True, exist_ok=True)
    names = model_file_stems(result, local=args.local)
    say(args, f"Writing {len(names)} model file(s) to {output}...")
    files, families = [], []
    for stem, model in zip(names, result.models, strict=True):
        exported = export_student(model, n_features=view_width(spec, view), n_classes=n_classes)
        (output / f"{stem}{exported.suffix}").write_bytes(exported.data)
        files.append(f"{stem}{exported.suffix}")
        families.append(exported.model_family)
    own = (result.metadata.get("own_model") or None) and {
        **result.metadata["own_model"],
        "file": files[-1],
        "model_family": families[-1],
    }
    metadata = {
        "federation": args.federation,
        "model_family": families[0],
        "files": files,
        **result.metadata,
        "own_model": own,
    }
    if args.fd_logits:
        logits = per_label_logits(result.models[0], data.features, data.labels, n_classes=n_classes)
        (output / "fd-logits.json").write_text(
            json.dumps({"class_labels": federation["class_labels"], **logits}, indent=2)
        )
        metadata["fd_logits_file"] = "fd-logits.json"
    (output / METADATA_FILE).write_text(json.dumps(metadata, indent=2))
    return {**metadata, "output": str(output)}, training_summary(
        metadata, output, federation["class_labels"]
    )


def say(args, message: str) -> None:
    """A progress line on standard error while ``train`` works (not with --json, whose output a script reads)."""
    if not args.json:
        print(message, file=sys.stderr, flush=True)


def scored_models(metadata: dict) -> list[tuple[str, dict]]:
    """``(name, majority comparison)`` of every model ``train`` wrote that was scored on held-out rows."""
    if metadata["algorithm"] == "fedkt":
        students = metadata.get("student_majority_comparisons") or []
        own = (metadata.get("own_model") or {}).get("majority_comparison")
        named = [(f"student {index}", item) for index, item in enumerate(students, start=1)]
        return [(name, item) for name, item in [*named, ("your own model", own)] if item]
    comparison = metadata.get("majority_comparison")
    return [("your local model", comparison)] if comparison else []


def models_below_majority(metadata: dict) -> list[str]:
    """Names of the models that do not beat always answering the majority class (held-out rows)."""
    return [name for name, item in scored_models(metadata) if not item["beats_majority"]]


def majority_lines(metadata: dict, class_labels: list[str]) -> list[str]:
    """Balanced accuracy and the majority-class guess beside the scores, and a warning with what to try for every
    model no better than the guess by more than the held-out rows' uncertainty."""
    scored = scored_models(metadata)
    if not scored:
        return []
    first = scored[0][1]
    lines = [
        f"Always answering '{class_labels[first['majority_class']]}' (your most frequent class) scores accuracy "
        f"{percent_text(first['majority_accuracy'])}, balanced accuracy "
        f"{percent_text(first['majority_balanced_accuracy'])} on the "
        f"{first['n_rows']} held-out rows.",
        *(
            f"{name[0].upper()}{name[1:]}: accuracy {percent_text(item['accuracy'])}, balanced accuracy "
            f"{percent_text(item['balanced_accuracy'])} (± {percent_number(item['margin'])} points)."
            for name, item in scored
        ),
    ]
    below = models_below_majority(metadata)
    if below:
        lines.append(
            f"Warning: {', '.join(below)} {'does' if len(below) == 1 else 'do'} not beat always answering the "
            "majority class by more than the held-out rows' uncertainty, in accuracy and balanced accuracy: "
            "such a model adds nothing to the federation. Try: more rows; a stronger learner (--student, "
            "--own-model, e.g. xgboost); fewer teachers (--teachers) so each sees more rows; rows of the rare "
            "classes, if one class is most of your rows (class balance); or check that --label-column is the "
            "label. `train --strict` refuses to write such models."
        )
    return lines


def own_model_setting(args, federation: dict, privacy_level: str) -> dict | None:
    """The learner of the silo's own model, or None: not asked for (--no-own-model, --local), not accepted by the
    federation, or a level other than L0 (the own model is trained without noise)."""
    if args.local or args.no_own_model or privacy_level != "L0":
        return None
    if not federation.get("accepts_own_models", True):
        return None
    return learner_setting(args.own_model, args.own_model_param, DEFAULT_OWN_MODEL)


def model_file_stems(result, *, local: bool) -> list[str]:
    """File names without suffix: ``local-model``; or ``student-1`` .. ``student-s`` then ``own-model``."""
    if local:
        return ["local-model"]
    n_students = len(result.models) - (1 if result.metadata.get("own_model") else 0)
    own = ["own-model"] if result.metadata.get("own_model") else []
    return [f"student-{index}" for index in range(1, n_students + 1)] + own


def training_summary(metadata: dict, output: Path, class_labels: list[str]) -> str:
    encoding = metadata["encoding"]
    lines = [
        f"Trained on {metadata['n_local_examples']} rows ({metadata['n_validation_rows']} held out); "
        f"label distribution {metadata['label_distribution']}."
    ]
    if encoding["rows_without_label"]:
        lines.append(f"Dropped {encoding['rows_without_label']} rows without a label.")
    if encoding["missing_values"]:
        shown = ", ".join(f"{name}: {count}" for name, count in encoding["missing_values"].items())
        lines.append(f"Missing values (encoded as the public mean, or no category): {shown}.")
    if encoding["unknown_categories"]:
        shown = "; ".join(
            f"{name}: {', '.join(list(values)[:3])}"
            for name, values in encoding["unknown_categories"].items()
        )
        lines.append(f"Categories the public data lacks (encoded as no category): {shown}.")
    if encoding["ignored_columns"]:
        lines.append(
            f"Ignored columns the federation does not use: {', '.join(encoding['ignored_columns'])}."
        )
    if metadata["algorithm"] == "fedkt":
        how = "chosen for your rows" if metadata.get("design_chosen_for_rows") else "as you asked"
        lines.append(
            f"FedKT: s = {metadata['partitions']} student(s), each on its own disjoint part of your rows, no "
            "teachers (--disjoint-partitions: record-level L1 jobs may use them)."
            if metadata.get("disjoint_partitions")
            else f"FedKT: s = {metadata['partitions']} partition(s) × t = {metadata['teachers']} teacher(s) ({how})."
        )
    lines.append(
        f"Local validation score (accuracy on held-out rows): {percent_text(metadata['local_validation_score'])}."
    )
    lines.extend(majority_lines(metadata, class_labels))
    if metadata.get("own_model"):
        lines.append(
            f"Your own model ({metadata['own_model']['learner']['family']} on all your training rows, uploaded "
            f"beside the students; it never votes in FedKT): accuracy "
            f"{percent_text(metadata['own_model']['validation_score'])} on the held-out rows."
        )
    if metadata["declared_epsilon"] is not None:
        report = metadata["privacy_report"]
        how = (
            f"{report['n_queries']} DP-SGD steps, noise multiplier {report['sigma']:.4g}, the market's RDP accountant"
            if report["mechanism"] == "dp_sgd"
            else f"{report['n_queries']} noisy queries"
        )
        lines.append(
            f"L2: uploading charges ε = {epsilon_text(metadata['declared_epsilon'])} (example-level, data-independent, "
            f"δ = {report['delta']:g}, {how}) to your privacy budget."
        )
    lines.append(f"Wrote {', '.join(metadata['files'])} and {METADATA_FILE} to {output}.")
    return "\n".join(lines)


__all__ = [
    "learner_setting",
    "model_file_stems",
    "own_model_setting",
    "parse_parameters",
    "parse_queries",
    "read_pulled",
    "train",
    "training_summary",
]
