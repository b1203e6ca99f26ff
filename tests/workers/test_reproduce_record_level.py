"""The record-level benchmark's rule and page (issue 40, item 2): the setting is chosen on validation rows only, the
test rows score that one setting, and docs/results/private.md shows the table the saved runs give, through the
command it shows."""

import json
from pathlib import Path

from workers.reproduce.record_level import RESULTS, chosen_setting, main, summary

PAGE = Path(__file__).resolve().parents[2] / "docs" / "results" / "private.md"


def entry(split: str, seed: int, partitions: int, accuracy: float, balanced: float) -> dict:
    run = {"accuracy": accuracy, "balanced_accuracy": balanced, "epsilon": 2.5, "n_queries": 9}
    return {
        "split": split,
        "seed": seed,
        "partitions": partitions,
        "noise_ratio": 0.35,
        "final": "forest",
        "student": "tree",
        "draws": [run],
        "operator_only": {"accuracy": 0.8, "balanced_accuracy": 0.7},
    }


def test_settings_within_one_standard_error_tie_and_the_better_balanced_accuracy_wins():
    entries = [
        *(entry("validation", seed, 4, 0.850 + 0.002 * seed, 0.70) for seed in range(3)),
        *(entry("validation", seed, 8, 0.849 + 0.002 * seed, 0.75) for seed in range(3)),
    ]
    assert chosen_setting(entries) == (8, 0.35, "forest", "tree")
    entries += [entry("validation", seed, 2, 0.9, 0.6) for seed in range(3)]
    assert chosen_setting(entries) == (2, 0.35, "forest", "tree")


def test_the_test_split_scores_only_the_setting_chosen_on_validation_rows_and_the_page_shows_it(
    capsys,
):
    stored = json.loads(RESULTS.read_text())
    validation = [run for run in stored if run["split"] == "validation"]
    test = [run for run in stored if run["split"] == "test"]
    chosen = chosen_setting(validation)
    assert {
        (run["partitions"], run["noise_ratio"], run["final"], run["student"]) for run in test
    } == {chosen}
    assert sorted(run["seed"] for run in test) == [0, 1, 2]
    assert all(
        draw["unit"] == "example-level" and draw["epsilon"] <= 2.56
        for run in test
        for draw in run["draws"]
    )
    page = PAGE.read_text()
    assert "python -m workers.reproduce.record_level summary" in page
    assert main(["summary"]) == 0  # the page's command, as shown
    printed = capsys.readouterr().out
    assert printed.strip() == summary(stored) and summary(stored) in page
