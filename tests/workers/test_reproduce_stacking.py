"""The stacked fusion's validation experiment (docs/results/stack.md) reads no test split and runs as shown."""

import json

import numpy as np

from workers.reproduce import stacking


def test_the_split_keeps_validation_rows_apart_from_every_row_a_fusion_reads():
    _, labels = stacking.load_table("titanic")
    split = stacking._split(labels, seed=0)
    rows = np.concatenate(list(split.values()))
    assert sorted(rows.tolist()) == list(range(len(labels)))  # disjoint and complete
    assert abs(len(split["validation"]) - 0.1 * len(labels)) <= 1
    assert abs(len(split["evaluation"]) - 0.1 * len(labels)) <= 1


def test_the_experiment_runs_every_fusion_through_the_engine_and_writes_its_entries(
    tmp_path, capsys
):
    output = tmp_path / "stack.json"
    assert (
        stacking.main(
            ["--seeds", "1", "--silos", "4", "--datasets", "titanic", "--output", str(output)]
        )
        == 0
    )
    entries = json.loads(output.read_text())
    assert {entry["fusion"] for entry in entries} == {
        "best-silo",
        "ensemble",
        "centralised",
        *stacking.STACKS,
    }
    auto = next(entry for entry in entries if entry["fusion"] == "stack-auto")
    assert auto["chosen"] in ("logistic", "weights") and 0.5 < auto["accuracy"] <= 1
    assert "| titanic |" in capsys.readouterr().out


def test_stacks_runs_only_the_named_variants(tmp_path):
    output = tmp_path / "auto.json"
    arguments = ["--seeds", "1", "--silos", "4", "--datasets", "titanic", "--stacks", "stack-auto"]
    assert stacking.main([*arguments, "--output", str(output)]) == 0
    fusions = {entry["fusion"] for entry in json.loads(output.read_text())}
    assert fusions == {"best-silo", "ensemble", "centralised", "stack-auto"}
