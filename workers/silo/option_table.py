"""The command line's table: every command of ``onefold`` and its options, as data (:mod:`workers.silo.options`
builds the parser from it); the options of the commands that read the silo's own table are in
:mod:`workers.silo.data_options`."""

from __future__ import annotations

from pathlib import Path

from workers.silo import commands
from workers.silo.data_options import (
    AUGMENT_OPTIONS,
    FD_OPTIONS,
    SEEDS_OPTIONS,
    STATISTICS_OPTIONS,
    TRAINING_OPTIONS,
)
from workers.silo.options import Command, Option, option
from workers.silo.webhooks import DEFAULT_TOLERANCE_SECONDS, SIGNATURE_HEADER

MARKET_ENVIRONMENT_VARIABLE = "ONEFOLD_MARKET_URL"

#: The options every command takes.
COMMON_OPTIONS = (
    option(
        "--market",
        environment_default=MARKET_ENVIRONMENT_VARIABLE,
        help=f"market address (default: ${MARKET_ENVIRONMENT_VARIABLE}, else the one you logged in to)",
    ),
    option("--json", action="store_true", help="print one machine-readable JSON object"),
    option(
        "--retries", type=int, default=3, help="retries on connection errors and 5xx (default 3)"
    ),
    option("--timeout", type=float, default=60.0, help="seconds per request (default 60)"),
)

UPLOAD_OPTIONS = (
    option("folder", type=Path, help="folder written by `train` (holds metadata.json)"),
    option("--no-wait", action="store_true", help="do not wait for validation"),
    option("--wait-timeout", type=float, default=600.0, help="seconds to wait for validation"),
    option(
        "--idempotency-key",
        help="the same key with the same files returns the first submission, never a second one (default: "
        "one derived from the folder's files, so running the same upload again is safe)",
    ),
)


def show_or_wait_options(name: str, *, default_timeout: float) -> tuple[Option, ...]:
    """``COMMAND ID`` shows; ``COMMAND wait ID`` polls, with backoff, until it is done or ``--wait-timeout``."""
    return (
        option("action", nargs="?", choices=["show", "wait"], default="show"),
        option(name, type=int),
        option(
            "--wait-timeout",
            type=float,
            default=default_timeout,
            help=f"with wait: seconds to wait before giving up with exit code 8 (default {default_timeout:g})",
        ),
    )


#: The commands whose first word may be left out: ``job 7`` is ``job show 7`` (:func:`show_or_wait_options`).
SHOW_OR_WAIT_COMMANDS = ("job", "submission")

WEBHOOK_OPTIONS = (
    option("action", choices=["verify"]),
    option("--signature", required=True, help=f"the {SIGNATURE_HEADER} header's value as received"),
    option(
        "--body",
        required=True,
        help="file holding the request body exactly as received, or - for standard input",
    ),
    option(
        "--secret",
        environment_default="ONEFOLD_WEBHOOK_SECRET",
        help="the endpoint's signing secret (default: $ONEFOLD_WEBHOOK_SECRET)",
    ),
    option(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE_SECONDS,
        help=f"seconds a delivery may be old (default {DEFAULT_TOLERANCE_SECONDS})",
    ),
)

CATALOG_OPTIONS = (
    option("--search", help="words to look for"),
    option("--federation", help="only this federation's models"),
    option("--ordering", help="newest, oldest, price, -price, accuracy, -accuracy, name, -name"),
    option("--limit", type=int, help="listings per page"),
    option("--offset", type=int, help="listings to skip"),
)

DOWNLOAD_OPTIONS = (
    option("global_model_id", type=int),
    option(
        "--format",
        default="onnx",
        help="raw_onnx (raw columns in, probabilities out: runs with onnxruntime alone), onnx, skops, "
        "xgboost-json, safetensors, kernel_npz or bundle (default onnx)",
    ),
    option(
        "--package",
        action="store_true",
        help="a zip of the file with the model card README.md and feature-spec.json",
    ),
    option(
        "--output",
        type=Path,
        help="file to write (default: global-model-<id>.<format>, .zip added with --package)",
    ),
)

COMMANDS = (
    Command(
        "login",
        "Log in to a market and store the token.",
        commands.login,
        (
            option("--username", required=True),
            option("--password", help="(default: $ONEFOLD_PASSWORD, else asked for)"),
        ),
    ),
    Command("whoami", "Show the logged-in account and organisation.", commands.whoami),
    Command("federations", "List the market's federations.", commands.federations),
    Command(
        "join",
        "Join a federation as your silo organisation.",
        commands.join,
        (option("federation"),),
    ),
    Command(
        "pull",
        "Download a federation's public features and feature specification.",
        commands.pull,
        (
            option("federation"),
            option("--output", type=Path, help="folder (default: ./onefold-<federation>)"),
        ),
    ),
    Command(
        "train",
        "Train FedKT students (or one local model) on your data, offline.",
        commands.train,
        TRAINING_OPTIONS,
    ),
    Command(
        "statistics",
        "Compute your rows' class counts, sums and second moment for a statistics job, offline (at L2 with "
        "your own noise).",
        commands.statistics,
        STATISTICS_OPTIONS,
    ),
    Command(
        "fd",
        "Run your silo's rounds of a federated distillation exchange, then write the network.",
        commands.fd,
        FD_OPTIONS,
    ),
    Command(
        "seeds",
        "Upload seeds of the labels you lack, hidden among other labels, to an augmentation (FAug).",
        commands.seeds,
        SEEDS_OPTIONS,
    ),
    Command(
        "augment",
        "Append generated samples of your target labels to your table (FAug).",
        commands.augment,
        AUGMENT_OPTIONS,
    ),
    Command(
        "upload",
        "Upload trained students and wait for the market's validation.",
        commands.upload,
        UPLOAD_OPTIONS,
    ),
    Command(
        "submission",
        "Show one of your submissions (`submission ID`), or wait for its validation (`submission wait ID`).",
        commands.submission,
        show_or_wait_options("submission_id", default_timeout=600.0),
    ),
    Command(
        "job",
        "Show a job's status and progress (`job ID`), or wait until it ends (`job wait ID`).",
        commands.job,
        show_or_wait_options("job_id", default_timeout=3600.0),
    ),
    Command(
        "webhook",
        f"Check a webhook delivery: `webhook verify` exits 0 when its {SIGNATURE_HEADER} header signs its body.",
        commands.webhook_verify,
        WEBHOOK_OPTIONS,
        epilog="The header reads t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.<body>' keyed with the "
        "endpoint's secret>; a delivery older than the tolerance is refused (exit 3), as a replay. In Python: "
        "workers.silo.webhooks.webhook_signature_verify(secret, header, body).",
    ),
    Command("catalog", "List the models for sale.", commands.catalog, CATALOG_OPTIONS),
    Command(
        "card",
        "Show a listing's model card.",
        commands.card,
        (option("listing_id", type=int),),
    ),
    Command(
        "buy",
        "Buy a listing with your organisation's balance.",
        commands.buy,
        (
            option("listing_id", type=int),
            option(
                "--idempotency-key",
                help="repeat a purchase safely with the same key (default: a new UUID)",
            ),
        ),
    ),
    Command(
        "download",
        "Download a bought global model.",
        commands.download,
        DOWNLOAD_OPTIONS,
        epilog="Start with --format raw_onnx --package: the model reading the federation's raw CSV columns "
        "(the encoding is inside the graph), with README.md (how to run it with onnxruntime and numpy) and "
        "feature-spec.json (the encoding, also at GET /api/global-models/<id>/feature-spec.json). The other "
        "formats read the encoded features; an ensemble's bundle holds manifest.json with each member's "
        "weight, feature view and classes (docs/market.md#downloads).",
    ),
    Command(
        "predict",
        "Predict rows of a table with a bought global model (on the market).",
        commands.predict,
        (
            option("global_model_id", type=int),
            option(
                "--data", required=True, type=Path, help="table of raw rows (CSV, Parquet or NPZ)"
            ),
            option("--limit", type=int, default=1000, help="rows to send at most (default 1000)"),
        ),
    ),
)
