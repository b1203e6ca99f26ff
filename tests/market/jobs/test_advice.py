"""The budget advisor's proposal (issue 40 item 4, market.jobs.advice): the best candidate that passes the publish
gate (whose rule includes beating the operator-only model), or a sentence that nothing private can beat the free
model with these budgets; none for an estimate without candidates."""

from market.jobs.advice import estimate_advice

BASELINES = {
    "majority_class": {"accuracy": 0.6, "balanced_accuracy": 0.5, "class": 0},
    "operator_only": {"accuracy": 0.8, "balanced_accuracy": 0.7, "fit_rows": 100},
}


def _candidate(mechanism, n_queries, accuracy, balanced):
    noise = {"gamma": 0.5} if mechanism == "laplace" else {"sigma": 4.0}
    return {
        "unit": "party-level",
        "mechanism": mechanism,
        "n_queries": n_queries,
        "privacy": {"mechanism": mechanism, "delta": 1e-5, "n_queries": n_queries, **noise},
        "epsilon": 1.25,
        "delta": 1e-5,
        "parameters": {"query_count": n_queries, "privacy": {"mechanism": mechanism, **noise}},
        "metrics": {"accuracy": accuracy, "balanced_accuracy": balanced},
    }


def _result(candidates):
    return {
        "candidates": candidates,
        "reference": {"accuracy": 0.85, "balanced_accuracy": 0.78},
        "baselines": BASELINES,
    }


def test_the_proposal_is_the_best_candidate_that_passes_the_gate_and_is_said_in_words():
    result = _result(
        [
            _candidate("gaussian", 30, 0.82, 0.72),
            _candidate("gaussian", 90, 0.84, 0.75),
            _candidate(
                "laplace", 90, 0.86, 0.69
            ),  # more accurate, but below the operator's balanced accuracy
        ]
    )
    advice = estimate_advice(result=result, class_labels=["no", "yes"])
    assert [c["passes_gate"] for c in advice["candidates"]] == [True, True, False]
    assert advice["proposal"]["n_queries"] == 90 and advice["proposal"]["mechanism"] == "gaussian"
    assert advice["statement"] == (
        "Proposed: GNMax (Gaussian noise) on 90 queried public rows (σ 4 votes), costing each silo ε 1.25 "
        "(party-level, δ = 1e-05); expected accuracy 84.0 %, balanced accuracy 75.0 %, which passes the publish "
        "gate (the operator's rows alone score accuracy 80.0 %, balanced accuracy 70.0 %; without noise, L0, "
        "accuracy 85.0 %, balanced accuracy 78.0 %)."
    )
    assert advice["operator_only"] == BASELINES["operator_only"]
    assert advice["l0"] == result["reference"]


def test_where_no_candidate_passes_the_advice_says_nothing_private_beats_the_free_model():
    advice = estimate_advice(
        result=_result([_candidate("laplace", 30, 0.79, 0.71)]), class_labels=["no", "yes"]
    )
    assert advice["proposal"] is None
    assert advice["statement"].startswith(
        "None of the 1 private settings that fit every member's remaining budget is expected to pass the "
        "publish gate: nothing private can beat the free model with these budgets (the operator's rows alone "
        "score accuracy 80.0 %"
    )
    none_fit = estimate_advice(result=_result([]), class_labels=[])
    assert none_fit["proposal"] is None and none_fit["statement"].startswith(
        "No private setting that fit"
    )


def test_an_estimate_without_candidates_or_reference_gives_no_advice():
    assert estimate_advice(result=None, class_labels=[]) is None
    assert estimate_advice(result={"reference": None, "candidates": []}, class_labels=[]) is None
    assert estimate_advice(result={"reference": {}, "baselines": {}}, class_labels=[]) is None
