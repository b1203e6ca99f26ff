"""One product across the web and the command line (issue 43 item 6): `onefold catalog` carries the web
catalog's warning badges and writes numbers as the pages do (percentages with one decimal, units in the
headers), against a live market, run as a user types the commands."""

import json

import numpy as np
import pytest

from market.commerce.services import listing_create, listing_publish
from tests.fixtures.commerce import BUYER_PASSWORD
from workers.metrics import classification_metrics

pytestmark = pytest.mark.django_db(transaction=True)

LABELS = np.repeat([0, 1], [380, 120])


def test_catalog_carries_the_webs_warning_badges_and_the_pages_number_style(
    run_cli,
    live_server,
    make_global_model,  # noqa: F811
    buyer_user,  # noqa: F811
    operator,
    client,
):
    predicted = np.zeros(500, dtype=int)
    predicted[180:] = 1  # every positive found, 200 negatives called positive: accuracy 60.0 %
    listing = listing_create(
        global_model=make_global_model(
            metrics=classification_metrics(np.eye(2)[predicted], LABELS, n_classes=2)
        ),
        name="Accurate on the few",
        description="",
        price_cents=1250,
        licence_text="Any lawful use.",
        actor=operator,
    )
    listing_publish(listing=listing, actor=operator, override_reason="A buyer wants its recall.")
    code, _, err = run_cli(
        "login",
        "--market",
        live_server.url,
        "--username",
        buyer_user.username,
        "--password",
        BUYER_PASSWORD,
    )
    assert code == 0, err

    code, out, err = run_cli("catalog")

    badge = "Accuracy 60.0 %: not above always guessing '<=50K' (76.0 %)"
    below = "Below the best single silo in balanced accuracy"
    assert code == 0, err
    assert out.splitlines() == [
        f"{'id':>5} {'price (credits)':>15} {'accuracy (%)':>12}  {'model':>5}  name",
        f"{listing.id:>5} {'12.50':>15} {'60.0':>12}  {listing.global_model_id:>5}  Accurate on the few",
        f"{'':>5} Warning: {badge}",
        f"{'':>5} Warning: {below}",
    ]
    # the same badge as the web catalog shows, from the same rule (market.jobs.quality.catalog_flags)
    client.force_login(buyer_user)
    assert "not above always guessing &#x27;&lt;=50K&#x27; (76.0 %)" in (
        client.get("/market/").content.decode()
    )
    code, out, _ = run_cli("catalog", "--json")
    assert json.loads(out)["listings"][0]["quality_flags"] == [badge, below]
