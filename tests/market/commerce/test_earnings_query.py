"""The earnings API reads its query as a typed parameter: a bad one is a 400 with a sentence, never a 500."""

import pytest


@pytest.mark.parametrize("organisation", ["9" * 5000, "²", "abc", "0"])
def test_an_organisation_that_is_not_a_positive_integer_is_a_400(operator_api, organisation):
    response = operator_api.get("/api/earnings/", {"organisation": organisation})
    assert response.status_code == 400
    assert list(response.json()) == ["organisation"]


def test_the_operator_reads_an_organisations_earnings_by_its_id(operator_api, silo_user):
    response = operator_api.get("/api/earnings/", {"organisation": silo_user.organisation_id})
    assert (response.status_code, response.json()["organisation"]) == (
        200,
        silo_user.organisation_id,
    )
