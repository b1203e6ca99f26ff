"""Role-aware navigation and home pages: each role sees its own menu and lands on its balance or budget, its
recent activity and its next action."""

import re

from django.test import Client

from market.accounts.services import organisation_create, user_create


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def menu_labels(html: str) -> list[str]:
    navigation = re.search(r'<nav class="main-nav".*?</ul>', html, re.S).group(0)
    return re.findall(r'<a href="[^"]*"(?: aria-current="page")?>([^<]+)</a>', navigation)


def test_a_buyer_sees_models_purchases_and_wallet_and_lands_on_its_balance(db):
    shop = organisation_create(name="Fabrikam Insurance")
    shop.is_silo, shop.is_buyer = False, True
    shop.save()
    buyer = user_create(username="bo-buyer", password="buyer-password", organisation=shop)

    response = client_for(buyer).get("/")

    assert response.status_code == 200
    assert menu_labels(response.text) == ["Home", "Models", "Purchases", "Wallet"]
    assert 'id="home-balance">0.00<' in response.text
    assert "Browse models" in response.text
    assert "Privacy budget" not in response.text and "Earnings" not in response.text


def test_a_silo_sees_federations_submissions_budget_and_earnings(silo_user, federation_with_data):
    response = client_for(silo_user).get("/")

    assert menu_labels(response.text) == [
        "Home",
        "Federations",
        "Submissions",
        "Budget",
        "Earnings",
    ]
    assert 'id="home-silo"' in response.text and 'id="home-buyer"' not in response.text
    assert "Upload models to" in response.text
    assert "Audit log" not in response.text


def test_an_operator_lands_on_the_market_overview(operator, federation):
    response = client_for(operator).get("/")

    assert menu_labels(response.text) == [
        "Overview",
        "Federations",
        "Jobs",
        "Budgets",
        "Market",
        "Wallets",
        "Money",
        "People",
        "Audit log",
    ]
    assert "Market overview" in response.text and "Recent audit events" in response.text


def test_flash_messages_keep_their_list_semantics(silo_user, federation):
    response = client_for(silo_user).post(f"/federations/{federation.slug}/join/", follow=True)

    # role="status" on the <ul> itself would strip its list role and orphan the <li> (axe: listitem)
    assert '<ul class="messages">' in response.text
    assert 'role="status"' not in re.search(r'<ul class="messages"[^>]*>', response.text).group(0)


def test_an_operators_overview_lists_what_waits_for_them_with_links(operator, federation):
    from market.commerce.wallets import credit_request_create
    from market.federations.membership import federation_join
    from market.federations.models import MembershipPolicy

    federation.membership_policy = MembershipPolicy.REQUEST
    federation.save()
    for name in ("Contoso Clinic", "Northwind Lab"):
        silo = user_create(
            username=name.split()[0].lower(),
            password="silo-password",
            organisation=organisation_create(name=name),
        )
        federation_join(federation=federation, user=silo)
    shop = organisation_create(name="Fabrikam Insurance", is_silo=False, is_buyer=True)
    buyer = user_create(username="fabrikam", password="buyer-password", organisation=shop)
    credit_request_create(user=buyer, amount_cents=5000, note="PO 17")

    text = client_for(operator).get("/").text

    assert "Waiting for you" in text
    assert (
        f'<a href="/federations/{federation.slug}/?tab=members">2 join requests in {federation.name}</a>'
        in text
    )
    assert (
        '<a href="/market/wallets/">1 credit request</a> to approve once paid, or decline' in text
    )


def test_an_operators_overview_says_when_nothing_waits(operator, federation):
    text = client_for(operator).get("/").text
    assert "Nothing waits for you: no join request, credit request or failed job." in text
