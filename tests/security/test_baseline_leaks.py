"""Per-silo baselines leak to no one who may not see every silo (market.jobs.visibility's rule).

The best single silo's and the average silo's scores, with the number of silos, let a silo of a small federation
solve for the others' exact scores (with three: the third's is 3 × average − best − its own). Whoever may not see
every silo — buyers, outsiders, the silos themselves — reads them rounded to whole points from four silos on, and
below four only whether the model beats them; the operator reads them exactly. Every answer that shows baselines
is read as every principal: the model card (API and page), the job (API and page) and the global model's API.
"""

import pytest
from django.test import Client

from market.jobs.models import GlobalModel
from tests.conftest import api_client_for

BEST = {
    "accuracy": 0.8123957,
    "balanced_accuracy": 0.7923957,
    "macro_f1": 0.7723957,
    "roc_auc": 0.8623957,
}
AVERAGE = {
    "accuracy": 0.6457957,
    "balanced_accuracy": 0.6257957,
    "macro_f1": 0.6057957,
    "roc_auc": 0.7457957,
}


def _spellings(value: float) -> list[str]:
    """How an exact score can be printed: JSON, 4 decimals, the pages' percent with 1 decimal (workers.numbers)."""
    return [repr(value)[:8], f"{value:.4f}", f"{100 * value:.1f} %"]


def _answers(world, principal: str) -> list[str]:
    """Every answer showing baselines that ``principal`` may read (others answer 403/404 and show nothing)."""
    targets = world.targets
    listing = targets["listing"]["published"]["listing_id"]
    job = targets["job"][None]["job_id"]
    global_model = targets["global_model"][None]["global_model_id"]
    client = api_client_for(world.people[principal])
    answers = []
    for path in (
        f"/api/listings/{listing}/",
        f"/api/jobs/{job}/",
        f"/api/global-models/{global_model}/",
        f"/market/listings/{listing}/",
        f"/jobs/{job}/",
    ):
        if path.startswith("/api/"):
            response = client.get(path)
        else:
            page_client = Client()
            page_client.force_login(world.people[principal])
            response = page_client.get(path)
        if response.status_code == 200:
            answers.append(response.content.decode())
    return answers


@pytest.mark.parametrize("n_silos", [3, 4, 20])
def test_only_the_operator_reads_the_silo_baselines_exactly(world, n_silos):
    global_model_id = world.targets["global_model"][None]["global_model_id"]
    silo_key = str(world.people["silo_a"].organisation_id)
    GlobalModel.objects.filter(id=global_model_id).update(
        baselines={
            "majority_class": None,
            "best_single_silo": {**BEST, "silo": silo_key},
            "average_silo": AVERAGE,
            "n_silos": n_silos,
        }
    )
    exact = [
        spelling for value in [*BEST.values(), *AVERAGE.values()] for spelling in _spellings(value)
    ]
    read = {principal: _answers(world, principal) for principal in world.people}
    assert all(read.values())  # every principal reads at least the published card
    for principal, answers in read.items():
        leaked = sorted(
            {spelling for answer in answers for spelling in exact if spelling in answer}
        )
        if principal == "operator":
            operator_view = api_client_for(world.people["operator"]).get(
                f"/api/global-models/{global_model_id}/"
            )
            assert (
                operator_view.json()["baselines"]["best_single_silo"]["accuracy"]
                == BEST["accuracy"]
            )
            api, _, page = _spellings(BEST["accuracy"])
            assert {api, page} <= set(leaked)  # API and job page
        else:
            assert leaked == [], f"{principal} reads {leaked}"
    card = api_client_for(world.people["buyer_b"]).get(
        f"/api/listings/{world.targets['listing']['published']['listing_id']}/"
    )
    best = card.json()["card"]["metrics"]["best_single_silo"]
    # no score at all, whatever the number of silos: jobs over different sets of them could be differenced
    assert [best[name] for name in BEST] == [None] * 4 and "withheld" in best
