"""A silo is told when a job charges its privacy budget, and when a charge takes the budget past 80 % and 100 %
of its limit: a notice on its pages (with the unread count in the navigation) and an e-mail to its members,
sent once the charge commits."""

from dataclasses import replace
from decimal import Decimal

from django.core import mail

from market.budgets.ledger import epsilon_decimal
from market.budgets.models import PrivacyBudget
from market.jobs.spending import job_budget_charge, job_budget_reserve
from market.notifications.models import Notification
from tests.fixtures.budgets import ONE_JOB, limit_all
from workers.privacy.reports import JobPrivacyReport


def charge(job, operator):
    job_budget_reserve(job=job, actor=operator)
    report = JobPrivacyReport(level="L1", data_independent=replace(ONE_JOB.report))
    job_budget_charge(job=job, privacy_report=report)


def test_a_charge_notifies_each_charged_silo_and_mails_its_members_on_commit(
    make_job,
    operator,
    silo_user,
    other_silo_user,
    federation_with_data,
    django_capture_on_commit_callbacks,
):
    silo_user.email = "sam@northwind.example"
    silo_user.save(update_fields=["email"])
    epsilon = epsilon_decimal(ONE_JOB.report.epsilon)
    limit_all(federation_with_data, epsilon * 100, operator)  # 1 % of the limit: no threshold
    job = make_job()
    with django_capture_on_commit_callbacks(execute=True):
        charge(job, operator)

    notices = Notification.objects.filter(organisation=silo_user.organisation)
    assert [notice.kind for notice in notices] == ["budget_charged"]
    notice = notices.get()
    assert (
        notice.subject
        == f"Job #{job.id} charged your privacy budget in {federation_with_data.name}"
    )
    assert f"charged ε = {float(ONE_JOB.report.epsilon):.3g}" in notice.message
    assert "δ = 0.00001" in notice.message
    assert "(party-level)" in notice.message
    assert notice.link == f"/federations/{federation_with_data.slug}/budgets/"
    assert Notification.objects.filter(organisation=other_silo_user.organisation).count() == 1
    # Only the member with an address gets mail; the other silo's member has none.
    assert [(message.to, message.subject) for message in mail.outbox] == [
        (["sam@northwind.example"], f"[Onefold] {notice.subject}")
    ]
    assert notice.link in mail.outbox[0].body


def test_passing_80_and_100_percent_is_told_once_each(
    make_job, operator, silo_user, federation_with_data
):
    epsilon = epsilon_decimal(ONE_JOB.report.epsilon)
    limit_all(federation_with_data, epsilon, operator)
    charge(make_job(), operator)  # 100 %: passes 80 % and 100 % at once
    limit_all(federation_with_data, epsilon * 10, operator)
    charge(make_job(), operator)  # under 80 % of the raised limit: the charge alone
    name = federation_with_data.name
    assert list(
        Notification.objects.filter(organisation=silo_user.organisation)
        .order_by("id")
        .values_list("kind", flat=True)
    ) == ["budget_charged", "budget_threshold", "budget_threshold", "budget_charged"]
    assert list(
        Notification.objects.filter(kind="budget_threshold", organisation=silo_user.organisation)
        .order_by("id")
        .values_list("subject", flat=True)
    ) == [f"Your privacy budget in {name} passed 80%", f"Your privacy budget in {name} passed 100%"]
    assert all(
        "spent (party-level)" in message
        for message in Notification.objects.filter(kind="budget_threshold").values_list(
            "message", flat=True
        )
    )
    budget = PrivacyBudget.objects.get(
        organisation=silo_user.organisation, federation=federation_with_data
    )
    assert epsilon < budget.spent < Decimal("0.8") * budget.epsilon_limit


def test_the_notices_page_lists_them_and_the_navigation_counts_the_unread(
    client, make_job, operator, silo_user, federation_with_data
):
    limit_all(federation_with_data, Decimal(100), operator)
    charge(make_job(), operator)
    client.force_login(silo_user)
    home = client.get("/").content.decode()
    assert 'id="unread-notices">1<' in home
    page = client.get("/notices/").content.decode()
    assert "charged your privacy budget" in page and ">New</strong>" in page
    assert (
        not Notification.objects.filter(read_at__isnull=True)
        .filter(organisation=silo_user.organisation)
        .exists()
    )
    assert 'id="unread-notices"' not in client.get("/").content.decode()


def test_a_composed_charge_past_no_new_threshold_tells_no_second_threshold(
    composed_charges, silo_user
):
    assert list(
        Notification.objects.filter(organisation=silo_user.organisation)
        .order_by("id")
        .values_list("kind", flat=True)
    ) == ["budget_charged", "budget_threshold", "budget_charged"]
