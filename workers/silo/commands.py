"""The command-line tool's commands: each parses nothing, calls the client or the training core,
and returns ``(result for --json, text for people)``."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np

from workers.features import features_in_view, view_width
from workers.silo.client import ModelUpload, OnefoldClient
from workers.silo.config import Login, login_load, login_save
from workers.silo.errors import DataError, OnefoldError

PROGRESS_MIN_BYTES = 1024**2
METADATA_FILE = "metadata.json"
UPLOADED_METADATA = ("model_family", "n_local_examples", "local_validation_score", "label_distribution",
                     "privacy_level", "privacy_parameters", "declared_epsilon", "feature_view")


def client_for(args) -> OnefoldClient:
    """A client with the stored token, refused if the token belongs to another market than ``--market``."""
    login = login_load(market_url=args.market)
    return OnefoldClient(login.market_url, login.token, retries=args.retries, timeout_seconds=args.timeout)


# --- accounts and federations -------------------------------------------------------------------

def login(args):
    if not args.market:
        raise OnefoldError("Give the market's address: --market https://market.example.org/ "
                           "(or set ONEFOLD_MARKET_URL).")
    client = OnefoldClient(args.market, retries=args.retries, timeout_seconds=args.timeout)
    client.token = client.obtain_token(username=args.username, password=args.password)
    profile = client.me()
    path = login_save(Login(market_url=client.market_url, token=client.token, username=args.username))
    organisation = (profile.get("organisation") or {}).get("name")
    text = (f"Logged in to {client.market_url} as {profile['username']}"
            f"{f' ({organisation})' if organisation else ''}. Token stored in {path}.")
    return {"market_url": client.market_url, "username": profile["username"], "organisation": organisation,
            "is_operator": profile["is_operator"], "config": str(path)}, text


def whoami(args):
    client = client_for(args)
    profile = client.me()
    organisation = profile.get("organisation") or {}
    return {**profile, "market_url": client.market_url}, (
        f"{profile['username']} on {client.market_url}; organisation: {organisation.get('name', 'none')}"
        f"{'; operator' if profile['is_operator'] else ''}")


def federations(args):
    listed = client_for(args).federations()
    lines = [f"{'slug':<28} {'member':<7} {'classes':<24} name"]
    lines += [f"{item['slug']:<28} {'yes' if item['is_member'] else 'no':<7} "
              f"{', '.join(item['class_labels'])[:24]:<24} {item['name']}" for item in listed]
    return {"federations": listed}, "\n".join(lines) if listed else "The market has no federations yet."


def join(args):
    federation = client_for(args).federation_join(args.federation)
    return federation, f"Your organisation is a member of '{federation['slug']}'."


def pulled_folder(args) -> Path:
    return args.pulled if getattr(args, "pulled", None) else Path(f"onefold-{args.federation}")


def pull(args):
    client = client_for(args)
    folder = args.output or Path(f"onefold-{args.federation}")
    federation = client.federation(args.federation)
    features = client.public_features(args.federation)
    spec = client.feature_spec(args.federation)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "features.npz").write_bytes(features)
    (folder / "feature-spec.json").write_text(json.dumps(spec, indent=2))
    (folder / "federation.json").write_text(json.dumps(federation, indent=2))
    n_public = len(np.load(io.BytesIO(features), allow_pickle=False)["features"])
    result = {"folder": str(folder), "n_public_rows": n_public, "n_features": spec["n_features"],
              "columns": [column["name"] for column in spec["columns"]], "label_column": federation["label_column"],
              "class_labels": federation["class_labels"]}
    return result, (f"Wrote {folder}/features.npz ({n_public} public rows × {spec['n_features']} encoded features), "
                    f"feature-spec.json and federation.json. Your table needs the columns "
                    f"{', '.join(result['columns'])} and the label column '{federation['label_column']}' "
                    f"({', '.join(federation['class_labels'])}).")


# --- training -----------------------------------------------------------------------------------

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
    from workers.learners.registry import make_learner  # scikit-learn: loaded only by the commands that train

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
        raise DataError(f"--queries must be a count (e.g. 300) or a fraction (e.g. 0.1), not {text!r}.") from None


def read_pulled(folder: Path, slug: str) -> tuple[dict, dict, np.ndarray]:
    try:
        federation = json.loads((folder / "federation.json").read_text())
        spec = json.loads((folder / "feature-spec.json").read_text())
        with np.load(folder / "features.npz", allow_pickle=False) as arrays:
            public_features = arrays["features"]
    except (OSError, ValueError, KeyError) as error:
        raise DataError(f"{folder} does not hold a complete pull of '{slug}' ({error}); run "
                        f"`python -m workers.silo pull {slug}` first.") from error
    if federation.get("slug") != slug:
        raise DataError(f"{folder} holds a pull of '{federation.get('slug')}', not of '{slug}'.")
    return federation, spec, public_features


def train(args):
    from workers.silo.students import export_student
    from workers.silo.training import (DEFAULT_STUDENT, DEFAULT_TEACHER, TrainingSettings, encode_silo_table,
                                       fedkt_party_train, load_table, local_train, per_label_logits)

    federation, spec, public_features = read_pulled(pulled_folder(args), args.federation)
    if args.privacy_level not in federation["allowed_privacy_levels"]:
        raise DataError(f"'{args.federation}' allows privacy levels {', '.join(federation['allowed_privacy_levels'])}, "
                        f"not {args.privacy_level}.")
    settings = TrainingSettings(
        partitions=args.partitions, teachers=args.teachers,
        teacher=learner_setting(args.teacher, args.teacher_param, DEFAULT_TEACHER),
        student=learner_setting(args.student, args.student_param, DEFAULT_STUDENT), privacy_level=args.privacy_level,
        gamma=args.gamma, sigma=args.sigma, delta=args.delta, queries=parse_queries(args.queries),
        validation_fraction=args.validation_fraction, min_rows_per_teacher=args.min_rows_per_teacher, seed=args.seed)
    n_classes = len(federation["class_labels"])
    view = settings.feature_view(local=args.local)
    data = encode_silo_table(load_table(args.data), spec, label_column=args.label_column or federation["label_column"],
                             class_labels=federation["class_labels"], view=view)
    result = (local_train(data, n_classes=n_classes, settings=settings) if args.local
              else fedkt_party_train(data, features_in_view(public_features, spec, view), n_classes=n_classes,
                                     settings=settings))
    output = args.output or pulled_folder(args) / ("local-model" if args.local else "students")
    output.mkdir(parents=True, exist_ok=True)
    files = []
    for index, model in enumerate(result.models, start=1):
        exported = export_student(model, n_features=view_width(spec, view), n_classes=n_classes)
        name = f"{'local-model' if args.local else f'student-{index}'}{exported.suffix}"
        (output / name).write_bytes(exported.data)
        files.append(name)
    metadata = {"federation": args.federation, "model_family": exported.model_family, "files": files,
                **result.metadata}
    if args.fd_logits:
        logits = per_label_logits(result.models[0], data.features, data.labels, n_classes=n_classes)
        (output / "fd-logits.json").write_text(json.dumps({"class_labels": federation["class_labels"], **logits},
                                                          indent=2))
        metadata["fd_logits_file"] = "fd-logits.json"
    (output / METADATA_FILE).write_text(json.dumps(metadata, indent=2))
    return {**metadata, "output": str(output)}, training_summary(metadata, output)


def training_summary(metadata: dict, output: Path) -> str:
    encoding = metadata["encoding"]
    lines = [f"Trained on {metadata['n_local_examples']} rows ({metadata['n_validation_rows']} held out); "
             f"label distribution {metadata['label_distribution']}."]
    if encoding["rows_without_label"]:
        lines.append(f"Dropped {encoding['rows_without_label']} rows without a label.")
    if encoding["missing_values"]:
        shown = ", ".join(f"{name}: {count}" for name, count in encoding["missing_values"].items())
        lines.append(f"Missing values (encoded as the public mean, or no category): {shown}.")
    if encoding["unknown_categories"]:
        shown = "; ".join(f"{name}: {', '.join(list(values)[:3])}" for name, values in
                          encoding["unknown_categories"].items())
        lines.append(f"Categories the public data lacks (encoded as no category): {shown}.")
    if encoding["ignored_columns"]:
        lines.append(f"Ignored columns the federation does not use: {', '.join(encoding['ignored_columns'])}.")
    lines.append(f"Local validation score (accuracy on held-out rows): {metadata['local_validation_score']:.4f}.")
    if metadata["declared_epsilon"] is not None:
        report = metadata["privacy_report"]
        lines.append(f"L2: uploading charges ε = {metadata['declared_epsilon']:.4f} (example-level, data-independent, "
                     f"δ = {report['delta']:g}, {report['n_queries']} noisy queries) to your privacy budget.")
    lines.append(f"Wrote {', '.join(metadata['files'])} and {METADATA_FILE} to {output}.")
    return "\n".join(lines)


# --- upload -------------------------------------------------------------------------------------

def progress_bar(sent: int, total: int) -> None:
    width = 30
    done = int(width * sent / total) if total else width
    print(f"\rUploading [{'#' * done}{' ' * (width - done)}] {100 * sent // max(total, 1):3d}% "
          f"{sent / 1024**2:.1f}/{total / 1024**2:.1f} MiB", end="" if sent < total else "\n", file=sys.stderr,
          flush=True)


def read_trained(folder: Path) -> tuple[dict, list[ModelUpload]]:
    try:
        metadata = json.loads((folder / METADATA_FILE).read_text())
        uploads = [ModelUpload(name, (folder / name).read_bytes()) for name in metadata["files"]]
    except (OSError, ValueError, KeyError) as error:
        raise DataError(f"{folder} does not hold the output of `train` ({error}); train first.") from error
    return metadata, uploads


def upload(args):
    client = client_for(args)
    metadata, uploads = read_trained(args.folder)
    total = sum(len(item.data) for item in uploads)
    progress = progress_bar if total >= PROGRESS_MIN_BYTES and not args.json else None
    submission = client.submission_create(federation=metadata["federation"], files=uploads,
                                          metadata={name: metadata.get(name) for name in UPLOADED_METADATA},
                                          progress=progress)
    if not args.no_wait:
        submission = client.submission_wait(submission["id"], timeout_seconds=args.wait_timeout)
    verdict = {"valid": "valid: the market accepted it", "pending": "pending: a worker will validate it",
               }.get(submission["status"], submission["status"])
    return submission, (f"Uploaded {len(uploads)} file(s) ({total / 1024:.0f} KiB) as submission #{submission['id']} "
                        f"to '{metadata['federation']}'; status {verdict}.")


def submission(args):
    found = client_for(args).submission(args.submission_id)
    reason = f" ({found['rejection_reason']})" if found["rejection_reason"] else ""
    return found, f"Submission #{found['id']} to '{found['federation']}': {found['status']}{reason}."


def job(args):
    found = client_for(args).job(args.job_id)
    progress = found.get("progress") or {}
    reason = f" ({found['failure_reason']})" if found.get("failure_reason") else ""
    return found, (f"Job #{found['id']} ({found.get('kind')}, {found.get('privacy_level')}): {found['status']}"
                   f"{reason}; stage {progress.get('stage') or '-'} {progress.get('percent', 0)}%; "
                   f"global model {found.get('global_model') or '-'}.")


# --- buyers -------------------------------------------------------------------------------------

def catalog(args):
    answer = client_for(args).listings(search=args.search, federation=args.federation, ordering=args.ordering,
                                       limit=args.limit, offset=args.offset)
    listings = answer["results"] if isinstance(answer, dict) and "results" in answer else answer
    lines = [f"{'id':>5} {'price':>10} {'accuracy':>8}  {'model':>5}  name"] + [
        f"{item['id']:>5} {item['price_cents'] / 100:>10.2f} {_score(item.get('accuracy')):>8}  "
        f"{item['global_model']:>5}  {item['name']}" for item in listings]
    return {"listings": listings, "count": answer.get("count", len(listings)) if isinstance(answer, dict)
            else len(listings)}, "\n".join(lines) if listings else "No models for sale match."


def _score(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def card(args):
    found = client_for(args).listing(args.listing_id)
    details = found.get("card") or {}
    task, algorithm = details.get("task") or {}, details.get("algorithm") or {}
    formats = ", ".join(f"{item['format']} ({item['size_bytes'] / 1024:.0f} KiB)" for item in details.get("formats", []))
    lines = [f"#{found['id']} {found['name']} [{found['status']}] — {found['price_cents'] / 100:.2f}",
             f"Federation: {found['federation']} ({', '.join(task.get('classes', []))}); global model "
             f"#{found['global_model']}, {found['model_family']}, {algorithm.get('name', '')}, {found['privacy_level']}",
             f"Accuracy {_score(found.get('accuracy'))}, balanced accuracy {_score(found.get('balanced_accuracy'))}, "
             f"macro F1 {_score(found.get('macro_f1'))}, ROC AUC {_score(found.get('roc_auc'))}"
             f" on {details.get('evaluation_rows', '?')} evaluation rows",
             f"Contributing silos: {details.get('contributing_silos', '?')}; formats: {formats or '-'}",
             f"Licence: {found['licence_text']}"]
    if found.get("description"):
        lines.insert(1, found["description"])
    return found, "\n".join(lines)


def buy(args):
    purchase = client_for(args).purchase(args.listing_id, idempotency_key=args.idempotency_key)
    return purchase, (f"Bought listing #{args.listing_id} ({purchase['listing_name']}) for "
                      f"{purchase['price_cents'] / 100:.2f}: purchase #{purchase['id']}; download it with "
                      f"`python -m workers.silo download {purchase['global_model']}`.")


def download(args):
    data, link = client_for(args).global_model_download(args.global_model_id, file_format=args.format)
    output = args.output or Path(f"global-model-{args.global_model_id}.{args.format}")
    output.write_bytes(data)
    return {"file": str(output), "size_bytes": len(data), "expires_at": link.get("expires_at")}, \
        f"Wrote {output} ({len(data) / 1024:.0f} KiB)."


def predict(args):
    from workers.silo.training import load_table

    frame = load_table(args.data).head(args.limit)
    rows = json.loads(frame.to_json(orient="records"))
    answer = client_for(args).predict(args.global_model_id, rows)
    labels = answer.get("class_labels") or []
    classes = answer.get("classes", [])
    shown = [labels[value] if isinstance(value, int) and labels else value for value in classes]
    return answer, "\n".join(str(value) for value in shown)


__all__ = ["buy", "card", "catalog", "client_for", "download", "federations", "job", "join", "login", "predict",
           "pull", "submission", "train", "upload", "whoami"]
