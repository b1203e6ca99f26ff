"""The command-line tool's commands: each parses nothing, calls the client or the training core,
and returns ``(result for --json, text for people)``.

Only ``requests`` and the standard library are imported here: ``train`` and ``predict`` load the training
extras (numpy, pandas, scikit-learn, ...) when they run, so that a buyer's install needs none of them.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import sys
import zipfile
from pathlib import Path

from workers.numbers import credits_text, percent_number, percent_text, size_text
from workers.silo.client import ModelUpload, OnefoldClient
from workers.silo.config import Login, login_load, login_save
from workers.silo.errors import DataError, OnefoldError
from workers.silo.folders import METADATA_FILE, pulled_files, pulled_folder_name
from workers.silo.webhooks import webhook_signature_verify

PROGRESS_MIN_BYTES = 1024**2
UPLOADED_METADATA = (
    "model_family",
    "n_local_examples",
    "local_validation_score",
    "label_distribution",
    "privacy_level",
    "privacy_parameters",
    "declared_epsilon",
    "feature_view",
    "exchange",
    "partitions",
    "teachers",
    "disjoint_partitions",
)


def client_for(args) -> OnefoldClient:
    """A client with the stored token, refused if the token belongs to another market than ``--market``."""
    login = login_load(market_url=args.market)
    return OnefoldClient(
        login.market_url, login.token, retries=args.retries, timeout_seconds=args.timeout
    )


# --- accounts and federations -------------------------------------------------------------------


def login(args):
    if not args.market:
        raise OnefoldError(
            "Give the market's address: --market https://market.example.org/ "
            "(or set ONEFOLD_MARKET_URL)."
        )
    client = OnefoldClient(args.market, retries=args.retries, timeout_seconds=args.timeout)
    client.token = client.obtain_token(username=args.username, password=args.password)
    profile = client.me()
    path = login_save(
        Login(market_url=client.market_url, token=client.token, username=args.username)
    )
    organisation = profile.organisation.name if profile.organisation else None
    text = (
        f"Logged in to {client.market_url} as {profile.username}"
        f"{f' ({organisation})' if organisation else ''}. Token stored in {path}."
    )
    return {
        "market_url": client.market_url,
        "username": profile.username,
        "organisation": organisation,
        "is_operator": profile.is_operator,
        "config": str(path),
    }, text


def whoami(args):
    client = client_for(args)
    profile = client.me()
    organisation = profile.organisation.name if profile.organisation else "none"
    return {**profile.data, "market_url": client.market_url}, (
        f"{profile.username} on {client.market_url}; organisation: {organisation}"
        f"{'; operator' if profile.is_operator else ''}"
    )


def federations(args):
    listed = client_for(args).federations()
    lines = [f"{'slug':<28} {'member':<7} {'classes':<24} name"]
    lines += [
        f"{item.slug:<28} {'yes' if item.is_member else 'no':<7} "
        f"{', '.join(item.class_labels)[:24]:<24} {item.name}"
        for item in listed
    ]
    return {"federations": [item.data for item in listed]}, (
        "\n".join(lines) if listed else "The market has no federations yet."
    )


def join(args):
    federation = client_for(args).federation_join(args.federation)
    if federation.is_member:
        return federation.data, f"Your organisation is a member of '{federation.slug}'."
    return federation.data, (
        f"Your organisation asked to join '{federation.slug}'; the market's operator admits or refuses the "
        "request. Run this command again to see whether you are in."
    )


def pull(args):
    client = client_for(args)
    folder = args.output or Path(pulled_folder_name(args.federation))
    federation = client.federation(args.federation)
    features = client.public_features(args.federation)
    spec = client.feature_spec(args.federation)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in pulled_files(
        features=features, feature_spec=spec, federation=federation.data
    ).items():
        (folder / name).write_bytes(data)
    n_public = npz_rows(features, "features")
    result = {
        "folder": str(folder),
        "n_public_rows": n_public,
        "n_features": spec["n_features"],
        "columns": [column["name"] for column in spec["columns"]],
        "label_column": federation.label_column,
        "class_labels": federation.class_labels,
    }
    return result, (
        f"Wrote {folder}/features.npz ({n_public} public rows × {spec['n_features']} encoded features), "
        f"feature-spec.json and federation.json. Your table needs the columns "
        f"{', '.join(result['columns'])} and the label column '{federation.label_column}' "
        f"({', '.join(federation.class_labels)})."
    )


def npz_rows(npz: bytes, name: str) -> int:
    """The number of rows of array ``name`` in NPZ bytes, read from the ``.npy`` header alone (no numpy: the
    header is a Python dict literal after the magic, the version and the header's length; numpy's format spec)."""
    try:
        with zipfile.ZipFile(io.BytesIO(npz)) as archive, archive.open(f"{name}.npy") as member:
            prefix = member.read(8)
            if prefix[:6] != b"\x93NUMPY":
                raise ValueError("not an .npy array")
            length = int.from_bytes(member.read(2 if prefix[6] == 1 else 4), "little")
            header = member.read(length).decode("latin-1")
            return int(ast.literal_eval(header)["shape"][0])
    except (KeyError, ValueError, SyntaxError, IndexError, TypeError, zipfile.BadZipFile) as error:
        raise DataError(
            f"The market sent public features that are not an NPZ array '{name}' ({error})."
        ) from error


def fd(args):
    """``fd``: a silo's rounds of a federated distillation exchange (:mod:`workers.silo.fd_command`, [train] extra)."""
    from workers.silo.fd_command import fd as fd_rounds  # numpy, torch: loaded only when it runs

    return fd_rounds(args, client_for(args))


def train(args):
    """``train``: loads the training extras (:mod:`workers.silo.training_command`) only when it runs."""
    from workers.silo.training_command import (
        train as train_students,  # numpy, scikit-learn, torch: [train] extra
    )

    return train_students(args)


def statistics(args):
    """``statistics``: a silo's sufficient statistics (:mod:`workers.silo.statistics_command`), loaded when it runs."""
    from workers.silo.statistics_command import (
        statistics as silo_statistics,  # numpy: [train] extra
    )

    return silo_statistics(args)


def seeds(args):
    """``seeds``: pick and upload a silo's FAug seeds (:mod:`workers.silo.augment`)."""
    from workers.silo.augment import seeds as seeds_upload  # pandas: loaded only when it runs

    return seeds_upload(args, client_for(args))


def augment(args):
    """``augment``: loads the training extras (:mod:`workers.silo.augment`) only when it runs."""
    from workers.silo.augment import augment as augment_table  # the [train] extra

    return augment_table(args, client_for(args) if args.augmentation is not None else None)


# --- upload -------------------------------------------------------------------------------------


def progress_bar(sent: int, total: int) -> None:
    width = 30
    done = int(width * sent / total) if total else width
    print(
        f"\rUploading [{'#' * done}{' ' * (width - done)}] {100 * sent // max(total, 1):3d}% "
        f"{sent / 1024**2:.1f}/{total / 1024**2:.1f} MiB",
        end="" if sent < total else "\n",
        file=sys.stderr,
        flush=True,
    )


def read_trained(folder: Path) -> tuple[dict, list[ModelUpload]]:
    try:
        metadata = json.loads((folder / METADATA_FILE).read_text())
        uploads = [ModelUpload(name, (folder / name).read_bytes()) for name in metadata["files"]]
    except (OSError, ValueError, KeyError) as error:
        raise DataError(
            f"{folder} does not hold the output of `train` ({error}); train first."
        ) from error
    return metadata, uploads


def own_model_metadata(metadata: dict) -> dict:
    """What the market asks of an own model that `train` wrote: the file's name and its held-out score."""
    own = metadata.get("own_model")
    if not own:
        return {}
    return {"own_model_file": own["file"], "own_model_validation_score": own["validation_score"]}


def upload_key(metadata: dict, uploads: list[ModelUpload]) -> str:
    """The default Idempotency-Key of an upload: a digest of its federation and files, so that running the same
    upload again (after a lost answer, or by a retrying script) returns the first submission."""
    digest = hashlib.sha256(metadata["federation"].encode())
    for item in uploads:
        digest.update(
            hashlib.sha256(item.name.encode()).digest() + hashlib.sha256(item.data).digest()
        )
    return f"upload-{digest.hexdigest()}"


def upload(args):
    client = client_for(args)
    metadata, uploads = read_trained(args.folder)
    total = sum(len(item.data) for item in uploads)
    progress = progress_bar if total >= PROGRESS_MIN_BYTES and not args.json else None
    key = args.idempotency_key or upload_key(metadata, uploads)
    submission = client.submission_create(
        federation=metadata["federation"],
        files=uploads,
        metadata={
            **{name: metadata.get(name) for name in UPLOADED_METADATA},
            **own_model_metadata(metadata),
        },
        progress=progress,
        idempotency_key=key,
    )
    if not args.no_wait:
        submission = client.submission_wait(submission.id, timeout_seconds=args.wait_timeout)
    verdict = {
        "valid": "valid: the market accepted it",
        "pending": "pending: a worker will validate it",
    }.get(submission.status, submission.status)
    return {**submission.data, "idempotency_key": key}, (
        f"Uploaded {len(uploads)} file(s) ({size_text(total)}) as submission #{submission.id} "
        f"to '{metadata['federation']}'; status {verdict}."
    )


#: ``wait``'s polls: first after 1 s, then each 1.5 times longer, at most 15 s apart.
WAIT_FIRST_POLL_SECONDS, WAIT_BACKOFF = 1.0, 1.5


def submission(args):
    client = client_for(args)
    if args.action == "wait":
        found = client.submission_wait(
            args.submission_id,
            timeout_seconds=args.wait_timeout,
            interval_seconds=WAIT_FIRST_POLL_SECONDS,
            backoff=WAIT_BACKOFF,
        )
    else:
        found = client.submission(args.submission_id)
    reason = f" ({found.rejection_reason})" if found.rejection_reason else ""
    return found.data, f"Submission #{found.id} to '{found.federation}': {found.status}{reason}."


def job(args):
    client = client_for(args)
    if args.action == "wait":
        found = client.job_wait(
            args.job_id,
            timeout_seconds=args.wait_timeout,
            interval_seconds=WAIT_FIRST_POLL_SECONDS,
            backoff=WAIT_BACKOFF,
        )
    else:
        found = client.job(args.job_id)
    reason = f" ({found.failure_reason})" if found.failure_reason else ""
    return found.data, (
        f"Job #{found.id} ({found.kind}, {found.privacy_level}): {found.status}"
        f"{reason}; stage {found.progress.get('stage') or '-'} {found.progress.get('percent', 0)}%; "
        f"global model {found.global_model or '-'}."
    )


# --- webhooks -----------------------------------------------------------------------------------


def webhook_verify(args):
    """``webhook verify``: exit 0 when the delivery's signature header signs its body (:mod:`workers.silo.webhooks`)."""
    if not args.secret:
        raise OnefoldError("Give the endpoint's secret: --secret, or set ONEFOLD_WEBHOOK_SECRET.")
    try:
        body = sys.stdin.buffer.read() if str(args.body) == "-" else Path(args.body).read_bytes()
    except OSError as error:
        raise DataError(f"Cannot read the delivery's body from {args.body} ({error}).") from error
    timestamp = webhook_signature_verify(
        args.secret, args.signature, body, tolerance=args.tolerance
    )
    return {"valid": True, "timestamp": timestamp, "body_bytes": len(body)}, (
        f"Valid: signed by the market at {timestamp} (unix seconds) over these {len(body)} bytes."
    )


# --- buyers -------------------------------------------------------------------------------------


def catalog(args):
    page = client_for(args).listings(
        search=args.search,
        federation=args.federation,
        ordering=args.ordering,
        limit=args.limit,
        offset=args.offset,
    )
    lines = [f"{'id':>5} {'price (credits)':>15} {'accuracy (%)':>12}  {'model':>5}  name"]
    for item in page.results:
        lines.append(
            f"{item.id:>5} {credits_text(item.price_cents):>15} {percent_number(item.accuracy):>12}  "
            f"{item.global_model:>5}  {item.name}"
        )
        # the web catalog's badges, under the row they qualify
        lines.extend(f"{'':>5} Warning: {flag}" for flag in item.quality_flags or [])
    return {"listings": [item.data for item in page.results], "count": page.count}, (
        "\n".join(lines) if page.results else "No models for sale match."
    )


def card(args):
    found = client_for(args).listing(args.listing_id)
    details = found.card or {}
    task, algorithm = details.get("task") or {}, details.get("algorithm") or {}
    formats = ", ".join(
        f"{item['format']} ({size_text(item['size_bytes'])})" for item in details.get("formats", [])
    )
    lines = [
        f"#{found.id} {found.name} [{found.status}] — {credits_text(found.price_cents)} credits",
        f"Federation: {found.federation} ({', '.join(task.get('classes', []))}); global model "
        f"#{found.global_model}, {found.model_family}, {algorithm.get('name', '')}, {found.privacy_level}",
        f"Accuracy {percent_text(found.accuracy)}, balanced accuracy {percent_text(found.balanced_accuracy)}, "
        f"macro F1 {percent_text(found.macro_f1)}, ROC AUC {percent_text(found.roc_auc)}"
        f" on {details.get('evaluation_rows', '?')} evaluation rows",
        f"Contributing silos: {details.get('contributing_silos', '?')}; formats: {formats or '-'}",
        f"Licence: {found.licence_text}",
    ]
    warnings = (details.get("quality") or {}).get("warnings") or []
    if warnings:  # first after the title, as the card's page puts them
        lines[1:1] = ["Warning: read before buying", *(f"- {warning}" for warning in warnings)]
    if found.description:
        lines.insert(1, found.description)
    return found.data, "\n".join(lines)


def buy(args):
    purchase = client_for(args).purchase(args.listing_id, idempotency_key=args.idempotency_key)
    return purchase.data, (
        f"Bought listing #{args.listing_id} ({purchase.listing_name}) for "
        f"{credits_text(purchase.price_cents)} credits: purchase #{purchase.id}; download it with "
        f"`python -m workers.silo download {purchase.global_model}`."
    )


def download(args):
    data, link = client_for(args).global_model_download(
        args.global_model_id, file_format=args.format, package=args.package
    )
    suffix = f"{args.format}.zip" if args.package else args.format
    output = args.output or Path(
        link.filename or f"onefold-global-model-{args.global_model_id}.{suffix}"
    )
    output.write_bytes(data)
    return {
        "file": str(output),
        "size_bytes": len(data),
        "expires_at": link.expires_at,
    }, f"Wrote {output} ({size_text(len(data))})."


def predict(args):
    from workers.silo.table import load_table

    frame = load_table(args.data).head(args.limit)
    rows = json.loads(frame.to_json(orient="records"))
    prediction = client_for(args).predict(args.global_model_id, rows)
    labels = prediction.class_labels
    shown = [
        labels[value] if isinstance(value, int) and labels else value
        for value in prediction.classes
    ]
    return prediction.data, "\n".join(str(value) for value in shown)


__all__ = [
    "buy",
    "card",
    "catalog",
    "client_for",
    "download",
    "federations",
    "job",
    "join",
    "login",
    "predict",
    "pull",
    "submission",
    "train",
    "upload",
    "webhook_verify",
    "whoami",
]
