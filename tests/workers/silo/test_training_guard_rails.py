"""`train`'s guard rail: every model scored against always answering the majority class, in accuracy and balanced
accuracy, with a warning (and, with --strict, a refusal) for one that does not beat it."""

import json

import numpy as np

from tests.conftest import csv_bytes, scaled_timeout
from tests.fixtures.silo import SMALL_FORESTS
from workers.metrics import majority_comparison


def test_majority_comparison_counts_a_win_only_beyond_two_standard_errors_of_the_paired_difference():
    labels = np.array([0] * 8 + [1] * 2)
    guess_only = majority_comparison(np.zeros(10, int), labels, [0, 0, 1], n_classes=2)
    assert (guess_only.accuracy, guess_only.majority_accuracy, guess_only.margin) == (0.8, 0.8, 0.0)
    assert (guess_only.balanced_accuracy, guess_only.majority_balanced_accuracy) == (0.5, 0.5)
    assert not guess_only.beats_majority
    one_more = majority_comparison(np.array([0] * 9 + [1]), labels, [0], n_classes=2)
    # differences: one row +1, nine rows 0 → mean 0.1, sd 0.3, two standard errors 0.6 / √10 ≈ 0.19
    assert np.isclose(one_more.margin, 0.6 / np.sqrt(10))
    assert np.isclose(one_more.accuracy, 0.9) and not one_more.beats_majority
    labels = np.array([0] * 60 + [1] * 40)
    forty_more = majority_comparison(
        np.array([0] * 60 + [1] * 30 + [0] * 10), labels, [0], n_classes=2
    )
    # 30 rows +1, 70 rows 0 → mean 0.3, sd √0.21 ≈ 0.458, margin ≈ 0.0917
    assert np.isclose(forty_more.margin, 2 * np.sqrt(0.21) / 10)
    assert forty_more.beats_majority and np.isclose(forty_more.balanced_accuracy, 0.875)
    assert majority_comparison([], [], [0], n_classes=2) is None


def shuffled_silo(tmp_path, adult_frame):
    """600 Adult rows whose labels are shuffled: nothing in the features predicts them."""
    frame = adult_frame.iloc[2000:2600].copy()
    frame["income"] = np.random.default_rng(7).permutation(frame["income"].to_numpy())
    path = tmp_path / "shuffled.csv"
    path.write_bytes(csv_bytes(frame))
    return path


def test_train_warns_with_balanced_accuracy_when_no_model_beats_the_majority_guess(
    run_cli, pulled, tmp_path, adult_frame
):
    data = shuffled_silo(tmp_path, adult_frame)
    code, out, err = run_cli(
        "train", "adult-income", "--data", data, "--pulled", pulled, *SMALL_FORESTS
    )
    assert code == 0, err
    assert "Always answering '<=50K' (your most frequent class) scores accuracy" in out
    assert "Student 1: accuracy" in out and "balanced accuracy" in out
    assert (
        "Warning: student 1, student 2, your own model do not beat always answering the majority class"
        in out
    )
    assert "Try: more rows" in out and "(class balance)" in out
    metadata = json.loads((pulled / "students" / "metadata.json").read_text())
    assert [item["beats_majority"] for item in metadata["student_majority_comparisons"]] == [
        False,
        False,
    ]
    assert metadata["own_model"]["majority_comparison"]["beats_majority"] is False
    assert "Reading" in err and "Training FedKT teachers and students on 600 rows" in err


def test_train_strict_refuses_a_model_below_the_majority_guess_and_writes_nothing(
    run_cli, pulled, tmp_path, adult_frame
):
    data = shuffled_silo(tmp_path, adult_frame)
    code, out, err = run_cli(
        "train", "adult-income", "--data", data, "--pulled", pulled, *SMALL_FORESTS, "--strict"
    )
    assert code == 3
    assert "--strict: student 1, student 2, your own model did not beat always answering" in err
    assert not (pulled / "students").exists()


def test_train_on_informative_rows_beats_the_guess_without_a_warning_and_strict_writes_the_models(
    run_cli, pulled, tmp_path, adult_frame
):
    path = tmp_path / "silo.csv"
    path.write_bytes(csv_bytes(adult_frame.iloc[1000:3000]))
    code, out, err = run_cli(
        "train", "adult-income", "--data", path, "--pulled", pulled, *SMALL_FORESTS, "--strict"
    )
    assert code == 0, err
    assert "Warning" not in out
    metadata = json.loads((pulled / "students" / "metadata.json").read_text())
    own = metadata["own_model"]["majority_comparison"]
    assert own["beats_majority"] and own["accuracy"] > own["majority_accuracy"] + own["margin"]


def test_train_with_json_prints_no_progress_lines(run_cli, pulled, silo_csv):
    code, out, err = run_cli(
        "train", "adult-income", "--data", silo_csv, "--pulled", pulled, *SMALL_FORESTS, "--json"
    )
    assert code == 0, err
    assert err == ""
    assert json.loads(out)["own_model"]["majority_comparison"]["n_rows"] == 100


def test_a_reader_that_closes_the_pipe_early_ends_the_command_quietly(pulled, silo_csv):
    """`onefold card 1 | head`: when the reader has gone, the toolkit stops without a traceback (exit 141, as a
    Unix tool killed by SIGPIPE)."""
    import subprocess
    import sys

    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workers.silo",
            "train",
            "adult-income",
            "--data",
            str(silo_csv),
            "--pulled",
            str(pulled),
            *SMALL_FORESTS,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.close()  # the reader leaves before the summary is printed
    _, err = process.communicate(timeout=scaled_timeout(120))
    assert process.returncode == 141
    assert b"Traceback" not in err and b"BrokenPipeError" not in err


def test_train_says_each_step_as_it_works_and_scores_in_the_pages_percentages(
    run_cli, pulled, tmp_path, adult_frame
):
    """Issue 43 item 7: `onefold train` printed nothing for ~25 s; each step now says what it did (on stderr, so
    that stdout stays the summary), and the summary writes scores as the pages do (workers.numbers)."""
    import re

    data = shuffled_silo(tmp_path, adult_frame)
    code, out, err = run_cli(
        "train", "adult-income", "--data", data, "--pulled", pulled, *SMALL_FORESTS
    )
    assert code == 0, err
    steps = [line for line in err.splitlines() if line]
    patterns = [
        rf"Reading {re.escape(str(data))}\.\.\.",
        r"Training FedKT teachers and students on 600 rows, then your own model\.\.\.",
        r"Trained \d+ × \d+ teachers on \d+ rows\.",
        r"The teachers voted on \d+ public rows; training \d+ student\(s\)\.\.\.",
        r"Training your own model \(\w+\)\.\.\.",
        r"Writing \d+ model file\(s\) to .+\.\.\.",
    ]
    assert len(steps) == len(patterns), steps
    assert all(re.fullmatch(pattern, step) for pattern, step in zip(patterns, steps)), steps
    assert re.search(r"Local validation score \(accuracy on held-out rows\): \d+\.\d %\.", out)
    assert re.search(
        r"Student 1: accuracy \d+\.\d %, balanced accuracy \d+\.\d % \(± \d+\.\d points\)", out
    )
    assert not re.search(r"0\.\d{4}", out)  # no four-decimal fractions left

    _, quiet, quiet_err = run_cli(
        "train", "adult-income", "--data", data, "--pulled", pulled, *SMALL_FORESTS, "--json"
    )
    assert quiet_err == "" and json.loads(quiet)["files"]  # --json: no progress, one JSON object
