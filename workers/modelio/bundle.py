"""The one bundle format: an ensemble saved as a zip of its members' files in upload formats and a
``manifest.json`` ``{"n_classes", "n_features", "members": [{"file", "format", "weight", "feature_view",
"classes"?, "onnx_file"?}], "feature_spec"?}`` (Guha et al., *One-Shot Federated Learning*, section 3: the ensemble is the
model).

A member's ``feature_view`` (:mod:`workers.features`: ``one_hot``, the default, or ``ordinal``) is the view of
the federation's features it reads; the bundle itself reads the one-hot view (``n_features`` wide). The
manifest holds the federation's ``feature_spec`` when a member reads another view, so that a reader can
convert the rows for it. A member's ``classes`` are the federation classes its output columns stand for, in
output order (a member that never saw a class has fewer columns than ``n_classes``); without them, the member
outputs every class in index order. The ensemble's probabilities are then, with numpy alone,
``Σ weightᵢ · widenᵢ(pᵢ) / Σ weightᵢ`` where ``widenᵢ`` puts column ``j`` of member ``i`` at class
``classes[j]`` of an ``(n, n_classes)`` zero matrix (:func:`workers.modelio.base.widened_probabilities`).
A member that is not ONNX (XGBoost, safetensors) may carry its ``onnx_file``: its ONNX twin, which the market
checked to predict the member's own probabilities (``workers.modelio.child``), so that onnxruntime and numpy alone
run every member; the twin's output columns are the same ``classes``.

Writing names every member file ``member-NNNN.<extension>`` by position (never by whose model it is). Reading
never runs a member: :func:`bundle_read` checks the archive (sizes, names, formats, views, weights) and returns
the members as they were written; whoever predicts with them hands them to the sandbox, which checks each like an upload.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass

from workers.features import FEATURE_VIEWS, ONE_HOT_VIEW
from workers.modelio.base import FILE_EXTENSIONS, ModelFormat

MAX_BUNDLE_MEMBERS = 1000
MAX_MEMBER_BYTES = 100 * 2**20
MAX_BUNDLE_BYTES = 2 * 2**30
MEMBER_FORMATS = tuple(str(model_format) for model_format in ModelFormat)


@dataclass(frozen=True)
class BundleMember:
    """One member file of a bundle: its upload ``format``, its bytes, its (non-negative) weight in the average,
    the feature view it reads and the federation classes of its output columns."""

    format: str
    data: bytes
    weight: float
    feature_view: str = ONE_HOT_VIEW
    # the federation classes of its output columns, in order; None: every class, in index order
    classes: tuple[int, ...] | None = None
    # the ONNX twin of a member in another format (the same outputs), written as member-NNNN.onnx
    onnx_twin: bytes | None = None


def bundle_write(
    members: Sequence[BundleMember],
    *,
    n_classes: int,
    n_features: int,
    feature_spec: dict | None = None,
) -> bytes:
    """The bundle zip of ``members``; ``feature_spec`` goes into the manifest when a member reads another view
    than one-hot. A ValueError names a member the format does not allow."""
    if not members:
        raise ValueError("A bundle needs at least one member file.")
    entries = [
        {
            "file": f"member-{index:04d}.{FILE_EXTENSIONS[member.format]}",
            "format": str(member.format),
            "weight": float(member.weight),
            "feature_view": member.feature_view,
            **({"classes": [int(label) for label in member.classes]} if member.classes else {}),
            **({"onnx_file": f"member-{index:04d}.onnx"} if member.onnx_twin else {}),
        }
        for index, member in enumerate(members)
    ]
    manifest = {"n_classes": int(n_classes), "n_features": int(n_features), "members": entries}
    if feature_spec is not None and any(member.feature_view != ONE_HOT_VIEW for member in members):
        manifest["feature_spec"] = feature_spec
    sizes = {entry["file"]: len(member.data) for entry, member in zip(entries, members)}
    sizes.update(
        {
            entry["onnx_file"]: len(member.onnx_twin)
            for entry, member in zip(entries, members)
            if member.onnx_twin
        }
    )
    _checked_members(manifest, sizes)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps(manifest, indent=1))
        for index, member in enumerate(members):
            archive.writestr(str(entries[index]["file"]), member.data)
            if member.onnx_twin:
                archive.writestr(str(entries[index]["onnx_file"]), member.onnx_twin)
    return buffer.getvalue()


def bundle_read(
    data: bytes, *, max_unpacked_bytes: int = MAX_BUNDLE_BYTES
) -> tuple[dict, list[BundleMember]]:
    """``(manifest, members in manifest order)``, each member as :func:`bundle_write` took it (a missing
    ``feature_view`` is ``one_hot``); a ValueError with the reason otherwise.

    ``max_unpacked_bytes`` caps the sum of the archive's unpacked sizes (as the zip declares them; the reader
    never unpacks more than each member's declared size)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ValueError("The bundle is not a zip archive.") from None
    with archive:
        sizes = {info.filename: info.file_size for info in archive.infolist()}
        if sum(sizes.values()) > min(max_unpacked_bytes, MAX_BUNDLE_BYTES) or any(
            size > MAX_MEMBER_BYTES for size in sizes.values()
        ):
            raise ValueError("The bundle's files are larger than a bundle may hold.")
        if "manifest.json" not in sizes:
            raise ValueError("The bundle has no manifest.json.")
        try:
            manifest = json.loads(archive.read("manifest.json"))
        except ValueError:
            raise ValueError("The bundle's manifest.json is not JSON.") from None
        members = _checked_members(manifest, sizes)
        return manifest, [
            BundleMember(
                format=member["format"],
                data=archive.read(member["file"]),
                weight=float(member["weight"]),
                feature_view=member.get("feature_view", ONE_HOT_VIEW),
                classes=tuple(member["classes"]) if "classes" in member else None,
                onnx_twin=archive.read(member["onnx_file"]) if "onnx_file" in member else None,
            )
            for member in members
        ]


def _checked_members(manifest, sizes: dict) -> list[dict]:
    members = manifest.get("members") if isinstance(manifest, dict) else None
    if not isinstance(members, list) or not 1 <= len(members) <= MAX_BUNDLE_MEMBERS:
        raise ValueError(f"The manifest must list 1 to {MAX_BUNDLE_MEMBERS} members.")
    for key in ("n_classes", "n_features"):
        if (
            isinstance(manifest.get(key), bool)
            or not isinstance(manifest.get(key), int)
            or manifest[key] < 1
        ):
            raise ValueError(f"The manifest's {key} must be a positive integer.")
    for member in members:
        if (
            not isinstance(member, dict)
            or member.get("file") not in sizes
            or member["file"] == "manifest.json"
        ):
            raise ValueError(
                f"The manifest names a member file the bundle does not hold: {member!r}."
            )
        if member.get("format") not in MEMBER_FORMATS:
            raise ValueError(
                f"Member {member['file']} has format {member.get('format')!r}; "
                f"allowed: {', '.join(MEMBER_FORMATS)}."
            )
        if member.get("feature_view", ONE_HOT_VIEW) not in FEATURE_VIEWS:
            raise ValueError(
                f"Member {member['file']} reads feature view {member.get('feature_view')!r}; "
                f"allowed: {', '.join(FEATURE_VIEWS)}."
            )
        _check_member_classes(member, manifest["n_classes"])
        _check_onnx_twin(member, sizes)
        weight = member.get("weight")
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not math.isfinite(weight)
            or weight < 0
        ):
            raise ValueError(
                f"Member {member['file']} has weight {weight!r}; weights are non-negative numbers."
            )
    if sum(member["weight"] for member in members) <= 0:
        raise ValueError("The members' weights are all zero.")
    return members


def _check_member_classes(member: dict, n_classes: int) -> None:
    if "classes" not in member:
        return
    classes = member["classes"]
    if (
        not isinstance(classes, list)
        or not classes
        or any(isinstance(label, bool) or not isinstance(label, int) for label in classes)
        or len(set(classes)) != len(classes)
        or not all(0 <= label < n_classes for label in classes)
    ):
        raise ValueError(
            f"Member {member['file']} has classes {classes!r}; they must be distinct class indices "
            f"0 to {n_classes - 1}."
        )


def _check_onnx_twin(member: dict, sizes: dict) -> None:
    if "onnx_file" not in member:
        return
    twin = member["onnx_file"]
    if (
        member["format"] == ModelFormat.ONNX
        or twin not in sizes
        or twin in (member["file"], "manifest.json")
    ):
        raise ValueError(
            f"Member {member['file']} names ONNX twin {twin!r}; a member that is not ONNX may name another file "
            "the bundle holds as its twin."
        )
