"""The client's publish call: the gate's refusal arrives as a Conflict with the market's sentence, and an override
reason is sent in the body (against the scripted market of test_client.py)."""

import json

import pytest

from workers.silo.errors import Conflict

SENTENCE = "Global model #3 does not beat the majority-class guess …"


def test_a_refused_publish_raises_conflict_and_an_override_sends_its_reason(scripted):  # noqa: F811
    market, client = scripted((409, {"detail": SENTENCE}), (200, {"id": 4, "status": "published"}))

    with pytest.raises(Conflict) as refused:
        client.listing_publish(4)
    published = client.listing_publish(4, override_reason="A pilot buyer asked for it.")

    assert refused.value.message == SENTENCE
    assert (published.id, published.status) == (4, "published")
    assert [json.loads(request["body"]) for request in market.received] == [
        {},
        {"override_reason": "A pilot buyer asked for it."},
    ]
