"""The suite's benchmark (docs/results/suite.md, issue 31): end to end on one small data set, and its validation
mode never reads the test split."""

import json
import re
import shlex

import numpy as np
import pytest

from workers.algorithms.auto_fusion import AUTO_CANDIDATES
from workers.reproduce import suite
from workers.reproduce.suite_report import PAGE, setting_interval, summary, versus_free


def test_the_split_is_stratified_sixty_twenty_ten_ten_and_disjoint():
    labels = np.repeat([0, 1], [700, 300])
    split = suite.suite_split(labels, seed=0)
    parts = (split.silo, split.public, split.evaluation, split.test)
    assert [len(part) for part in parts] == [600, 200, 100, 100]
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(1000))
    assert [int(labels[part].sum()) for part in parts] == [180, 60, 30, 30]


def test_the_harness_writes_one_entry_per_setting_with_every_baseline_and_candidate(tmp_path):
    results = tmp_path / "suite.json"
    suite.main(["--datasets", "titanic", "--silos", "5", "--seeds", "1", "--results", str(results)])
    (entry,) = json.loads(results.read_text())
    assert (entry["dataset"], entry["silos"], entry["seed"]) == ("titanic", 5, 0)
    assert entry["scored_on"].startswith("held-out silo rows")
    # titanic's 2,201 rows: 1,320 silo rows, of which a sixth is held out; 440 public, 220 evaluation rows
    assert entry["rows"] == {"silo": 1100, "public": 440, "evaluation": 220, "scored": 220}
    assert set(entry["candidates"]) == set(suite.CANDIDATES)
    assert set(entry["baselines"]) == {
        "majority",
        "average_silo",
        "best_silo",
        "centralised",
        "operator_only",
    }
    # the operator-only baseline as a job records it: the default forest on the fit half (109 of 220 rows), and
    # reported on the other half like auto
    operator_only = entry["baselines"]["operator_only"]
    assert (operator_only["fit_rows"], operator_only["job_evaluation"]["rows"]) == (109, 111)
    assert operator_only["family"] == "random_forest"
    # the learning curve: the 220 evaluation rows first, then public rows; 1,000 is capped at the 660 there are
    assert [
        (
            point["asked"],
            point["rows"],
            point["evaluation_rows"],
            point["public_rows_labelled"],
            point["capped"],
        )
        for point in entry["operator_learning_curve"]
    ] == [
        (100, 100, 100, 0, False),
        (250, 250, 220, 30, False),
        (500, 500, 220, 280, False),
        (1000, 660, 220, 440, True),
    ]
    # the default against each free model on the scored rows, with its paired-bootstrap interval
    versus = entry["default_versus"]
    assert set(versus) == {"operator_only", "best_silo"}
    for reference in versus.values():
        for metric in ("accuracy", "balanced_accuracy"):
            assert (
                reference[metric]["low"]
                <= reference[metric]["difference"]
                <= reference[metric]["high"]
            )
            assert reference[metric]["verdict"] in ("beats", "level", "below")
    assert versus["operator_only"]["accuracy"]["difference"] == pytest.approx(
        entry["candidates"]["fedkt-auto"]["accuracy"] - operator_only["accuracy"]
    )
    for scores in [*entry["candidates"].values(), *entry["baselines"].values()]:
        assert 0 <= scores["balanced_accuracy"] <= 1 and 0 <= scores["accuracy"] <= 1
    assert (
        entry["baselines"]["majority"]["balanced_accuracy"] == 0.5
    )  # a constant guess, two classes
    auto = entry["candidates"]["fedkt-auto"]
    assert auto["chosen"] in AUTO_CANDIDATES
    assert (
        auto["job_evaluation"]["rows"] == 111
    )  # the report half of 220 rows (an odd class gives it one more)
    assert entry["candidates"]["fedkt"]["job_evaluation"]["rows"] == 220
    assert entry["candidates"]["stack"]["job_evaluation"]["rows"] == 111  # fitted on the other half
    # every silo trained with the toolkit's defaults (s and t chosen for its rows) and uploaded its own model
    assert entry["silos_uploaded"] == entry["silos_uploading_own_model"] == 5


def _with_garbage_test_rows(monkeypatch):
    """Make ``suite_table`` return titanic with every feature of the test split's rows replaced."""
    original = suite.suite_table

    def corrupted(name):
        frame, labels = original(name)
        classes = tuple(sorted(labels.unique()))
        test = suite.suite_split(np.searchsorted(classes, labels.to_numpy()), seed=0).test
        frame.iloc[test] = 1e6
        return frame, labels

    monkeypatch.setattr(suite, "suite_table", corrupted)


def _without_timings(entry):
    return {
        key: value
        for key, value in json.loads(json.dumps(entry)).items()
        if not key.endswith("seconds")
    } | {
        "candidates": {
            name: {key: value for key, value in scores.items() if key != "fusion_seconds"}
            for name, scores in entry["candidates"].items()
        }
    }


def test_validation_mode_gives_the_same_results_whatever_the_test_split_holds(monkeypatch):
    clean = suite.setting_run("titanic", 5, 0, test=False, log=lambda line: None)
    _with_garbage_test_rows(monkeypatch)
    corrupted = suite.setting_run("titanic", 5, 0, test=False, log=lambda line: None)
    assert _without_timings(corrupted) == _without_timings(clean)


def test_test_mode_scores_the_test_split(monkeypatch):
    frame, labels = suite.suite_table("titanic")
    federation = suite.federation_build(frame, labels, seed=0, test=True)
    classes = tuple(sorted(labels.unique()))
    split = suite.suite_split(np.searchsorted(classes, labels.to_numpy()), seed=0)
    assert np.array_equal(federation.scored, split.test)
    assert np.array_equal(federation.silo_rows, split.silo)
    validation = suite.federation_build(frame, labels, seed=0, test=False)
    assert np.intersect1d(validation.scored, split.test).size == 0
    assert np.array_equal(np.union1d(validation.scored, validation.silo_rows), split.silo)
    _with_garbage_test_rows(monkeypatch)  # the test split's rows are what the test mode scores...
    entry = suite.setting_run("titanic", 5, 0, test=True, log=lambda line: None)
    assert entry["scored_on"] == "test split"
    # ...so identical garbage rows get one class from every model: balanced accuracy exactly 0.5
    assert entry["baselines"]["centralised"]["balanced_accuracy"] == 0.5
    assert entry["candidates"]["fedkt"]["balanced_accuracy"] == 0.5


def test_the_pages_commands_are_the_harness_command_line():
    commands = re.findall(
        r"^(?:nice -n 10 )?python -m workers\.reproduce\.suite(.*?)(?:#|$)", PAGE.read_text(), re.M
    )
    assert len(commands) >= 3
    for arguments in commands:
        suite.argument_parser().parse_args(shlex.split(arguments))


def test_the_summary_names_a_missed_target_with_its_numbers():
    run = {
        "dataset": "titanic",
        "silos": 10,
        "seed": 0,
        "silos_uploaded": 6,
        "silo_refusals": ["18 training rows are too few for s = 2 partitions × t = 5 teachers"],
        "silos_uploading_own_model": 0,
        "wall_seconds": 1.0,
        "baselines": {
            "majority": {"accuracy": 0.68, "balanced_accuracy": 0.5},
            "average_silo": {"accuracy": 0.66, "balanced_accuracy": 0.6},
            "best_silo": {"accuracy": 0.79, "balanced_accuracy": 0.72},
            "centralised": {"accuracy": 0.80, "balanced_accuracy": 0.70},
        },
        "candidates": {
            name: {"accuracy": 0.78, "balanced_accuracy": 0.68, "chosen": None}
            for name in suite.CANDIDATES
        },
    }
    page = summary([run], [run])
    assert (
        "≥ in accuracy in 0 of 1 settings, in balanced accuracy in 0 of 1, in both in 0 of 1; mean -1.00 points "
        "of accuracy, -0.040 balanced | **missed** |" in page
    )
    assert (
        "| L0 global model vs centralised training, mean over the suite | within 3 points | -2.00 points"
        in page
    )
    assert "4 of 10 silos (40%) could not train with the toolkit's defaults" in page


def _free_run(seed: int, *, default: float, operator_only: float, half_width: float) -> dict:
    """A run with issue 39's fields: the default and the operator-only model's scores and the default's paired
    interval, ``half_width`` either side of the difference."""
    scores = {"accuracy": default, "balanced_accuracy": default}
    difference = default - operator_only
    versus = {
        metric: {
            "difference": difference,
            "low": difference - half_width,
            "high": difference + half_width,
        }
        for metric in ("accuracy", "balanced_accuracy")
    }
    return {
        "dataset": "adult",
        "silos": 10,
        "seed": seed,
        "silos_uploaded": 10,
        "silo_refusals": [],
        "wall_seconds": 1.0,
        "rows": {"evaluation": 100},
        "baselines": {
            "majority": {"accuracy": 0.5, "balanced_accuracy": 0.5},
            "average_silo": {"accuracy": 0.6, "balanced_accuracy": 0.6},
            "best_silo": {"accuracy": 0.7, "balanced_accuracy": 0.7},
            "centralised": {"accuracy": 0.9, "balanced_accuracy": 0.9},
            "operator_only": {"accuracy": operator_only, "balanced_accuracy": operator_only},
        },
        "candidates": {name: {**scores, "chosen": None} for name in suite.CANDIDATES},
        "operator_learning_curve": [
            {"asked": rows, "rows": min(rows, 660), "capped": rows > 660, "accuracy": 0.8}
            for rows in (100, 250, 500, 1000)
        ],
        "default_versus": {"operator_only": versus, "best_silo": versus},
    }


def test_a_loss_to_the_operator_only_model_inside_the_interval_is_a_tie_and_beyond_it_a_loss():
    tie = [_free_run(0, default=0.80, operator_only=0.82, half_width=0.03)]
    loss = [_free_run(0, default=0.80, operator_only=0.82, half_width=0.01)]
    assert versus_free(tie, "operator_only")["both_at_least_or_tie"] == 1
    assert versus_free(loss, "operator_only")["both_at_least_or_tie"] == 0
    # two seeds, each losing by 2 points ± 3: the mean's interval is 2 ± √(2 × 3²) / 2 = 2 ± 2.12, still a tie;
    # ± 2.5 each gives 2 ± 1.77, a loss
    assert setting_interval(
        [_free_run(seed, default=0.80, operator_only=0.82, half_width=0.03) for seed in (0, 1)],
        "operator_only",
        "accuracy",
    ) == pytest.approx((-0.02 - 0.03 * 2**0.5 / 2, -0.02 + 0.03 * 2**0.5 / 2))
    assert (
        versus_free(
            [
                _free_run(seed, default=0.80, operator_only=0.82, half_width=0.025)
                for seed in (0, 1)
            ],
            "operator_only",
        )["both_at_least_or_tie"]
        == 0
    )
    assert versus_free(tie, "operator_only")["mean_margin"]["accuracy"] == pytest.approx(-0.02)
    page = summary([], tie)
    assert (
        "≥ in accuracy in 0 of 1 settings, in balanced accuracy in 0 of 1; ≥ or a tie inside the paired-bootstrap "
        "interval in accuracy in 1 of 1, in balanced accuracy in 1 of 1, in both in 1 of 1; mean -2.00 points of "
        "accuracy, -0.020 balanced | **missed** |"
        in page  # a tie everywhere, but the mean margin is below 2 points
    )
    assert (
        "| adult | 100 | 80.00 ± 0.00 | 80.00 ± 0.00 | 80.00 ± 0.00 | 80.00 ± 0.00 (capped: 660 rows) |"
        in page
    )
    assert "`fedkt-auto` − operator-only model on Adult 10 silos -2.00 points" in page


@pytest.mark.parametrize("name", list(suite.SUITE))
def test_every_data_set_of_the_suite_loads_with_its_classes(name):
    frame, labels = suite.suite_table(name)
    assert len(frame) == len(labels) and labels.nunique() >= 2 and suite.LABEL not in frame
