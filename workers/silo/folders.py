"""Where the toolkit's commands read and write on the silo's disk: what ``pull`` and ``train`` leave."""

from __future__ import annotations

from pathlib import Path

METADATA_FILE = "metadata.json"  # written by `train` beside the students; what `upload` declares


def pulled_folder(args) -> Path:
    """``--pulled`` if given, else ``./onefold-<federation>`` (where ``pull`` writes by default)."""
    return args.pulled if getattr(args, "pulled", None) else Path(f"onefold-{args.federation}")


__all__ = ["METADATA_FILE", "pulled_folder"]
