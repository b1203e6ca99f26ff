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

from workers.silo.errors import EXIT_ERROR, EXIT_USAGE, OnefoldError
from workers.silo.option_table import (
    COMMANDS,
    COMMON_OPTIONS,
    SHOW_OR_WAIT_COMMANDS,
)
from workers.silo.options import commands_add

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


def build_parser(
    prog: str = "python -m workers.silo", *, json_errors: bool = False
) -> argparse.ArgumentParser:
    """The parser of every command, built from :data:`workers.silo.option_table.COMMANDS`."""
    parser_class = type("Parser", (CommandLineParser,), {"json_errors": json_errors})
    parser = parser_class(
        prog=prog,
        description=(
            "Onefold's silo toolkit: train FedKT students on your own data and trade with the market. "
            "Your data never leaves this machine; only the trained models are uploaded."
        ),
    )
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=parser_class
    )
    commands_add(subparsers, COMMANDS, common=COMMON_OPTIONS)
    return parser


def _show_by_default(argv: list[str]) -> list[str]:
    """``job 7`` is ``job show 7``: argparse cannot tell an optional first word from the number after it."""
    if len(argv) >= 2 and argv[0] in SHOW_OR_WAIT_COMMANDS and argv[1].lstrip("-").isdigit():
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
