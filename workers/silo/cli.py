"""``onefold`` (or ``python -m workers.silo``): the silo toolkit's command line (login, pull, train, upload, buy, ...).

Every command prints a short human summary, or with ``--json`` one JSON object on stdout. Every
error prints one sentence on stderr (with ``--json`` instead one ``{"error": {"message", "status",
"exit_code"}}`` object on stderr, nothing on stdout) and exits with the code of its
:mod:`workers.silo.errors` class: a bad command line (2), the silo's data (3), login (4), the market's
refusal (5), the market unreachable or failing (6), the market's "no" (7), a wait that timed out (8).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import signal
import sys
from pathlib import Path

from workers.modelio.families import LEARNER_FAMILY_NAMES
from workers.silo import commands
from workers.silo.defaults import (
    DEFAULT_OWN_MODEL,
    DEFAULT_PARTITIONS,
    DEFAULT_STUDENT,
    DEFAULT_TEACHER,
    DEFAULT_TEACHERS,
    MIN_ROWS_PER_TEACHER,
    MIN_TRAINING_ROWS,
    learner_described,
)
from workers.silo.errors import EXIT_ERROR, EXIT_USAGE, OnefoldError
from workers.silo.webhooks import DEFAULT_TOLERANCE_SECONDS, SIGNATURE_HEADER

MARKET_ENVIRONMENT_VARIABLE = "ONEFOLD_MARKET_URL"
# The extra that brings each package `train`, `fd`, `augment` and `predict` load when they run (workers/pyproject.toml):
# `[train]` for the tree families, `[neural]` also for the zoo networks, DP-SGD and federated distillation.
EXTRA_OF_PACKAGE = {
    **dict.fromkeys(
        (
            "numpy",
            "scipy",
            "pandas",
            "pyarrow",
            "sklearn",
            "xgboost",
            "onnx",
            "onnxruntime",
            "skl2onnx",
            "onnxmltools",
            "safetensors",
            "opendp",
        ),
        "train",
    ),
    "torch": "neural",
    "opacus": "neural",
}


class CommandLineParser(argparse.ArgumentParser):
    """argparse, whose usage errors are one JSON object on stderr when the command line asks for ``--json``."""

    json_errors = False

    def error(self, message: str):
        if not self.json_errors:
            super().error(message)
        print(
            json.dumps({"error": {"message": message, "status": None, "exit_code": EXIT_USAGE}}),
            file=sys.stderr,
        )
        raise SystemExit(EXIT_USAGE)


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--market",
        default=os.environ.get(MARKET_ENVIRONMENT_VARIABLE),
        help=f"market address (default: ${MARKET_ENVIRONMENT_VARIABLE}, else the one you logged in to)",
    )
    common.add_argument(
        "--json", action="store_true", help="print one machine-readable JSON object"
    )
    common.add_argument(
        "--retries", type=int, default=3, help="retries on connection errors and 5xx (default 3)"
    )
    common.add_argument(
        "--timeout", type=float, default=60.0, help="seconds per request (default 60)"
    )
    return common


def _training_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("federation", help="federation slug (as in `federations`)")
    parser.add_argument(
        "--data", required=True, type=Path, help="your labelled table: CSV, Parquet or NPZ"
    )
    parser.add_argument(
        "--pulled", type=Path, help="folder written by `pull` (default: ./onefold-<federation>)"
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="folder for the students and metadata.json (default: ./onefold-<federation>/students)",
    )
    parser.add_argument(
        "--label-column", help="column with your labels (default: the federation's)"
    )
    parser.add_argument(
        "-s",
        "--partitions",
        type=int,
        default=None,
        help=f"FedKT's s: partitions, one student each (default {DEFAULT_PARTITIONS}; 1 when your rows "
        "allow only one teacher)",
    )
    parser.add_argument(
        "-t",
        "--teachers",
        type=int,
        default=None,
        help=f"FedKT's t: teachers per partition (default: as many as your training rows give "
        f"{MIN_ROWS_PER_TEACHER} rows each, at most {DEFAULT_TEACHERS}, at least 1)",
    )
    parser.add_argument(
        "--disjoint-partitions",
        action="store_true",
        help="fit each of the s students directly on its own disjoint part of your rows (no teachers) and "
        "declare it, for record-level L1 jobs (one record then moves one student's vote); L0 and L1 only",
    )
    parser.add_argument(
        "--teacher",
        help=f"teacher family ({', '.join(LEARNER_FAMILY_NAMES)}; default: {learner_described(DEFAULT_TEACHER)})",
    )
    parser.add_argument(
        "--teacher-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="teacher hyperparameter, repeatable (e.g. n_estimators=50); a family other than the default "
        "starts from that family's own settings (random_forest and xgboost: 100 trees)",
    )
    parser.add_argument(
        "--student",
        help=f"student (or --local model) family (default: {learner_described(DEFAULT_STUDENT)})",
    )
    parser.add_argument(
        "--student-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="student hyperparameter, repeatable (e.g. max_depth=8)",
    )
    parser.add_argument(
        "--privacy-level",
        choices=["L0", "L1", "L2"],
        default=None,
        help="L0/L1: no party noise; L2: noise on your teachers' votes (needs --gamma or --sigma), "
        "or with --local a network trained with DP-SGD (--noise-multiplier or --target-epsilon); "
        "default: the federation's default level, which the upload page preselects too",
    )
    parser.add_argument(
        "--gamma", type=float, help="L2 Laplace noise parameter γ (larger: less noise, more ε)"
    )
    parser.add_argument("--sigma", type=float, help="L2 Gaussian noise scale σ")
    parser.add_argument(
        "--delta", type=float, default=1e-5, help="δ of the declared (ε, δ) (default 1e-5)"
    )
    parser.add_argument(
        "--noise-multiplier",
        type=float,
        help="L2 with --local: DP-SGD noise multiplier σ (Opacus; "
        "--student mlp or cnn, batch_size and epochs as "
        "--student-param)",
    )
    parser.add_argument(
        "--target-epsilon",
        type=float,
        help="L2 with --local: solve the DP-SGD noise multiplier for "
        "this ε instead (the market's RDP accountant)",
    )
    parser.add_argument(
        "--max-grad-norm",
        type=float,
        default=1.0,
        help="DP-SGD per-example clipping norm (default 1)",
    )
    parser.add_argument(
        "--queries",
        default="1.0",
        help="public rows labelled per partition: a count, or a fraction "
        "with a decimal point (default 1.0: all)",
    )
    parser.add_argument(
        "--validation-fraction",
        type=float,
        default=0.2,
        help="share of your rows held out to score the students (default 0.2)",
    )
    parser.add_argument(
        "--min-rows-per-teacher",
        type=int,
        default=MIN_ROWS_PER_TEACHER,
        help=f"refuse to train teachers on fewer rows (default {MIN_ROWS_PER_TEACHER}; one teacher "
        f"trains on {MIN_TRAINING_ROWS} or more)",
    )
    parser.add_argument(
        "--own-model",
        help=f"family of your own model on all your training rows, uploaded beside the students where the "
        f"federation accepts own models, at L0 (default: {learner_described(DEFAULT_OWN_MODEL)})",
    )
    parser.add_argument(
        "--own-model-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="own model hyperparameter, repeatable (e.g. max_depth=12)",
    )
    parser.add_argument(
        "--no-own-model",
        action="store_true",
        help="train and upload the FedKT students only",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of shuffles and models (never of DP noise)"
    )
    parser.add_argument(
        "--local",
        action="store_true",
        help="train one local model (for ensembles) instead of FedKT students",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse (exit 3, nothing written) when a model does not beat always answering the majority class "
        "on the held-out rows, in accuracy and balanced accuracy",
    )
    parser.add_argument(
        "--fd-logits",
        action="store_true",
        help="also write fd-logits.json: per-label average logits for federated distillation",
    )


def _statistics_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("federation", help="federation slug (as in `federations`)")
    parser.add_argument(
        "--data", required=True, type=Path, help="your labelled table: CSV, Parquet or NPZ"
    )
    parser.add_argument(
        "--pulled", type=Path, help="folder written by `pull` (default: ./onefold-<federation>)"
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="JSON file to write (default: ./onefold-<federation>/statistics.json)",
    )
    parser.add_argument(
        "--label-column", help="column with your labels (default: the federation's)"
    )
    parser.add_argument(
        "--privacy-level",
        choices=["L0", "L2"],
        help="L0 (exact statistics) or L2 (your own Gaussian noise; default: the federation's level)",
    )
    parser.add_argument(
        "--epsilon", type=float, help="L2: the example-level ε your noise may cost (e.g. 1)"
    )
    parser.add_argument("--delta", type=float, default=1e-5, help="L2: δ (default 1e-5)")
    parser.add_argument(
        "--clip-norm",
        type=float,
        help="clip each encoded row to this norm where the federation sets none (default 2)",
    )
    parser.add_argument(
        "--naive-bayes",
        action="store_true",
        help="also release per-class squares (naive Bayes reads them; at L2 they take a share of the noise)",
    )


def build_parser(
    prog: str = "python -m workers.silo", *, json_errors: bool = False
) -> argparse.ArgumentParser:
    parser_class = type("Parser", (CommandLineParser,), {"json_errors": json_errors})
    parser = parser_class(
        prog=prog,
        description=(
            "Onefold's silo toolkit: train FedKT students on your own data and trade with the market. "
            "Your data never leaves this machine; only the trained models are uploaded."
        ),
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=parser_class
    )
    common = _common_options()

    def command(
        name: str, help_text: str, handler, epilog: str | None = None
    ) -> argparse.ArgumentParser:
        sub_parser = sub.add_parser(
            name, help=help_text, description=help_text, epilog=epilog, parents=[common]
        )
        sub_parser.set_defaults(handler=handler)
        return sub_parser

    login = command("login", "Log in to a market and store the token.", commands.login)
    login.add_argument("--username", required=True)
    login.add_argument("--password", help="(default: $ONEFOLD_PASSWORD, else asked for)")
    command("whoami", "Show the logged-in account and organisation.", commands.whoami)
    command("federations", "List the market's federations.", commands.federations)
    join = command("join", "Join a federation as your silo organisation.", commands.join)
    join.add_argument("federation")
    pull = command(
        "pull", "Download a federation's public features and feature specification.", commands.pull
    )
    pull.add_argument("federation")
    pull.add_argument("--output", type=Path, help="folder (default: ./onefold-<federation>)")
    train = command(
        "train", "Train FedKT students (or one local model) on your data, offline.", commands.train
    )
    _training_options(train)
    statistics = command(
        "statistics",
        "Compute your rows' class counts, sums and second moment for a statistics job, offline (at L2 with "
        "your own noise).",
        commands.statistics,
    )
    _statistics_options(statistics)
    fd = command(
        "fd",
        "Run your silo's rounds of a federated distillation exchange, then write the network.",
        commands.fd,
    )
    fd.add_argument("exchange_id", type=int)
    fd.add_argument(
        "--data", required=True, type=Path, help="your labelled table: CSV, Parquet or NPZ"
    )
    fd.add_argument(
        "--pulled", type=Path, help="folder written by `pull` (default: ./onefold-<federation>)"
    )
    fd.add_argument(
        "--output", type=Path, help="folder for the network (default: <pulled>/fd-model)"
    )
    fd.add_argument("--label-column", help="column with your labels (default: the federation's)")
    fd.add_argument(
        "--privacy-level",
        choices=["L0"],
        default="L0",
        help="level to submit the network at: L0 only (it learnt from other silos' noiseless logits)",
    )
    fd.add_argument(
        "--hidden-sizes", type=int, nargs="+", default=[64], help="MLP hidden widths (default 64)"
    )
    fd.add_argument(
        "--epochs", type=int, default=1, help="passes over your rows per round (default 1)"
    )
    fd.add_argument("--batch-size", type=int, default=64)
    fd.add_argument("--learning-rate", type=float, default=0.05)
    fd.add_argument(
        "--beta",
        type=float,
        default=1.0,
        help="weight of FD's distillation regulariser (default 1)",
    )
    fd.add_argument("--validation-fraction", type=float, default=0.2)
    fd.add_argument(
        "--seed", type=int, default=0, help="seed of the initialisation and batch order"
    )
    fd.add_argument(
        "--wait-timeout", type=float, default=3600.0, help="seconds to wait for a round to close"
    )
    seeds = command(
        "seeds",
        "Upload seeds of the labels you lack, hidden among other labels, to an augmentation (FAug).",
        commands.seeds,
    )
    seeds.add_argument("augmentation_id", type=int, help="the augmentation (as on its page)")
    seeds.add_argument(
        "--data", required=True, type=Path, help="your labelled table: CSV, Parquet or NPZ"
    )
    seeds.add_argument(
        "--target-label",
        action="append",
        default=[],
        metavar="LABEL",
        help="a label you lack, repeatable (as the federation names its classes)",
    )
    seeds.add_argument(
        "--per-label", type=int, default=5, help="seeds of each target label (default 5)"
    )
    seeds.add_argument(
        "--redundant",
        type=int,
        help="samples of other labels to hide the targets among (default: as many as the seeds)",
    )
    seeds.add_argument(
        "--feature-scale",
        type=float,
        default=1.0,
        help="divide your features by this to bring them to [0, 1] (255 for raw pixels)",
    )
    seeds.add_argument(
        "--pulled", type=Path, help="folder written by `pull` (default: ./onefold-<federation>)"
    )
    seeds.add_argument("--label-column", help="column with your labels (default: the federation's)")
    seeds.add_argument("--seed", type=int, default=0, help="seed of the choice of rows")
    seeds.add_argument("--dry-run", action="store_true", help="show the leakage and upload nothing")
    augment = command(
        "augment",
        "Append generated samples of your target labels to your table (FAug).",
        commands.augment,
    )
    augment.add_argument("federation", help="federation slug (as in `federations`)")
    source = augment.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--generator",
        type=Path,
        help="a generator file (safetensors, or a CTGAN augmentation's samples .npz) already downloaded",
    )
    source.add_argument(
        "--augmentation",
        type=int,
        metavar="ID",
        help="fetch the published generator of this augmentation from the market",
    )
    augment.add_argument(
        "--data", required=True, type=Path, help="your labelled table: CSV, Parquet or NPZ"
    )
    augment.add_argument(
        "--target-label",
        action="append",
        default=[],
        metavar="LABEL",
        help="a label you lack, repeatable (as the federation names its classes)",
    )
    augment.add_argument(
        "--per-label",
        type=int,
        help="samples per target label (default: your mean count of the other labels)",
    )
    augment.add_argument(
        "--feature-scale",
        type=float,
        default=1.0,
        help="multiply generated features by this (255 for raw pixels; default 1)",
    )
    augment.add_argument(
        "--pulled", type=Path, help="folder written by `pull` (default: ./onefold-<federation>)"
    )
    augment.add_argument(
        "--label-column", help="column with your labels (default: the federation's)"
    )
    augment.add_argument("--output", type=Path, help="CSV to write (default: <data>-augmented.csv)")
    augment.add_argument("--seed", type=int, default=0, help="seed of the generated samples")
    upload = command(
        "upload", "Upload trained students and wait for the market's validation.", commands.upload
    )
    upload.add_argument("folder", type=Path, help="folder written by `train` (holds metadata.json)")
    upload.add_argument("--no-wait", action="store_true", help="do not wait for validation")
    upload.add_argument(
        "--wait-timeout", type=float, default=600.0, help="seconds to wait for validation"
    )
    upload.add_argument(
        "--idempotency-key",
        help="the same key with the same files returns the first submission, never a second one (default: "
        "one derived from the folder's files, so running the same upload again is safe)",
    )
    status = command(
        "submission",
        "Show one of your submissions (`submission ID`), or wait for its validation (`submission wait ID`).",
        commands.submission,
    )
    _show_or_wait(status, "submission_id", default_timeout=600.0)
    job = command(
        "job",
        "Show a job's status and progress (`job ID`), or wait until it ends (`job wait ID`).",
        commands.job,
    )
    _show_or_wait(job, "job_id", default_timeout=3600.0)
    webhook = command(
        "webhook",
        f"Check a webhook delivery: `webhook verify` exits 0 when its {SIGNATURE_HEADER} header signs its body.",
        commands.webhook_verify,
        epilog="The header reads t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.<body>' keyed with the "
        "endpoint's secret>; a delivery older than the tolerance is refused (exit 3), as a replay. In Python: "
        "workers.silo.webhooks.webhook_signature_verify(secret, header, body).",
    )
    webhook.add_argument("action", choices=["verify"])
    webhook.add_argument(
        "--signature", required=True, help=f"the {SIGNATURE_HEADER} header's value as received"
    )
    webhook.add_argument(
        "--body",
        required=True,
        help="file holding the request body exactly as received, or - for standard input",
    )
    webhook.add_argument(
        "--secret",
        default=os.environ.get("ONEFOLD_WEBHOOK_SECRET"),
        help="the endpoint's signing secret (default: $ONEFOLD_WEBHOOK_SECRET)",
    )
    webhook.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE_SECONDS,
        help=f"seconds a delivery may be old (default {DEFAULT_TOLERANCE_SECONDS})",
    )
    catalog = command("catalog", "List the models for sale.", commands.catalog)
    catalog.add_argument("--search", help="words to look for")
    catalog.add_argument("--federation", help="only this federation's models")
    catalog.add_argument(
        "--ordering", help="newest, oldest, price, -price, accuracy, -accuracy, name, -name"
    )
    catalog.add_argument("--limit", type=int, help="listings per page")
    catalog.add_argument("--offset", type=int, help="listings to skip")
    card = command("card", "Show a listing's model card.", commands.card)
    card.add_argument("listing_id", type=int)
    buy = command("buy", "Buy a listing with your organisation's balance.", commands.buy)
    buy.add_argument("listing_id", type=int)
    buy.add_argument(
        "--idempotency-key", help="repeat a purchase safely with the same key (default: a new UUID)"
    )
    download = command(
        "download",
        "Download a bought global model.",
        commands.download,
        epilog="Start with --format raw_onnx --package: the model reading the federation's raw CSV columns "
        "(the encoding is inside the graph), with README.md (how to run it with onnxruntime and numpy) and "
        "feature-spec.json (the encoding, also at GET /api/global-models/<id>/feature-spec.json). The other "
        "formats read the encoded features; an ensemble's bundle holds manifest.json with each member's "
        "weight, feature view and classes (docs/market.md#downloads).",
    )
    download.add_argument("global_model_id", type=int)
    download.add_argument(
        "--format",
        default="onnx",
        help="raw_onnx (raw columns in, probabilities out: runs with onnxruntime alone), onnx, skops, "
        "xgboost-json, safetensors, kernel_npz or bundle (default onnx)",
    )
    download.add_argument(
        "--package",
        action="store_true",
        help="a zip of the file with the model card README.md and feature-spec.json",
    )
    download.add_argument(
        "--output",
        type=Path,
        help="file to write (default: global-model-<id>.<format>, .zip added with --package)",
    )
    predict = command(
        "predict",
        "Predict rows of a table with a bought global model (on the market).",
        commands.predict,
    )
    predict.add_argument("global_model_id", type=int)
    predict.add_argument(
        "--data", required=True, type=Path, help="table of raw rows (CSV, Parquet or NPZ)"
    )
    predict.add_argument(
        "--limit", type=int, default=1000, help="rows to send at most (default 1000)"
    )
    return parser


def _show_or_wait(parser: argparse.ArgumentParser, name: str, *, default_timeout: float) -> None:
    """``COMMAND ID`` shows; ``COMMAND wait ID`` polls, with backoff, until it is done or ``--wait-timeout``."""
    parser.add_argument("action", nargs="?", choices=["show", "wait"], default="show")
    parser.add_argument(name, type=int)
    parser.add_argument(
        "--wait-timeout",
        type=float,
        default=default_timeout,
        help=f"with wait: seconds to wait before giving up with exit code 8 (default {default_timeout:g})",
    )


def _show_by_default(argv: list[str]) -> list[str]:
    """``job 7`` is ``job show 7``: argparse cannot tell an optional first word from the number after it."""
    if len(argv) >= 2 and argv[0] in ("job", "submission") and argv[1].lstrip("-").isdigit():
        return [argv[0], "show", *argv[1:]]
    return argv


def main(argv: list[str] | None = None, *, prog: str = "python -m workers.silo") -> int:
    given = _show_by_default(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser(prog, json_errors="--json" in given)
    args = parser.parse_args(given)
    if args.command == "login" and not args.password:
        args.password = os.environ.get("ONEFOLD_PASSWORD") or getpass.getpass("Password: ")
    try:
        result, text = args.handler(args)
    except OnefoldError as error:
        return _fail(args, error.message, error.exit_code, status=error.status)
    except KeyboardInterrupt:
        return _fail(args, "Interrupted.", EXIT_ERROR)
    except ModuleNotFoundError as error:
        extra = EXTRA_OF_PACKAGE.get((error.name or "").split(".")[0])
        if extra is None:
            raise
        asked = (
            " (the zoo networks, DP-SGD and fd need torch and Opacus)" if extra == "neural" else ""
        )
        return _fail(
            args,
            f"`{args.command}` needs the toolkit's [{extra}] extra ({error.name} is not installed){asked}; "
            f"install it with: pip install 'onefold-toolkit[{extra}]' (or the wheel address your market's "
            f"federation page shows, followed by [{extra}]).",
            EXIT_ERROR,
        )
    try:
        print(json.dumps(result, indent=2, default=str) if args.json else text, flush=True)
    except (
        BrokenPipeError
    ):  # `onefold card 1 | head`: the reader has gone; stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    return 0


def onefold() -> int:
    """The ``onefold`` console command of the installed toolkit (``pip install ./workers``)."""
    return main(prog="onefold")


def _fail(args, message: str, exit_code: int, *, status: int | None = None) -> int:
    if args.json:
        error = {"message": message, "status": status, "exit_code": exit_code}
        print(json.dumps({"error": error}), file=sys.stderr)
    else:
        print(f"Error: {message}", file=sys.stderr)
    return exit_code
