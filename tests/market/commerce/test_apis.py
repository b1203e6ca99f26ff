from market.commerce.models import Listing, Purchase, Wallet, WalletEntry
from market.commerce.purchases import purchase_create
from market.commerce.services import listing_create


def names(response) -> list[str]:
    return [listing["name"] for listing in response.json()["results"]]


def test_catalog_searches_filters_orders_and_paginates(
    published_listing, buyer_api, operator, make_global_model
):
    published_listing(name="Forest income model", family="random_forest", price_cents=3000)
    published_listing(
        name="Boosted income model",
        family="xgboost",
        price_cents=1000,
        description="Gradient boosting, calibrated.",
    )
    published_listing(
        name="Network income model",
        family="mlp",
        price_cents=2000,
        privacy_level="L0",
        privacy_report={"level": "L0", "data_independent": None, "data_dependent": None},
    )
    listing_create(
        global_model=make_global_model(),
        name="Draft model",
        description="",
        licence_text="x",
        price_cents=1,
        actor=operator,
    )

    assert names(buyer_api.get("/api/listings/?ordering=price")) == [
        "Boosted income model",
        "Network income model",
        "Forest income model",
    ]
    assert names(buyer_api.get("/api/listings/?search=calibrated")) == ["Boosted income model"]
    assert names(buyer_api.get("/api/listings/?model_family=mlp")) == ["Network income model"]
    assert names(buyer_api.get("/api/listings/?privacy_level=L1&ordering=-price")) == [
        "Forest income model",
        "Boosted income model",
    ]
    assert names(buyer_api.get("/api/listings/?min_price=1500&max_price=2500")) == [
        "Network income model"
    ]
    assert names(
        buyer_api.get("/api/listings/?federation=adult-income&ordering=name&limit=2&offset=1")
    ) == ["Forest income model", "Network income model"]
    accuracies = sorted(listing.accuracy for listing in Listing.objects.filter(status="published"))
    above = buyer_api.get(f"/api/listings/?min_accuracy={accuracies[1]}&ordering=accuracy").json()
    assert [listing["accuracy"] for listing in above["results"]] == accuracies[1:]
    assert buyer_api.get("/api/listings/").json()["count"] == 3  # the draft is the operator's only
    assert buyer_api.get("/api/listings/?min_accuracy=high").json() == {
        "detail": "The filter 'min_accuracy' must be a number, not 'high'."
    }


def test_model_card_is_generated_from_the_job_and_hides_contributions_by_default(
    published_listing, buyer_api, federation_with_data
):
    listing = published_listing(price_cents=1234)
    body = buyer_api.get(f"/api/listings/{listing.id}/").json()
    card = body["card"]
    global_model = listing.global_model

    assert body["price_cents"] == 1234 and body["status"] == "published"
    assert card["task"]["classes"] == ["<=50K", ">50K"]
    assert card["algorithm"] == {
        "kind": "fedkt",
        "name": "FedKT",
        "model_family": "random_forest",
        "parameters": {"partitions": 2, "learner": "random_forest"},
    }
    assert (
        card["privacy"]["level"],
        card["privacy"]["epsilon"],
        card["privacy"]["delta"],
        card["privacy"]["unit"],
    ) == ("L1", 2.5, 1e-5, "party-level")
    assert "data_dependent" not in card["privacy"]  # the federation does not publish it
    assert card["contributing_silos"] == 2
    assert card["public_data_sha256"] == federation_with_data.public_datasets.first().content_sha256
    assert card["metrics"]["global"]["accuracy"] == global_model.metrics["accuracy"]
    # two silos: no single silo's score, only whether the model beats it (each silo could solve for the other's)
    assert card["metrics"]["best_single_silo"]["accuracy"] is None
    assert card["metrics"]["best_single_silo"]["model_is_better"]["accuracy"] is True
    assert card["metrics"]["average_silo"]["macro_f1"] is None
    assert card["confusion_matrix"] == global_model.metrics["confusion_matrix"]
    assert sorted(entry["format"] for entry in card["formats"]) == ["onnx", "skops"]
    assert card["size_bytes"] == sum(entry["size_bytes"] for entry in card["formats"])
    assert card["reproducibility"]["seed"] == 7
    assert sorted(card["reproducibility"]["lineage"]) == [
        "code_version",
        "job",
        "public_dataset",
        "seed",
    ]
    assert "contributions" not in card
    for name in ("confusion-matrix", "reliability"):
        image = buyer_api.get(card["plots"][name].replace("http://testserver", ""))
        assert image.status_code == 200 and image["Content-Type"] == "image/png"
        assert image.content.startswith(b"\x89PNG")


def test_model_card_shows_what_the_federation_publishes(
    published_listing, buyer_api, federation_with_data
):
    federation_with_data.publish_data_dependent_epsilon = True
    federation_with_data.publish_contributions = True
    federation_with_data.save()
    card = buyer_api.get(f"/api/listings/{published_listing().id}/").json()["card"]
    assert card["privacy"]["data_dependent"]["epsilon"] == 0.8
    assert card["contributions"] == [
        {"organisation": "Northwind Hospital", "weight": 0.7},
        {"organisation": "Contoso Bank", "weight": 0.3},
    ]
    assert card["reproducibility"]["lineage"]["fusion"] == {"weights": {"11": 0.7, "12": 0.3}}


def test_model_card_says_how_many_pre_flight_estimates_preceded_the_jobs_launch(
    published_listing, buyer_api, buyer_user, client
):
    """Issue 38 item 3: the buyer reads how many estimates the operator saw before choosing the job."""
    from market.jobs.models import Job

    listing = published_listing()
    Job.objects.filter(id=listing.global_model.job_id).update(estimates_before_launch=3)

    card = buyer_api.get(f"/api/listings/{listing.id}/").json()["card"]
    client.force_login(buyer_user)
    page = client.get(f"/market/listings/{listing.id}/").content.decode()

    assert card["reproducibility"]["estimates_before_launch"] == 3
    assert "<dt>Pre-flight estimates before launch</dt><dd>3</dd>" in page


def test_drafts_are_invisible_to_buyers_and_only_operators_publish(
    make_global_model, operator_api, buyer_api
):
    global_model = make_global_model()
    created = operator_api.post(
        "/api/listings/",
        {
            "global_model": global_model.id,
            "name": "Income v1",
            "licence_text": "Any lawful use.",
            "price_cents": 500,
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    listing_id = created.json()["id"]
    assert buyer_api.get(f"/api/listings/{listing_id}/").status_code == 404
    assert buyer_api.post(f"/api/listings/{listing_id}/publish/").status_code == 404
    assert (
        buyer_api.post(
            "/api/listings/",
            {
                "global_model": global_model.id,
                "name": "Mine",
                "licence_text": "x",
                "price_cents": 1,
            },
            format="json",
        ).status_code
        == 403
    )
    published = operator_api.post(f"/api/listings/{listing_id}/publish/")
    assert published.status_code == 200 and published.json()["status"] == "published"
    assert buyer_api.get(f"/api/listings/{listing_id}/").status_code == 200
    assert buyer_api.post(f"/api/listings/{listing_id}/retire/").status_code == 403
    assert operator_api.post(f"/api/listings/{listing_id}/retire/").json()["status"] == "retired"
    assert Listing.objects.get().status == "retired"


def test_purchase_api_honours_the_idempotency_key(published_listing, buyer_api, buyer_user, top_up):
    listing = published_listing(price_cents=2500)
    top_up(buyer_user.organisation, 10_000)
    first = buyer_api.post(f"/api/listings/{listing.id}/purchase/", HTTP_IDEMPOTENCY_KEY="order-77")
    again = buyer_api.post(f"/api/listings/{listing.id}/purchase/", HTTP_IDEMPOTENCY_KEY="order-77")

    assert first.status_code == 201 and again.status_code == 201
    assert first.json() == again.json()
    assert (first["Idempotent-Replayed"], again["Idempotent-Replayed"]) == ("false", "true")
    assert first.json()["price_cents"] == 2500 and first.json()["fee_cents"] == 250
    owned = buyer_api.post(f"/api/listings/{listing.id}/purchase/", HTTP_IDEMPOTENCY_KEY="order-78")
    assert owned.status_code == 409 and "already owns" in owned.json()["detail"]
    other = published_listing(price_cents=10)
    reused = buyer_api.post(f"/api/listings/{other.id}/purchase/", HTTP_IDEMPOTENCY_KEY="order-77")
    assert reused.status_code == 422
    assert Purchase.objects.count() == 1
    wallet = buyer_api.get("/api/wallet/").json()
    assert wallet["balance_cents"] == 7500
    assert [(entry["kind"], entry["amount_cents"]) for entry in wallet["entries"]] == [
        ("purchase_debit", -2500),
        ("top_up", 10_000),
    ]
    assert [
        purchase["listing"] for purchase in buyer_api.get("/api/purchases/").json()["results"]
    ] == [listing.id]


def test_wallets_are_private_and_top_ups_are_for_operators(
    buyer_api, buyer_user, silo_api, silo_user, operator_api
):
    organisation_id = buyer_user.organisation_id
    top_up_url = f"/api/organisations/{organisation_id}/wallet/top-ups/"
    assert (
        buyer_api.post(
            top_up_url, {"amount_cents": 100, "reference": "r1"}, format="json"
        ).status_code
        == 403
    )
    created = operator_api.post(top_up_url, {"amount_cents": 100, "reference": "r1"}, format="json")
    repeated = operator_api.post(
        top_up_url, {"amount_cents": 100, "reference": "r1"}, format="json"
    )
    assert (created.status_code, repeated.status_code, repeated.json()["id"]) == (
        201,
        200,
        created.json()["id"],
    )
    assert (
        operator_api.get(f"/api/organisations/{organisation_id}/wallet/").json()["balance_cents"]
        == 100
    )
    assert (
        buyer_api.get(f"/api/organisations/{organisation_id}/wallet/").json()["balance_cents"]
        == 100
    )
    assert silo_api.get(f"/api/organisations/{organisation_id}/wallet/").status_code == 404
    assert silo_api.get("/api/wallet/").json()["balance_cents"] == 0
    assert WalletEntry.objects.count() == 1


NO_USE = {"usage_earned_cents": 0, "usage_calls": 0}  # no metered use of these download listings


def test_silos_see_their_earnings_per_listing_and_per_purchase(
    published_listing, buyer_user, silo_user, silo_api, other_silo_user, top_up, buyer_api
):
    first, second = (
        published_listing(price_cents=1000, privacy_level="L0"),  # an L1 sale is split equally
        published_listing(price_cents=2000, family="xgboost", privacy_level="L0"),
    )
    top_up(buyer_user.organisation, 10_000)
    bought = [
        purchase_create(listing=listing, user=buyer_user).purchase for listing in (first, second)
    ]

    earnings = silo_api.get("/api/earnings/").json()
    # 10 % fee; Northwind holds weight 0.7: 900 → 630, 1800 → 1260.
    assert earnings["total_cents"] == 1890
    assert earnings["per_listing"] == [
        {
            "listing_id": second.id,
            "listing_name": second.name,
            "earned_cents": 1260,
            "sales": 1,
            **NO_USE,
        },
        {
            "listing_id": first.id,
            "listing_name": first.name,
            "earned_cents": 630,
            "sales": 1,
            **NO_USE,
        },
    ]
    assert [(row["purchase_id"], row["earned_cents"]) for row in earnings["per_purchase"]] == [
        (bought[1].id, 1260),
        (bought[0].id, 630),
    ]
    assert buyer_api.get("/api/earnings/").json()["total_cents"] == 0
    assert (
        silo_api.get(f"/api/earnings/?organisation={other_silo_user.organisation_id}").status_code
        == 403
    )
    total = sum(Wallet.objects.values_list("balance_cents", flat=True))
    assert total == 10_000  # money moved, none created or lost
