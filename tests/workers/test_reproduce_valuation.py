"""The valuation benchmark (docs/results/valuation.md) runs as shown, at a small size."""

import json

import pytest

from workers.reproduce import valuation


def test_the_attack_benchmark_runs_and_writes_each_attackers_value(tmp_path, capsys):
    output = tmp_path / "valuation.json"
    assert (
        valuation.main(
            [
                "--silos",
                "6",
                "--permutations",
                "40",
                "--exact-check-silos",
                "5",
                "--output",
                str(output),
            ]
        )
        == 0
    )
    results = json.loads(output.read_text())
    assert [entry["rule"] for entry in results["attacks"]] == ["vote", "average"]
    for entry in results["attacks"]:
        assert entry["estimator"] == "exact"  # 6 silos
        assert entry["constant"] <= 0 and entry["flipped"] <= 0
        assert entry["honest_min"] > 0
        assert entry["duplicates"] == [["03", "04"]]  # the copy is found
        assert entry["original"] + entry["copy"] == pytest.approx(entry["original_alone"])
        assert entry["closest_honest_pair"] > entry["duplicate_tolerance"]
    assert set(results["estimator_agreement"]["spearman"]) == {"vote", "average"}
    assert "| 6 | vote | exact |" in capsys.readouterr().out
