"""The toolkit's wheel (PEP 427), built from ``workers/pyproject.toml`` with the standard library alone.

The market serves the toolkit so that a silo needs no checkout: ``pip install <market>/toolkit/<wheel>``. The
project file is the one owner of what ships (its ``only-include`` packages), of the name, version, dependencies,
extras, the ``onefold`` command and the licence (``license`` and ``license-files``, PEP 639); this module only
writes them in the wheel format, so the server needs no build backend. The archive is reproducible (fixed
timestamps, sorted entries): the same sources give the same bytes and the same SHA-256, built once per process.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import re
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

#: The folder that is the package ``workers`` and holds the toolkit's project file.
PACKAGE_FOLDER = Path(settings.BASE_DIR) / "workers"
#: 1980-01-01, the earliest time a zip entry can hold: the archive does not depend on when it was built.
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
WHEEL_TAG = "py3-none-any"


@dataclass(frozen=True)
class ToolkitWheel:
    name: str  # the distribution, as pip spells it: onefold-toolkit
    version: str
    filename: str  # onefold_toolkit-0.1.0-py3-none-any.whl
    data: bytes
    sha256: str
    extras: tuple[str, ...]


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _shipped_files(folder: Path, only_include: list[str], excluded: list[str]) -> list[Path]:
    files: list[Path] = []
    for entry in only_include:
        path = folder / entry
        candidates = sorted(path.rglob("*")) if path.is_dir() else [path]
        files += [
            candidate
            for candidate in candidates
            if candidate.is_file()
            and candidate.suffix == ".py"
            and not set(candidate.relative_to(folder).parts) & set(excluded)
        ]
    return sorted(files)


def _licence_files(folder: Path, project: dict) -> list[Path]:
    """The project's licence files (PEP 639 ``license-files``: glob patterns relative to ``folder``)."""
    return sorted({path for pattern in project["license-files"] for path in folder.glob(pattern)})


def _metadata(project: dict, licence_files: list[Path], folder: Path) -> str:
    lines = [
        "Metadata-Version: 2.4",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"License-Expression: {project['license']}",
        *(f"License-File: {path.relative_to(folder).as_posix()}" for path in licence_files),
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Requires-Dist: {requirement}" for requirement in project["dependencies"]]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [
            f'Requires-Dist: {requirement}; extra == "{extra}"' for requirement in requirements
        ]
    return "\n".join(lines) + "\n"


def wheel_build(folder: Path = PACKAGE_FOLDER) -> ToolkitWheel:
    """The wheel of the project in ``folder`` (its ``pyproject.toml``), as bytes."""
    configuration = tomllib.loads((folder / "pyproject.toml").read_text())
    project = configuration["project"]
    wheel_settings = configuration["tool"]["hatch"]["build"]["targets"]["wheel"]
    package = folder.name
    distribution = re.sub(r"[-_.]+", "_", project["name"]).lower()
    dist_info = f"{distribution}-{project['version']}.dist-info"
    entries: list[tuple[str, bytes]] = [
        (f"{package}/{path.relative_to(folder).as_posix()}", path.read_bytes())
        for path in _shipped_files(
            folder, wheel_settings["only-include"], wheel_settings.get("exclude", [])
        )
    ]
    licence_files = _licence_files(folder, project)
    entries += [
        (f"{dist_info}/licenses/{path.relative_to(folder).as_posix()}", path.read_bytes())
        for path in licence_files
    ]
    scripts = "".join(f"{name} = {target}\n" for name, target in project["scripts"].items())
    entries += [
        (f"{dist_info}/METADATA", _metadata(project, licence_files, folder).encode()),
        (
            f"{dist_info}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: onefold-market\nRoot-Is-Purelib: true\nTag: {WHEEL_TAG}\n".encode(),
        ),
        (f"{dist_info}/entry_points.txt", f"[console_scripts]\n{scripts}".encode()),
    ]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in entries)
    record += f"{dist_info}/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in [*entries, (f"{dist_info}/RECORD", record.encode())]:
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    data = buffer.getvalue()
    return ToolkitWheel(
        name=project["name"],
        version=project["version"],
        filename=f"{distribution}-{project['version']}-{WHEEL_TAG}.whl",
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        extras=tuple(project.get("optional-dependencies", {})),
    )


@functools.cache
def toolkit_wheel() -> ToolkitWheel:
    """The market's toolkit wheel, built on first use and kept for the life of the process."""
    return wheel_build()


__all__ = ["ToolkitWheel", "toolkit_wheel", "wheel_build"]
