"""Where contribution values show (issue 28): the operator reads every silo's value, its error and a chart with
error bars on the job page and in the model card's operator-only section; a silo reads its own value and rank band
on its earnings page and through the API; buyers read nothing per silo."""

import re

import pytest

from tests.conftest import api_client_for
from tests.market.commerce.conftest import *  # noqa: F401,F403 (global-model, listing, buyer and top-up fixtures)

HOSPITAL_VALUE, BANK_VALUE, BANK_ERROR = 0.0612, -0.0137, 0.0045


@pytest.fixture
def valued_listing(published_listing, silo_user, other_silo_user):
    listing = published_listing(price_cents=1000, privacy_level="L0", name="Valued forest")
    silo = lambda value, error, rank, band: {  # noqa: E731
        "shapley": {"balanced_accuracy": value, "accuracy": value},
        "standard_error": {"balanced_accuracy": error, "accuracy": error},
        "leave_one_out": {"balanced_accuracy": value / 2, "accuracy": value / 2},
        "rank": rank,
        "rank_band": band,
    }
    listing.global_model.contribution_values = {
        "rule": "vote",
        "estimator": "permutation",
        "permutations": 520,
        "rows": 400,
        "measures": ["balanced_accuracy", "accuracy"],
        "grand_coalition": {"balanced_accuracy": 0.548, "accuracy": 0.6},
        "empty_coalition": {"balanced_accuracy": 0.5, "accuracy": 0.5},
        "duplicates": [[str(silo_user.organisation_id), str(other_silo_user.organisation_id)]],
        "silos": {
            str(silo_user.organisation_id): silo(HOSPITAL_VALUE, 0.0021, 1, "top quarter"),
            str(other_silo_user.organisation_id): silo(BANK_VALUE, BANK_ERROR, 2, "third quarter"),
        },
    }
    listing.global_model.save(update_fields=["contribution_values"])
    return listing


def read(client, user, path: str) -> str:
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200
    return response.content.decode()


def test_the_operator_reads_every_value_with_error_bars_on_the_job_page_and_the_card(
    client, operator, valued_listing
):
    job_page = read(client, operator, f"/jobs/{valued_listing.global_model.job_id}/")
    card = read(client, operator, f"/market/listings/{valued_listing.id}/")
    for page, plot in ((job_page, "job-value-plot"), (card, "card-value-plot")):
        assert "Northwind Hospital" in page and "Contoso Bank" in page
        assert ">+6.1<" in page and ">-1.4<" in page and "± 0.4 (standard error)" in page
        svg = re.search(rf'<svg id="{plot}".*?</svg>', page, re.DOTALL).group(0)
        assert svg.count("<rect") == 2 and svg.count('class="whisker"') == 2
        # the bank's negative bar is red and ends at zero; its whisker spans ± two standard errors
        bank = re.search(r'data-silo="Contoso Bank">(.*?)</g>', svg, re.DOTALL).group(1)
        assert 'fill="#b42318"' in bank
    assert 'id="card-private-values"' in card and "operator only" in card
    copies = "Copies: Northwind Hospital and Contoso Bank made (nearly) identical predictions"
    assert copies in job_page and copies in card


def test_a_silo_reads_its_own_value_and_band_only_and_buyers_read_none(
    client, silo_user, buyer_user, valued_listing
):
    earnings = read(client, silo_user, "/market/earnings/")
    silo_card = read(client, silo_user, f"/market/listings/{valued_listing.id}/")
    buyer_card = read(client, buyer_user, f"/market/listings/{valued_listing.id}/")
    api = api_client_for(silo_user).get("/api/earnings/").json()["contribution_values"]

    assert ">+6.1<" in earnings and "top quarter" in earnings and ">-1.4<" not in earnings
    assert [(row["shapley"]["balanced_accuracy"], row["rank_band"]) for row in api] == [
        (HOSPITAL_VALUE, "top quarter")
    ]
    assert "Copies:" not in earnings
    for card in (silo_card, buyer_card):
        assert "Copies:" not in card
        assert "card-private-values" not in card and ">+6.1<" not in card and ">-1.4<" not in card
