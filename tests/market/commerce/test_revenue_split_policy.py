"""The revenue split policy per federation (issue 28): agreement, value, equal — to the cent, idempotently, with
ledger entries that name the policy and the values used; the value split only for L0 models."""

import pytest

from market.accounts.services import organisation_create, user_create
from market.audit.models import AuditEvent
from market.commerce.models import WalletEntry, WalletEntryKind
from market.commerce.purchases import purchase_create
from market.commerce.revenue import NO_SILO_USED, revenue_shares, split_basis
from market.errors import InvalidInput
from market.federations.services import federation_create
from tests.conftest import api_client_for


def _values(shapley: dict) -> dict:
    return {
        "rule": "vote",
        "estimator": "exact",
        "silos": {
            key: {
                "shapley": {"balanced_accuracy": value, "accuracy": value},
                "rank_band": "top quarter",
            }
            for key, value in shapley.items()
        },
    }


def test_the_value_split_pays_nothing_to_a_negative_value_and_the_rest_in_proportion_to_the_cent():
    basis = split_basis(
        policy="value",
        contribution_weights={"3": 0.2, "5": 0.5, "8": 0.3},
        contribution_values=_values({"3": 0.12, "5": 0.04, "8": -0.01}),
        privacy_level="L0",
        values_released=True,
        shares_released=True,
    )
    assert basis.applied == "value" and basis.weights == {"3": 0.12, "5": 0.04, "8": 0.0}
    # 901 × 0.75 = 675.75 → 675, × 0.25 = 225.25 → 225; the cent left goes to the larger remainder (3)
    assert revenue_shares(amount_cents=901, weights=basis.weights) == {"3": 676, "5": 225}
    assert "paid nothing" in basis.notes["8"] and "-0.010000" in basis.notes["8"]
    assert basis.notes["3"] == (
        "Revenue split by contribution value: exact Shapley value (balanced accuracy) 0.120000"
    )


def test_the_equal_split_gives_every_silo_that_took_part_the_same_to_the_cent():
    basis = split_basis(
        policy="equal",
        contribution_weights={"3": 0.0, "5": 0.9, "8": 0.1},
        contribution_values={},
        privacy_level="L2",
        values_released=False,
        shares_released=True,
    )
    assert revenue_shares(amount_cents=1000, weights=basis.weights) == {
        "3": 334,
        "5": 333,
        "8": 333,
    }
    assert basis.notes["5"] == "Revenue split equally: 1 of 3 silos"


@pytest.mark.parametrize(
    ("level", "values", "reason"),
    [
        ("L1", _values({"3": 0.1, "5": 0.2}), "an L1 model's values are kept to the operator"),
        ("L2", _values({"3": 0.1, "5": 0.2}), "an L2 model's values are kept to the operator"),
        ("L0", {}, "the model has no contribution values"),
        ("L0", _values({"3": -0.1, "5": 0.0}), "no silo has a positive contribution value"),
    ],
)
def test_the_value_split_falls_back_to_agreement_and_says_why(level, values, reason):
    basis = split_basis(
        policy="value",
        contribution_weights={"3": 0.7, "5": 0.3},
        contribution_values=values,
        privacy_level=level,
        values_released=level == "L0",
        shares_released=True,  # L1 with published contributions, or L2
    )
    assert (basis.policy, basis.applied, basis.reason) == ("value", "agreement", reason)
    assert basis.weights == {"3": 0.7, "5": 0.3}
    assert basis.notes["3"] == (
        f"Revenue split by agreement: contribution weight 0.700000 (policy value not applied: {reason})"
    )


@pytest.mark.parametrize("policy", ["agreement", "value", "equal"])
def test_a_model_that_used_no_silo_pays_no_silo_under_any_policy(policy):
    """Every contribution weight 0: vote auto chose the operator's rows alone (issue 39), so no silo is paid."""
    basis = split_basis(
        policy=policy,
        contribution_weights={"3": 0.0, "5": 0.0},
        contribution_values={"silos": {}, "reason": "no silo used"},
        privacy_level="L0",
        values_released=True,
        shares_released=True,
    )
    assert (basis.weights, basis.reason) == ({}, NO_SILO_USED)
    assert revenue_shares(amount_cents=1000, weights=basis.weights) == {}  # the market keeps it


def _credits(purchase) -> dict:
    return {
        entry.wallet.organisation.name: (entry.amount_cents, entry.note)
        for entry in WalletEntry.objects.filter(
            purchase=purchase, kind=WalletEntryKind.REVENUE_CREDIT
        ).select_related("wallet__organisation")
    }


def test_a_purchase_from_a_value_split_federation_pays_by_value_to_the_cent_and_once(
    published_listing, buyer_user, silo_user, other_silo_user, top_up, settings
):
    settings.ONEFOLD_MARKET_FEE_PERCENT = 10
    constant = organisation_create(name="Constant Silo")
    hospital, bank = str(silo_user.organisation_id), str(other_silo_user.organisation_id)
    listing = published_listing(
        price_cents=1001,
        privacy_level="L0",
        weights={
            hospital: 0.2,
            bank: 0.3,
            str(constant.id): 0.5,
        },  # agreement would pay the constant most
    )
    global_model = listing.global_model
    global_model.contribution_values = _values(
        {hospital: 0.12, bank: 0.04, str(constant.id): -0.01}
    )
    global_model.save(update_fields=["contribution_values"])
    global_model.federation.revenue_split = "value"
    global_model.federation.save(update_fields=["revenue_split"])
    top_up(buyer_user.organisation, 5000)

    first = purchase_create(listing=listing, user=buyer_user, idempotency_key="value-1")
    again = purchase_create(listing=listing, user=buyer_user, idempotency_key="value-1")

    assert again.replayed and again.purchase.id == first.purchase.id
    # fee floor(100.1) = 100; 901 by 0.12 : 0.04 → 675.75 + 225.25 → 676 and 225; the constant silo nothing
    assert first.purchase.fee_cents == 100
    assert _credits(first.purchase) == {
        "Northwind Hospital": (
            676,
            "Revenue split by contribution value: exact Shapley value (balanced accuracy) 0.120000",
        ),
        "Contoso Bank": (
            225,
            "Revenue split by contribution value: exact Shapley value (balanced accuracy) 0.040000",
        ),
    }
    assert WalletEntry.objects.filter(wallet__organisation=constant).count() == 0


@pytest.mark.parametrize("policy", ["agreement", "value"])
def test_an_l1_model_whose_federation_does_not_publish_contributions_is_split_equally_and_says_why(
    policy,
):
    basis = split_basis(
        policy=policy,
        contribution_weights={"3": 0.7, "5": 0.3},
        contribution_values=_values({"3": 0.1, "5": 0.2}),
        privacy_level="L1",
        values_released=False,
        shares_released=False,
    )
    reason = (
        "an L1 model's agreement shares come from the silos' un-noised votes, which the federation does not "
        "publish"
    )
    if policy == "value":
        reason = f"an L1 model's values are kept to the operator; {reason}"
    assert (basis.applied, basis.reason, basis.weights) == ("equal", reason, {"3": 1.0, "5": 1.0})
    assert basis.notes["3"] == (
        f"Revenue split equally: 1 of 2 silos (policy {policy} not applied: {reason})"
    )


def test_a_purchase_of_an_l1_model_from_a_value_split_federation_is_split_by_agreement(
    published_listing, buyer_user, silo_user, other_silo_user, top_up, settings
):
    settings.ONEFOLD_MARKET_FEE_PERCENT = 10
    listing = published_listing(price_cents=1001, privacy_level="L1")  # weights 0.7 / 0.3
    global_model = listing.global_model
    global_model.contribution_values = _values(
        {str(silo_user.organisation_id): 0.0123, str(other_silo_user.organisation_id): 0.2345}
    )
    global_model.save(update_fields=["contribution_values"])
    global_model.federation.revenue_split = "value"
    global_model.federation.publish_contributions = (
        True  # else an L1 split is equal (the next test)
    )
    global_model.federation.save(update_fields=["revenue_split", "publish_contributions"])
    top_up(buyer_user.organisation, 5000)

    purchase = purchase_create(listing=listing, user=buyer_user).purchase

    credits = _credits(purchase)
    assert {name: cents for name, (cents, _) in credits.items()} == {
        "Northwind Hospital": 631,
        "Contoso Bank": 270,
    }
    assert all(
        "policy value not applied: an L1 model's values are kept to the operator" in note
        for _, note in credits.values()
    )
    assert not any("0.0123" in note or "0.2345" in note for _, note in credits.values())


def test_a_federation_names_a_known_revenue_split(operator, db):
    with pytest.raises(
        InvalidInput, match="'revenue_split' must be one of agreement, value, equal"
    ):
        federation_create(
            name="Split",
            description="",
            class_labels=["a", "b"],
            label_column="label",
            allowed_privacy_levels=["L0"],
            default_privacy_level="L0",
            default_parameters={},
            created_by=operator,
            policies={"revenue_split": "by-size"},
        )
    federation = federation_create(
        name="Split",
        description="",
        class_labels=["a", "b"],
        label_column="label",
        allowed_privacy_levels=["L0"],
        default_privacy_level="L0",
        default_parameters={},
        created_by=operator,
        policies={"revenue_split": "equal"},
    )
    assert federation.revenue_split == "equal"


def test_the_operator_changes_the_policy_after_creation_for_later_sales_only_and_it_is_audited(
    published_listing, buyer_user, silo_user, operator, top_up, settings
):
    settings.ONEFOLD_MARKET_FEE_PERCENT = 10
    listing = published_listing(price_cents=1001, privacy_level="L0")  # weights 0.7 / 0.3
    federation = listing.global_model.federation
    top_up(buyer_user.organisation, 5000)
    first = purchase_create(listing=listing, user=buyer_user).purchase
    paid_before = _credits(first)

    refused = api_client_for(silo_user).patch(
        f"/api/federations/{federation.slug}/", {"revenue_split": "equal"}, format="json"
    )
    bad = api_client_for(operator).patch(
        f"/api/federations/{federation.slug}/", {"revenue_split": "by-size"}, format="json"
    )
    assert refused.status_code == 403 and bad.status_code == 400
    assert "revenue_split" in bad.json()
    assert not AuditEvent.objects.filter(action="federation.updated").exists()

    changed = api_client_for(operator).patch(
        f"/api/federations/{federation.slug}/", {"revenue_split": "equal"}, format="json"
    )
    second_buyer = user_create(
        username="tia-tailspin",
        password="a long enough password 7",
        organisation=organisation_create(name="Tailspin Toys", is_silo=False, is_buyer=True),
    )
    top_up(second_buyer.organisation, 5000)
    second = purchase_create(listing=listing, user=second_buyer).purchase

    assert changed.status_code == 200 and changed.json()["revenue_split"] == "equal"
    assert AuditEvent.objects.get(action="federation.updated").details["changed"] == {
        "revenue_split": {"from": "agreement", "to": "equal"}
    }
    # the first sale stays as paid (901 by 0.7 / 0.3: 630.7 and 270.3 → 631 and 270); the second is split equally
    assert _credits(first) == paid_before
    assert {name: cents for name, (cents, _) in paid_before.items()} == {
        "Northwind Hospital": 631,
        "Contoso Bank": 270,
    }
    assert _credits(second) == {
        "Northwind Hospital": (451, "Revenue split equally: 1 of 2 silos"),
        "Contoso Bank": (450, "Revenue split equally: 1 of 2 silos"),
    }


@pytest.mark.parametrize(
    ("level", "policy", "what_varies"),
    [
        ("L1", "agreement", "weights"),
        ("L1", "value", "weights and values"),
        ("L2", "value", "values"),
        (
            "L0",
            "value",
            None,
        ),  # the control: at L0 a value payout follows the values, as documented
    ],
)
def test_a_payout_does_not_move_with_what_its_silo_may_not_see(
    published_listing, buyer_user, silo_user, other_silo_user, top_up, level, policy, what_varies
):
    """Payout leak test (docs/budgets.md): two sales of models that differ only in the other silo's weight and/or
    value pay silo A the same where A may not see them; at L0 the control shows that the test can tell."""
    hospital, bank = str(silo_user.organisation_id), str(other_silo_user.organisation_id)
    top_up(buyer_user.organisation, 10_000)
    credits = []
    for other_weight, other_value in ((0.3, 0.05), (0.6, 0.20)):
        weights = {hospital: 0.7, bank: other_weight}
        if what_varies == "values":
            weights[bank] = 0.3
        listing = published_listing(
            price_cents=1001,
            privacy_level=level,
            weights=weights,
            name=f"Model with {other_weight} {other_value}",
        )
        listing.global_model.contribution_values = _values({hospital: 0.1, bank: other_value})
        listing.global_model.save(update_fields=["contribution_values"])
        federation = listing.global_model.federation
        federation.revenue_split = policy
        federation.save(update_fields=["revenue_split"])
        purchase = purchase_create(listing=listing, user=buyer_user).purchase
        credits.append(_credits(purchase)["Northwind Hospital"])
    if what_varies is None:
        assert credits[0][0] != credits[1][0]
    else:
        assert credits[0] == credits[1]
