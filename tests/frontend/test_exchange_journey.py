"""A silo follows a federated distillation exchange in a real Chromium: the list, then the rounds with their
participation and payload, including a round that missed its quorum."""

from datetime import timedelta

import pytest
from django.utils import timezone


@pytest.mark.browser
def test_a_silo_sees_an_exchanges_rounds_participation_and_a_missed_quorum(
    live_server, federation_with_data, operator, silo_user, page
):
    from market.exchanges.models import ExchangeRound
    from market.exchanges.services import (
        exchange_create,
        exchange_reap,
        logits_upload,
    )
    from workers.exchange_aggregation import exchange_round_aggregate

    exchange = exchange_create(
        federation=federation_with_data,
        name="FD on Adult",
        rounds=2,
        round_seconds=3600,
        min_silos=3,
        actor=operator,
    )
    first = exchange.exchange_rounds.get(number=1)
    logits_upload(
        exchange_round=first, user=silo_user, labels=[0, 1], logits=[[1.0, -1.0], [-1.0, 1.0]]
    )
    ExchangeRound.objects.filter(id=first.id).update(deadline=timezone.now() - timedelta(seconds=1))
    exchange_reap()
    exchange_round_aggregate(exchange_round_id=first.id)

    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.goto(f"{live_server.url}/sign-in/")
    page.get_by_label("Username").fill("sam-silo")
    page.get_by_label("Password").fill("silo-password")
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/exchanges/")
    page.get_by_role("link", name="FD on Adult").click()
    page.wait_for_url(f"{live_server.url}/exchanges/{exchange.id}/")
    first_row = page.locator("#round-1")
    assert "Missed its quorum" in first_row.inner_text()
    assert "Round 1 closed with 1 of the 3 silos its quorum needs" in first_row.inner_text()
    assert first_row.locator("td").nth(3).inner_text() == "1"  # participants
    assert first_row.locator("td").nth(4).inner_text() == "uploaded"  # this silo took part
    assert (
        first_row.locator("td").nth(5).inner_text() == "128"
    )  # 2 × 2 logits of 32 bits up, none down
    assert "Open for uploads" in page.locator("#round-2").inner_text()
    assert "onefold fd" in page.content()
    assert script_errors == []
