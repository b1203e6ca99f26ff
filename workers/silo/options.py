"""The shape of the command line's table (:mod:`workers.silo.option_table`): a command, its options, and the one
function that turns them into argparse's sub-parsers (:func:`commands_add`). The table is data, so a command or an
option is added by writing one row, and every command is built the same way."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Option:
    """One argument of a command: its ``names`` as argparse takes them (``("-s", "--partitions")`` or
    ``("federation",)``) and argparse's ``settings`` (``type``, ``default``, ``help``, ...).
    ``environment_default``: a variable whose value, read when the parser is built, is the default."""

    names: tuple[str, ...]
    settings: Mapping[str, Any]
    environment_default: str | None = None


def option(*names: str, environment_default: str | None = None, **settings: Any) -> Option:
    """An :class:`Option` written as ``add_argument`` is called."""
    return Option(names, settings, environment_default)


@dataclass(frozen=True)
class OneOf:
    """Options of which at most one is given (exactly one when ``required``): argparse's mutually exclusive group."""

    options: tuple[Option, ...]
    required: bool = False


@dataclass(frozen=True)
class Command:
    """A sub-command: its ``name``, the ``help`` sentence (also its description), the ``handler`` that runs it
    (``handler(args) -> (result, text)``, :mod:`workers.silo.commands`), its options in the order ``--help``
    lists them, and an ``epilog`` printed after them."""

    name: str
    help: str
    handler: Callable
    options: Sequence[Option | OneOf] = field(default_factory=tuple)
    epilog: str | None = None


def option_add(parser: argparse.ArgumentParser | argparse._ArgumentGroup, entry: Option) -> None:
    """Add one option; a list default is copied, so that no two parsers (nor the table) share one list."""
    settings: dict[str, Any] = {
        name: list(value) if isinstance(value, list) else value
        for name, value in entry.settings.items()
    }
    if entry.environment_default is not None:
        settings["default"] = os.environ.get(entry.environment_default)
    parser.add_argument(*entry.names, **settings)


def options_add(parser: argparse.ArgumentParser, entries: Sequence[Option | OneOf]) -> None:
    """Add a command's options (and groups of exclusive ones) in the table's order."""
    for entry in entries:
        if isinstance(entry, OneOf):
            group = parser.add_mutually_exclusive_group(required=entry.required)
            for member in entry.options:
                option_add(group, member)
        else:
            option_add(parser, entry)


def common_parser(entries: Sequence[Option]) -> argparse.ArgumentParser:
    """The parent parser holding the options every command takes (``--market``, ``--json``, ...)."""
    common = argparse.ArgumentParser(add_help=False)
    options_add(common, entries)
    return common


def commands_add(
    subparsers: argparse._SubParsersAction, commands: Sequence[Command], *, common: Sequence[Option]
) -> None:
    """One sub-parser per command of the table, each with the common options and its own, its handler as a
    default (``args.handler``)."""
    parent = common_parser(common)
    for command in commands:
        parser = subparsers.add_parser(
            command.name,
            help=command.help,
            description=command.help,
            epilog=command.epilog,
            parents=[parent],
        )
        parser.set_defaults(handler=command.handler)
        options_add(parser, command.options)
