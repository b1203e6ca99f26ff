"""The simulator's summary (issue 19): the global model, the market's baselines, SOLO and the centralised baseline
that only a simulation can measure, each with the market's four metrics."""

from pathlib import Path

from workers.simulation import (
    FINAL_MODEL,
    SimulationReport,
    SimulationSettings,
    job_parameters,
    summary_table,
)


def scores(accuracy, balanced, f1, auc):
    return {"accuracy": accuracy, "balanced_accuracy": balanced, "macro_f1": f1, "roc_auc": auc}


def test_every_row_shows_accuracy_balanced_accuracy_macro_f1_and_roc_auc():
    report = SimulationReport(
        federation="f",
        job={"id": 7},
        global_model={
            "baselines": {
                "majority_class": scores(0.76, 0.5, 0.43, 0.5),
                "average_silo": scores(0.7, 0.64, 0.6, 0.7),
                "operator_only": {
                    **scores(0.78, 0.74, 0.7, 0.8),
                    "comparison": {
                        "accuracy": {
                            "difference": 0.01,
                            "low": -0.004,
                            "high": 0.025,
                            "verdict": "level",
                        },
                        "balanced_accuracy": {"verdict": "below"},
                    },
                },
            }
        },
    )
    report.accuracy = {
        "global": {**scores(0.79, 0.739, 0.7, 0.85), "confusion_matrix": [[1]]},
        "solo": scores(0.71, 0.63, 0.6, None),
        "solo_min": 0.6,
        "solo_max": 0.8,
        "centralised": scores(0.865, 0.758, 0.78, 0.91),
    }
    lines = summary_table(
        report, SimulationSettings(market_url="http://x", data_folder=Path("."), silos=3)
    ).splitlines()
    # percentages with one decimal under headers that name the unit, as the pages write them (workers.numbers)
    assert lines[0].split() == [
        "model",
        *("accuracy", "(%)", "balanced", "(%)", "macro-F1", "(%)", "ROC", "AUC", "(%)"),
    ]
    assert lines[1].split()[-4:] == ["79.0", "73.9", "70.0", "85.0"]
    assert "best single silo" in lines[3] and lines[3].split()[-4:] == ["—"] * 4
    assert lines[5].startswith("the operator's rows alone (no silo)")
    assert lines[5].split()[-4:] == ["78.0", "74.0", "70.0", "80.0"]
    assert (
        lines[6].startswith("SOLO (mean of 3 silos)")
        and "63.0         60.0            —" in lines[6]
    )
    assert lines[6].endswith("(silos' accuracy 60.0–80.0 %)")
    assert lines[7].startswith("centralised (all silo data pooled)")
    assert lines[7].split()[-4:] == ["86.5", "75.8", "78.0", "91.0"]
    # the job record's comparison, said in the terminal (issue 39: the demo says whether it beats what is free)
    assert lines[8:] == [
        "Against the operator's rows alone: accuracy level (+1.0 points, 95 % interval -0.4 to +2.5); "
        "balanced below."
    ]


def test_an_l1_simulation_takes_the_markets_l1_final_model_and_an_l0_one_names_the_forest():
    def parameters(level):
        return job_parameters(
            SimulationSettings(market_url="http://m", data_folder=Path("."), privacy_level=level)
        )

    assert parameters("L0")["final_model"] == FINAL_MODEL
    private = parameters("L1")
    assert "final_model" not in private and private["privacy"] == {"delta": 1e-5}


def test_waiting_for_a_market_that_is_starting_says_so_instead_of_staying_silent():
    """``make demo`` waits for its web server: the simulator says it is waiting, never a silence of 25 s."""
    import socket

    import pytest

    from workers.simulation import SimulationError, market_wait

    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    said = []
    with pytest.raises(SimulationError, match="did not answer within 1.5 s"):
        market_wait(
            f"http://127.0.0.1:{port}/",
            timeout_seconds=1.5,
            say=said.append,
            report_every_seconds=0.5,
        )
    assert said and all(
        line.startswith(f"Waiting for the market at http://127.0.0.1:{port}/ to start (")
        and line.endswith("of at most 1.5 s)...")
        for line in said
    )
