"""Who needs to act is told (issue 43 item 7): a silo gets a notice and a ``sale.credited`` webhook event when a
sale credits its share, and the operators get notices for what waits for them (join requests, credit requests,
failed jobs), each mailed on commit; nobody else sees them."""

import pytest
from django.core import mail

from market.notifications.models import Notification, NotificationKind
from market.notifications.selectors import notifications_of, unread_count
from market.webhooks.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db


def subscribe(organisation, event_type: str) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(
        organisation=organisation,
        url=f"https://hooks.example/{organisation.id}",
        events=[event_type],
        secret="s" * 40,
    )


def test_a_sale_tells_each_credited_silo_its_positive_share_by_notice_and_webhook_and_nobody_else(
    published_listing,  # noqa: F811
    buyer_user,  # noqa: F811
    top_up,  # noqa: F811
    silo_user,
    other_silo_user,
    operator,
    django_capture_on_commit_callbacks,
):
    from market.commerce.models import WalletEntry
    from market.commerce.purchases import purchase_create

    silo_user.email = "sam@northwind.example"
    silo_user.save(update_fields=["email"])
    listing = published_listing(
        price_cents=10_000
    )  # shares 0.7 and 0.3 of what the market fee leaves
    top_up(buyer_user.organisation, 10_000)
    endpoints = {
        name: subscribe(user.organisation, "sale.credited")
        for name, user in [("sam", silo_user), ("bea", other_silo_user), ("buyer", buyer_user)]
    }
    with django_capture_on_commit_callbacks(execute=True):
        purchase = purchase_create(listing=listing, user=buyer_user).purchase

    shares = dict(
        WalletEntry.objects.filter(purchase=purchase, kind="revenue_credit").values_list(
            "wallet__organisation_id", "amount_cents"
        )
    )
    sam_share = shares[silo_user.organisation_id]
    assert sam_share > 0 and shares[other_silo_user.organisation_id] > 0
    notice = Notification.objects.get(organisation=silo_user.organisation)
    assert notice.kind == NotificationKind.SALE_CREDITED
    assert notice.subject == (
        f"A sale of '{listing.name}' credited you {sam_share // 100}.{sam_share % 100:02d} credits"
    )
    assert notice.message == (
        f"'{listing.name}' (global model #{listing.global_model_id}) was sold for 100.00 credits; your share "
        f"of {sam_share // 100}.{sam_share % 100:02d} credits is in your earnings."
    )
    assert "−" not in notice.subject + notice.message
    assert notice.link == "/market/earnings/"
    assert [message.to for message in mail.outbox] == [["sam@northwind.example"]]
    assert not Notification.objects.filter(organisation=buyer_user.organisation).exists()
    deliveries = {
        delivery.endpoint_id: delivery.payload
        for delivery in WebhookDelivery.objects.filter(event_type="sale.credited")
    }
    assert deliveries == {
        endpoints[name].id: {
            "sale": {
                "purchase": purchase.id,
                "listing": listing.id,
                "global_model": listing.global_model_id,
                "organisation": user.organisation_id,
                "amount_cents": shares[user.organisation_id],
            }
        }
        for name, user in [("sam", silo_user), ("bea", other_silo_user)]
    }  # the buyer's endpoint receives nothing; each silo only its own share


def test_a_join_request_and_a_credit_request_notify_the_operators_only(
    federation,
    operator,
    silo_user,
    other_silo_user,
    buyer_user,  # noqa: F811
    django_capture_on_commit_callbacks,
    client,
):
    from market.commerce.wallets import credit_request_create
    from market.federations.membership import federation_join

    operator.email = "olivia@market.example"
    operator.save(update_fields=["email"])
    federation.membership_policy = "request"
    federation.save(update_fields=["membership_policy"])
    with django_capture_on_commit_callbacks(execute=True):
        federation_join(federation=federation, user=other_silo_user)
        credit_request_create(user=buyer_user, amount_cents=2_500)

    assert [
        (notice.kind, notice.subject, notice.link)
        for notice in notifications_of(user=operator).order_by("id")
    ] == [
        (
            "join_request",
            "Contoso Bank asks to join Adult income",
            f"/federations/{federation.slug}/?tab=members",
        ),
        (
            "credit_request",
            f"{buyer_user.organisation.name} asks for 25.00 credits",
            "/market/wallets/",
        ),
    ]
    assert unread_count(user=operator) == 2
    client.force_login(operator)
    overview = client.get("/").content.decode()
    assert 'id="operator-notices"' in overview  # the overview leads to them
    assert 'id="unread-notices">2<' in overview  # and the menu shows Notices while some are unread
    assert [message.to for message in mail.outbox] == [["olivia@market.example"]] * 2
    # the operators' notices are no organisation's
    for user in (silo_user, other_silo_user, buyer_user):
        assert list(notifications_of(user=user)) == []


def test_a_failed_job_notifies_the_operators(make_job, operator):  # noqa: F811
    from market.jobs.models import JobStatus

    job = make_job()
    job.status, job.failure_reason = JobStatus.FAILED, "The teachers' votes were all empty."
    job.save(update_fields=["status", "failure_reason"])

    notice = notifications_of(user=operator).get()
    assert (notice.kind, notice.subject, notice.link) == (
        "job_failed",
        f"Job #{job.id} ({job.kind}) failed in {job.federation.name}",
        f"/jobs/{job.id}/",
    )
    assert notice.message.endswith("failed: The teachers' votes were all empty.")
