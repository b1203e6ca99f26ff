"""A buyer reaches what it bought through the global-model API (market.jobs.selectors decides who may see a model,
market.jobs.visibility what each viewer sees of it): the model's detail as any non-member sees it, and the feature
specification the model reads. An organisation that did not buy it still gets the 404 of a model that does not
exist.

The world is test_visibility's: a buyer launched a job over two silos' submissions (data-dependent ε 0.8,
data-independent 2.5, weights 0.7 / 0.3); a second buyer organisation, Tailspin Retail, buys its listing.
"""

import json

import pytest

from tests.conftest import api_client_for


@pytest.fixture
def second_buyer(db):
    from market.accounts.services import organisation_create, user_create

    retail = organisation_create(name="Tailspin Retail", is_silo=False, is_buyer=True)
    return user_create(username="tom-tailspin", password="tailspin-password", organisation=retail)


@pytest.fixture
def outsider(db):
    from market.accounts.services import organisation_create, user_create

    other = organisation_create(name="Woodgrove Bank", is_silo=False, is_buyer=True)
    return user_create(username="wes-woodgrove", password="woodgrove-password", organisation=other)


def buy(global_model, user, operator, top_up):  # noqa: F811
    from market.commerce.purchases import purchase_create
    from market.commerce.services import listing_create, listing_publish

    listing = listing_publish(
        listing=listing_create(
            global_model=global_model,
            name="Adult income forest",
            description="",
            licence_text="Any lawful use.",
            price_cents=500,
            actor=operator,
        ),
        actor=operator,
    )
    top_up(user.organisation, 500)
    purchase_create(listing=listing, user=user)


def test_a_buyer_reads_the_bought_models_detail_as_a_non_member_sees_it(
    launched_model,  # noqa: F811
    second_buyer,
    operator,
    top_up,  # noqa: F811
):
    url = f"/api/global-models/{launched_model.id}/"
    before = api_client_for(second_buyer).get(url)
    assert before.status_code == 404
    assert before.json() == {
        "detail": f"There is no global model #{launched_model.id} you may see."
    }

    buy(launched_model, second_buyer, operator, top_up)
    response = api_client_for(second_buyer).get(url)

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["id"], body["job"], body["n_classes"]) == (
        launched_model.id,
        launched_model.job_id,
        2,
    )
    assert body["feature_view"] == "one_hot"
    assert body["metrics"]["accuracy"] == launched_model.metrics["accuracy"]
    # what is private to the federation stays private: the data-dependent ε and who contributed what
    assert body["privacy_report"]["data_dependent"] is None
    assert body["privacy_report"]["data_independent"]["epsilon"] == 2.5
    assert (body["submission_metrics"], body["contribution_weights"]) == ({}, {})
    assert "submissions" not in body["lineage"] and "fusion" not in body["lineage"]
    assert [file["format"] for file in body["files"]] == ["skops", "onnx"]


def test_a_buyer_reads_the_feature_specification_the_bought_model_reads(
    launched_model,  # noqa: F811
    second_buyer,
    operator,
    top_up,  # noqa: F811
):
    url = f"/api/global-models/{launched_model.id}/feature-spec.json"
    assert api_client_for(second_buyer).get(url).status_code == 404
    # the federation's own route stays its members': the buyer is told where its buyers read it
    refused = api_client_for(second_buyer).get(
        f"/api/federations/{launched_model.federation.slug}/public-dataset/feature-spec.json"
    )
    assert (refused.status_code, refused.json()) == (
        403,
        {
            "detail": "Your organisation is not a member of 'adult-income'; join it first. A buyer "
            "reads the feature specification of a model it bought at "
            "/api/global-models/<id>/feature-spec.json."
        },
    )

    buy(launched_model, second_buyer, operator, top_up)
    response = api_client_for(second_buyer).get(url)

    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    public_dataset = launched_model.job.public_dataset
    assert response["Content-Disposition"] == (
        f'attachment; filename="global-model-{launched_model.id}-feature-spec-'
        f'{public_dataset.content_sha256[:12]}.json"'
    )
    assert json.loads(response.content) == public_dataset.feature_spec


def test_an_organisation_that_did_not_buy_the_model_still_sees_no_such_model(
    launched_model,  # noqa: F811
    second_buyer,
    outsider,
    operator,
    top_up,  # noqa: F811
):
    buy(launched_model, second_buyer, operator, top_up)
    client = api_client_for(outsider)
    for path in ("", "feature-spec.json"):
        response = client.get(f"/api/global-models/{launched_model.id}/{path}")
        assert response.status_code == 404
        assert response.json() == {
            "detail": f"There is no global model #{launched_model.id} you may see."
        }
    assert client.get(f"/api/global-models/{launched_model.id + 1000}/").status_code == 404


def test_a_buyer_who_left_the_buying_organisation_no_longer_sees_the_model(
    launched_model,  # noqa: F811
    second_buyer,
    outsider,
    operator,
    top_up,  # noqa: F811
):
    buy(launched_model, second_buyer, operator, top_up)
    second_buyer.organisation = outsider.organisation
    second_buyer.save(update_fields=["organisation"])
    response = api_client_for(second_buyer).get(f"/api/global-models/{launched_model.id}/")
    assert response.status_code == 404
