"""Where contribution values show (issue 28): the operator reads every silo's value, its error and a chart with
error bars on the job page and in the model card's operator-only section; a silo reads its own value and rank band
on its earnings page and through the API; buyers read nothing per silo."""

import re

from tests.conftest import api_client_for
from tests.fixtures.commerce import HOSPITAL_VALUE


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
