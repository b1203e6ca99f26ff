"""Fixtures for the silo toolkit: a pulled federation folder, the CLI run in-process, a private config file."""

import json

import numpy as np
import pytest

from tests.conftest import ADULT_LABELS, csv_bytes
from workers.features import encode_features, infer_feature_spec, read_table


@pytest.fixture(autouse=True)
def private_config(tmp_path, monkeypatch):
    """Every test gets its own login file, never the developer's ~/.config/onefold."""
    path = tmp_path / "config" / "onefold.json"
    monkeypatch.setenv("ONEFOLD_CONFIG", str(path))
    monkeypatch.delenv("ONEFOLD_MARKET_URL", raising=False)
    return path


@pytest.fixture
def run_cli(capsys):
    """Run ``python -m workers.silo ARGS`` in this process: ``(exit code, stdout, stderr)``."""
    from workers.silo.cli import main

    def run(*arguments):
        capsys.readouterr()
        code = main([str(argument) for argument in arguments])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture
def pulled(tmp_path, adult_public_csv):
    """What `pull adult-income` writes, made here without a market (training is offline)."""
    spec = infer_feature_spec(read_table(adult_public_csv), label_column="income")
    folder = tmp_path / "onefold-adult-income"
    folder.mkdir()
    np.savez(folder / "features.npz", features=encode_features(read_table(adult_public_csv), spec))
    (folder / "feature-spec.json").write_text(json.dumps(spec))
    (folder / "federation.json").write_text(
        json.dumps(
            {
                "slug": "adult-income",
                "name": "Adult income",
                "class_labels": ADULT_LABELS,
                "label_column": "income",
                "allowed_privacy_levels": ["L0", "L1", "L2"],
            }
        )
    )
    return folder


@pytest.fixture
def silo_csv(tmp_path, adult_frame):
    """500 labelled Adult rows the public data does not hold, as a silo's CSV file."""
    path = tmp_path / "silo.csv"
    path.write_bytes(csv_bytes(adult_frame.iloc[2500:3000]))
    return path


SMALL_FORESTS = [
    "--student-param",
    "n_estimators=10",
    "--student-param",
    "max_depth=6",
]  # teachers: the default trees
