"""Where the toolkit's commands read and write on the silo's disk: what ``pull`` and ``train`` leave.

``pull`` writes :func:`pulled_files` into ``./onefold-<federation>``; the market's federation page offers the same
files in the same folder as one zip (``GET /api/federations/<slug>/public-dataset/pulled.zip``), built by the same function, so
that ``train`` reads either.
"""

from __future__ import annotations

import json
from pathlib import Path

METADATA_FILE = "metadata.json"  # written by `train` beside the students; what `upload` declares
FEATURES_FILE = "features.npz"
FEATURE_SPEC_FILE = "feature-spec.json"
FEDERATION_FILE = "federation.json"


def pulled_folder_name(federation: str) -> str:
    """``onefold-<federation>``: where ``pull`` writes and ``train`` reads by default."""
    return f"onefold-{federation}"


def pulled_folder(args) -> Path:
    """``--pulled`` if given, else ``./onefold-<federation>`` (where ``pull`` writes by default)."""
    return (
        args.pulled if getattr(args, "pulled", None) else Path(pulled_folder_name(args.federation))
    )


def pulled_files(*, features: bytes, feature_spec: dict, federation: dict) -> dict[str, bytes]:
    """The files of a pulled folder by name: the encoded public features (NPZ as the market sends it), the
    feature specification and the federation as the API describes it."""
    return {
        FEATURES_FILE: features,
        FEATURE_SPEC_FILE: json.dumps(feature_spec, indent=2).encode(),
        FEDERATION_FILE: json.dumps(federation, indent=2).encode(),
    }


__all__ = [
    "FEATURES_FILE",
    "FEATURE_SPEC_FILE",
    "FEDERATION_FILE",
    "METADATA_FILE",
    "pulled_files",
    "pulled_folder",
    "pulled_folder_name",
]
