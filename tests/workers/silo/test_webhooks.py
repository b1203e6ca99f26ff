"""The webhook signature (workers/silo/webhooks.py): signed as documented, checked against body, secret and time."""

import hashlib
import hmac

import pytest

from workers.silo.webhooks import (
    WebhookSignatureInvalid,
    webhook_signature_header,
    webhook_signature_verify,
)

BODY = b'{"id":"d1","type":"job.succeeded"}'


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body():
    expected = hmac.new(b"whsec_x", b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert webhook_signature_header("whsec_x", BODY, timestamp=1700000000) == (
        f"t=1700000000,v1={expected}"
    )


def test_a_fresh_delivery_verifies_and_returns_its_timestamp():
    header = webhook_signature_header("whsec_x", BODY, timestamp=1700000000)
    assert webhook_signature_verify("whsec_x", header, BODY, now=1700000100) == 1700000000


def test_any_of_several_v1_signatures_may_match_during_a_rotation():
    old = webhook_signature_header("whsec_old", BODY, timestamp=1700000000).split(",")[1]
    new = webhook_signature_header("whsec_new", BODY, timestamp=1700000000)
    assert webhook_signature_verify("whsec_old", f"{new},{old}", BODY, now=1700000000)


@pytest.mark.parametrize(
    ("secret", "body", "now", "words"),
    [
        ("whsec_other", BODY, 1700000000, "does not match"),
        ("whsec_x", BODY + b" ", 1700000000, "does not match"),
        ("whsec_x", BODY, 1700000301, "more than 300 s"),
        ("whsec_x", BODY, 1699999699, "more than 300 s"),
    ],
)
def test_a_changed_body_another_secret_or_a_stale_timestamp_is_refused(secret, body, now, words):
    header = webhook_signature_header("whsec_x", BODY, timestamp=1700000000)
    with pytest.raises(WebhookSignatureInvalid, match=words):
        webhook_signature_verify(secret, header, body, now=now)


@pytest.mark.parametrize("header", ["", "v1=abc", "t=soon,v1=abc", "t=1700000000"])
def test_a_malformed_header_is_refused_with_its_expected_shape(header):
    with pytest.raises(WebhookSignatureInvalid, match="t=<unix seconds>,v1=<hex>"):
        webhook_signature_verify("whsec_x", header, BODY, now=1700000000)
