"""Baselines of a global model in the API (global model and job) and on the job page, as market.jobs.visibility
lets each viewer see them: everyone sees the scores; which organisation the best single silo is, only operators,
that silo itself, and everyone where the federation publishes contributions.

The world of test_visibility.py: silo_a (Northwind Hospital) scored 0.6173, silo_b (Contoso Bank) 0.5419.
"""

from market.jobs.baselines import SILO_SCORES_WITHHELD as WITHHELD
from tests.conftest import api_client_for
from tests.fixtures.jobs import read_as

BEST = {"accuracy": 0.6173, "balanced_accuracy": 0.6173, "macro_f1": 0.6173, "roc_auc": 0.6173}
AVERAGE = {
    "accuracy": (0.6173 + 0.5419) / 2,
    "balanced_accuracy": (0.6173 + 0.5419) / 2,
    "macro_f1": (0.6173 + 0.5419) / 2,
    "roc_auc": (0.6173 + 0.5419) / 2,
}


def approximately(metrics: dict) -> dict:
    return {name: round(value, 6) for name, value in metrics.items()}


def withheld(global_model, baseline: dict) -> dict:
    """A silo baseline as a viewer who may not see every silo sees it."""
    return {
        **dict.fromkeys(baseline),
        "model_is_better": {
            name: global_model.metrics[name] > value for name, value in baseline.items()
        },
        "withheld": WITHHELD,
    }


def test_the_launching_buyer_sees_only_whether_the_model_beats_each_silo_baseline(
    launched_model, buyer_user
):  # noqa: F811
    baselines = read_as(buyer_user, launched_model)["baselines"]
    counts = [sum(row) for row in launched_model.metrics["confusion_matrix"]]
    assert baselines["best_single_silo"] == withheld(launched_model, BEST)
    assert baselines["average_silo"] == withheld(launched_model, AVERAGE)
    assert baselines["n_silos"] == 2
    assert baselines["majority_class"]["accuracy"] == max(counts) / sum(counts)
    assert baselines["majority_class"]["balanced_accuracy"] == 0.5


def test_the_operator_sees_every_baseline_and_the_best_silo_itself_is_told_it_is_best(
    launched_model,
    operator,
    silo_user,  # noqa: F811
    other_silo_user,
):
    named = {**BEST, "silo": str(silo_user.organisation_id), "organisation": "Northwind Hospital"}
    operator_view = read_as(operator, launched_model)["baselines"]
    assert operator_view["best_single_silo"] == named
    assert approximately(operator_view["average_silo"]) == approximately(AVERAGE)
    # a member of a federation of two would solve the other's score from its own and the average
    assert read_as(silo_user, launched_model)["baselines"]["best_single_silo"] == {
        **withheld(launched_model, BEST),
        "organisation": "Northwind Hospital",
    }
    other = read_as(other_silo_user, launched_model)["baselines"]
    assert other["best_single_silo"] == withheld(launched_model, BEST)
    assert other["average_silo"] == withheld(launched_model, AVERAGE)


def test_the_job_api_shows_the_baselines_as_the_public_sees_them(launched_model, operator):  # noqa: F811
    body = api_client_for(operator).get(f"/api/jobs/{launched_model.job_id}/").json()
    assert body["baselines"]["best_single_silo"] == withheld(launched_model, BEST)
    assert body["baselines"]["n_silos"] == 2


def test_the_job_page_shows_the_baselines_to_the_operator_and_withholds_silo_scores_from_others(
    client, launched_model, operator, buyer_user
):  # noqa: F811
    client.force_login(operator)
    page = client.get(f"/jobs/{launched_model.job_id}/").content.decode()
    assert 'id="job-baseline-majority-class"' in page and 'id="job-baseline-average-silo"' in page
    assert "Baseline: best single silo (Northwind Hospital)</th><td>61.7 %</td>" in page
    assert "Baseline: average silo (2)</th><td>58.0 %</td>" in page

    client.force_login(buyer_user)
    page = client.get(f"/jobs/{launched_model.job_id}/").content.decode()
    above = "above" if launched_model.metrics["balanced_accuracy"] > 0.6173 else "below"
    assert (
        'Baseline: best single silo</th><td colspan="4" class="meta" data-baseline-withheld>Not shown: silos\' '
        "scores are shown to the federation's operators only (2 silos measured). The model is "
        f"{above} it in balanced accuracy.</td>" in page
    )
    assert "Northwind Hospital" not in page and "61.7 %" not in page and "58.0 %" not in page
