"""Confident-GNMax in FedKT's server step (issue 25 item 2): only the queries the silos agree on get labels and are
trained on; the fusion reports the mechanism, T, σ₁, σ₂ and the queries considered and answered, and its privacy
analysis is the data-independent bound only."""

import numpy as np
from sklearn.datasets import load_breast_cancer

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.registry import Member, algorithm_get
from workers.privacy.mechanisms import ConfidentGaussianNoise

VOTERS, S = 10, 2  # ten silos of two students: at most 20 votes a row


def test_only_rows_the_silos_agree_on_are_labelled_and_trained_on():
    features, labels = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    agreed = rng.random(len(labels)) < 0.5
    votes = np.zeros((len(labels), 2), dtype=np.int64)
    votes[np.arange(len(labels)), labels] = np.where(agreed, VOTERS * S, VOTERS)  # 20–0 or 10–10
    votes[np.arange(len(labels)), 1 - labels] = np.where(agreed, 0, VOTERS)
    members = [
        Member(key=str(j), organisation=str(j), n_examples=10, validation_score=0.0, n_models=S)
        for j in range(VOTERS)
    ]
    # T = 17 votes, σ₁ = 0.5: 6 σ₁ above a 10–10 split and below a 20–0 agreement.
    noise = ConfidentGaussianNoise(sigma=2.0, threshold=17.0, sigma_threshold=0.5)
    fusion = algorithm_get("fedkt").fuse(
        votes,
        features,
        members=members,
        n_classes=2,
        params={
            "query_count": 200,
            "final_model": {"family": "random_forest", "n_estimators": 5},
            "privacy": {"delta": 1e-5},
        },
        noise=noise,
        seed=3,
    )
    labelled = fusion.trained
    queried = np.flatnonzero(fusion.labels >= 0)
    assert np.array_equal(np.flatnonzero(labelled), queried)
    assert labelled.sum() > 0 and np.all(agreed[labelled])  # no split row is answered
    # GNMax with σ₂ = 2 on a 20–0 row keeps the silos' label
    assert np.array_equal(fusion.labels[labelled], labels[labelled])
    details = fusion.details["confident_gnmax"]
    assert details == {
        "sigma": 2.0,
        "threshold": 17.0,
        "sigma_threshold": 0.5,
        "n_considered": 200,
        "n_answered": int(labelled.sum()),
    }
    assert fusion.details["n_trained"] == int(labelled.sum())
    report = fusion.privacy.data_independent
    assert (report.mechanism, report.n_queries, report.threshold, report.sigma_threshold) == (
        "confident_gnmax",
        200,
        17.0,
        0.5,
    )
    assert fusion.privacy.data_dependent is None


def test_a_plain_gnmax_fusion_reports_no_confident_details():
    from workers.privacy.mechanisms import GaussianNoise

    features, labels = load_breast_cancer(return_X_y=True)
    votes = np.zeros((len(labels), 2), dtype=np.int64)
    votes[np.arange(len(labels)), labels] = 4
    fusion = algorithm_get("fedkt").fuse(
        votes,
        features,
        members=[
            Member(key="a", organisation="a", n_examples=10, validation_score=0.0, n_models=2)
        ],
        n_classes=2,
        params={"query_count": 30, "final_model": {"family": "random_forest", "n_estimators": 5}},
        noise=GaussianNoise(sigma=1.0),
        seed=1,
    )
    assert "confident_gnmax" not in fusion.details
    assert fusion.privacy.data_dependent is not None


def test_the_default_threshold_and_check_noise_are_what_the_validation_rule_chose():
    """The defaults of a Confident-GNMax job that names none are the rule's choice from the committed validation
    runs (docs/results/private.md), never from the test split."""
    import json

    from workers.privacy.settings import (
        DEFAULT_CONFIDENT_CHECK_NOISE_RATIO,
        DEFAULT_CONFIDENT_THRESHOLD_RATIO,
    )
    from workers.reproduce.confident import CONFIDENT_RESULTS, SETTING_KEYS, choose

    entries = json.loads(CONFIDENT_RESULTS.read_text())
    assert not any(entry["test"] for entry in entries)
    chosen = dict(zip(SETTING_KEYS, choose(entries)))
    assert (chosen["threshold_ratio"], chosen["check_noise_ratio"]) == (
        DEFAULT_CONFIDENT_THRESHOLD_RATIO,
        DEFAULT_CONFIDENT_CHECK_NOISE_RATIO,
    )


def test_the_results_page_shows_the_tables_the_saved_runs_give(capsys):
    import json
    from pathlib import Path

    from workers.reproduce.confident import (
        CONFIDENT_RESULTS,
        CONFIDENT_TEST_RESULTS,
        choose,
        main,
        table,
    )

    page = (Path(__file__).resolve().parents[3] / "docs" / "results" / "private.md").read_text()
    validation = json.loads(CONFIDENT_RESULTS.read_text())
    test = json.loads(CONFIDENT_TEST_RESULTS.read_text())
    assert table(validation, chosen=choose(validation), limit=5) in page
    assert table(test) in page
    assert "python -m workers.reproduce.confident table" in page
    assert (
        main(["table"]) == 0
    )  # the page's command, as shown: it reads the saved runs and prints the tables
    printed = capsys.readouterr().out
    assert table(test) in printed and table(validation, chosen=choose(validation)) in printed
