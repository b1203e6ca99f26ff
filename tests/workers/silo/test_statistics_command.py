"""`onefold statistics`: a silo's sufficient statistics, offline, run as a user types it (issue 40)."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import csv_bytes
from workers.algorithms.sufficient_statistics import class_statistics, statistics_from_document
from workers.features import encode_features
from workers.privacy.statistics_noise import statistics_noise_calibrated
from workers.tables import read_table

REPOSITORY = Path(__file__).resolve().parents[3]


def silo_rows(silo_csv, pulled):
    spec = json.loads((pulled / "feature-spec.json").read_text())
    frame = read_table(silo_csv.read_bytes())
    return encode_features(frame, spec), (frame["income"].str.strip() == ">50K").to_numpy().astype(
        int
    )


def test_statistics_at_l0_typed_in_a_shell_writes_the_exact_statistics_of_the_silos_clipped_rows(
    pulled, silo_csv, tmp_path
):
    done = subprocess.run(
        [sys.executable, "-m", "workers.silo", "statistics", "adult-income", "--data", "silo.csv",
         "--pulled", "onefold-adult-income", "--privacy-level", "L0", "--clip-norm", "2.5"],
        cwd=tmp_path, capture_output=True, text=True, env={"PYTHONPATH": str(REPOSITORY), "PATH": "/usr/bin:/bin"},
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    features, labels = silo_rows(silo_csv, pulled)
    expected = class_statistics(features, labels, n_classes=2, clip_norm=2.5, squares=False)
    document = json.loads((pulled / "statistics.json").read_text())
    assert document["privacy"] is None
    read = statistics_from_document(document, n_classes=2, n_features=features.shape[1])
    np.testing.assert_array_equal(read.counts, expected.counts)
    np.testing.assert_allclose(read.moment, expected.moment, rtol=1e-12)
    np.testing.assert_allclose(read.sums, expected.sums, rtol=1e-12)
    assert read.squares is None
    assert (
        f"Statistics of 500 rows (<=50K {int(expected.counts[0])}, >50K {int(expected.counts[1])}) over "
        f"{features.shape[1]} encoded features"
    ) in done.stdout
    assert "L0: no noise" in done.stdout
    assert "Your rows alone: LDA from the statistics of 400 of them scores " in done.stdout


def test_statistics_at_l2_declares_the_calibrated_noise_and_prints_its_epsilon(
    run_cli, pulled, silo_csv
):
    code, out, err = run_cli(
        "statistics", "adult-income", "--data", silo_csv, "--pulled", pulled,
        "--privacy-level", "L2", "--epsilon", "1", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    expected = statistics_noise_calibrated(epsilon=1.0, delta=1e-5)
    assert result["privacy"] == expected.as_dict()
    assert result["privacy"]["epsilon"] == pytest.approx(1.0, abs=1e-9)
    assert result["clip_norm"] == 2.0
    assert result["local_lda"]["held_out_rows"] == 100
    assert result["local_lda"]["accuracy"] > result["local_lda"]["majority_accuracy"]
    document = json.loads((pulled / "statistics.json").read_text())
    features, labels = silo_rows(silo_csv, pulled)
    exact = class_statistics(features, labels, n_classes=2, clip_norm=2.0, squares=False)
    read = statistics_from_document(document, n_classes=2, n_features=features.shape[1])
    # The noise is there (never seeded), symmetric, and about as large as declared.
    spread = np.std((read.moment - exact.moment)[np.triu_indices(exact.n_features)])
    assert 0.8 * expected.moment < spread < 1.2 * expected.moment
    _, text, _ = run_cli(
        "statistics", "adult-income", "--data", silo_csv, "--pulled", pulled,
        "--privacy-level", "L2", "--epsilon", "1",
    )  # fmt: skip
    assert (
        "L2: your Gaussian noise costs ε = 1 (example-level, data-independent, δ = 1e-05, one release)."
        in text
    )


def test_statistics_refuses_l2_without_an_epsilon_and_a_clip_norm_other_than_the_federations(
    run_cli, pulled, silo_csv
):
    code, _, err = run_cli(
        "statistics",
        "adult-income",
        "--data",
        silo_csv,
        "--pulled",
        pulled,
        "--privacy-level",
        "L2",
    )
    assert code == 3
    assert "At L2 give the ε your noise may cost (--epsilon, e.g. 1)" in err
    federation = json.loads((pulled / "federation.json").read_text())
    (pulled / "federation.json").write_text(json.dumps({**federation, "statistics_clip_norm": 3.0}))
    code, _, err = run_cli(
        "statistics", "adult-income", "--data", silo_csv, "--pulled", pulled, "--clip-norm", "2"
    )
    assert code == 3
    assert (
        "'adult-income' clips rows to norm 3; its statistics jobs add only statistics of that norm"
        in err
    )
    assert not (pulled / "statistics.json").exists()


def documented_statistics_commands() -> list[list[str]]:
    """The `python -m workers.silo statistics ...` lines of docs/toolkit.md's sh blocks, split as a shell would."""
    text = (REPOSITORY / "docs" / "toolkit.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.DOTALL)
    return [
        shlex.split(line.strip(), comments=True)
        for block in blocks
        for line in block.replace("\\\n", " ").splitlines()
        if line.strip().startswith("python -m workers.silo statistics ")
    ]


def test_the_documented_statistics_command_runs_as_shown(pulled, adult_frame):
    commands = documented_statistics_commands()
    assert len(commands) == 1
    (pulled.parent / "my-patients.csv").write_bytes(csv_bytes(adult_frame.iloc[2500:2650]))
    done = subprocess.run(
        [sys.executable, *commands[0][1:]],
        cwd=pulled.parent,  # where `pull adult-income` wrote ./onefold-adult-income
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPOSITORY), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((pulled / "statistics.json").read_text())["privacy"][
        "epsilon"
    ] == pytest.approx(1.0)
    assert "L2: your Gaussian noise costs ε = 1 (" in done.stdout
