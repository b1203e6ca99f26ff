"""The operator's whole workflow in the app, in a real Chromium against a live server, a real Celery worker and
PostgreSQL: create a federation, preview and upload its public data and evaluation split, launch a job from the
typed form, list its model in the market, top a buyer's wallet up and approve a credit request. Every step is
audited with the operator as actor."""

import json

import pytest

from market.audit.models import AuditEvent, AuditOutcome
from market.commerce.models import Listing, ListingStatus, Wallet
from market.commerce.wallets import credit_request_create
from market.federations.models import Federation
from market.jobs.models import Job, JobStatus
from tests.conftest import api_client_for, scaled_milliseconds
from tests.frontend.journey_helpers import DESKTOP, publish_from_card, screenshots, sign_in
from tests.market.jobs.helpers import FAST_JOB_SETTINGS, job_worker
from tests.market.submissions.helpers import submit


def silos_submit(federation, users, student_files) -> None:
    """The silos' part, as the toolkit does it over the API: join, upload two students each, validated."""
    from market.federations.membership import federation_join
    from market.submissions.validation import submission_validate

    for user, files in zip(users, student_files):
        federation_join(federation=federation, user=user)
        response = submit(
            api_client_for(user),
            files,
            model_family="logistic_regression",
            n_local_examples=666,
            privacy_level="L0",
        )
        assert response.status_code == 202, response.json()
        submission_validate(submission_id=response.json()["id"])


def upload(page, form_id: str, name: str, data: bytes, button: str) -> None:
    page.locator(f"#{form_id} input[type=file]").set_input_files(
        {"name": name, "mimeType": "text/csv", "buffer": data}
    )
    page.get_by_role("button", name=button).click()


@pytest.mark.browser
@pytest.mark.worker
def test_operator_creates_a_federation_launches_a_job_lists_its_model_and_tops_up_a_buyer(
    live_server,
    transactional_db,
    settings,
    media_root,
    tmp_path,
    operator,
    silo_user,
    other_silo_user,
    third_silo_user,
    buyer_user,
    fedkt_student_files,
    adult_public_csv,
    adult_evaluation_csv,
    page,
):  # noqa: F811
    for name, value in FAST_JOB_SETTINGS.items():
        setattr(settings, name, value)
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.set_viewport_size(DESKTOP)
    sign_in(page, live_server.url, operator.username, "operator-password")

    # A new federation, from the form (L0 ticked: the demo's members trust each other).
    page.get_by_role("link", name="Federations", exact=True).click()
    page.get_by_role("link", name="New federation").click()
    page.get_by_label("Name", exact=True).fill("Adult income")
    page.get_by_label("Label column").fill("income")
    page.get_by_label("Class labels").fill("<=50K, >50K")
    page.get_by_label("L0: no noise (members trust each other)").check()
    # Open: the silos below join by themselves (admission has its own journey, test_membership_pages).
    page.get_by_label("Open: any silo may join").check()
    screenshots(page, "operator-federation-new")
    page.get_by_role("button", name="Create federation").click()
    federation = Federation.objects.get()
    assert (federation.slug, federation.class_labels, federation.allowed_privacy_levels) == (
        "adult-income",
        ["<=50K", ">50K"],
        ["L0", "L1", "L2"],
    )
    assert federation.membership_policy == "open"

    # Public data: a preview of the inferred specification first (nothing stored), then the upload.
    upload(
        page,
        "public-form",
        "adult-public.csv",
        adult_public_csv,
        "Preview the feature specification",
    )
    page.get_by_text("Preview: the feature specification this file would give").wait_for()
    assert page.locator("#spec-table tbody tr").count() == 14
    assert not federation.public_datasets.exists()
    upload(page, "public-form", "adult-public.csv", adult_public_csv, "Upload public data")
    page.get_by_text("Public data uploaded: 2000 rows, 14 columns").wait_for()
    upload(
        page,
        "evaluation-form",
        "adult-evaluation.csv",
        b"age,income\n39,maybe\n",
        "Upload evaluation split",
    )
    assert (
        "do not include" in page.locator("#form-error").inner_text()
    )  # the service's sentence, on the form
    upload(
        page,
        "evaluation-form",
        "adult-evaluation.csv",
        adult_evaluation_csv,
        "Upload evaluation split",
    )
    page.get_by_text("Evaluation split uploaded: 500 labelled rows.").wait_for()
    screenshots(page, "operator-federation-data")

    silos_submit(federation, (silo_user, other_silo_user, third_silo_user), fedkt_student_files)

    # The job launcher's typed form: every edit lands in the JSON the form sends.
    page.get_by_role("link", name="Launch a job").click()
    page.wait_for_url("**/jobs/new/")
    page.get_by_label("Kind").select_option("fedkt")
    page.get_by_label("Privacy level").select_option("L0")
    page.locator("#param-query_fraction").fill("0.25")
    page.locator("#param-final_model-n_estimators").fill("10")
    page.locator("#param-final_model-max_depth").fill("4")
    page.locator("#param-final_model-max_depth").dispatch_event("change")
    sent = json.loads(page.get_by_label("Parameters (JSON; defaults filled in)").input_value())
    assert (
        sent["query_fraction"],
        sent["final_model"]["n_estimators"],
        sent["final_model"]["max_depth"],
    ) == (0.25, 10, 4)
    screenshots(page, "operator-job-launch")
    with job_worker(settings, media_root, tmp_path / "worker.log"):
        page.get_by_role("button", name="Launch job").click()
        page.locator("#job-status").filter(has_text="Succeeded").wait_for(
            timeout=scaled_milliseconds(180_000)
        )
    job = Job.objects.get()
    assert job.status == JobStatus.SUCCEEDED and job.parameters["final_model"]["n_estimators"] == 10

    # "List in market", prefilled from the job; then publish the draft from its card.
    page.get_by_role("link", name="List in market").click()
    # (the L0 default vote, auto, may choose the selected ensemble: its family is then "ensemble")
    assert (
        page.get_by_label("Name", exact=True).input_value()
        == f"Adult income: FedKT ({job.global_model.model_family})"
    )
    page.get_by_label("Price (credits)").fill("12.50")
    screenshots(page, "operator-listing-new")
    page.get_by_role("button", name="Create draft listing").click()
    publish_from_card(page)  # answering the gate with a reason where it refuses
    listing = Listing.objects.get()
    assert (listing.status, listing.price_cents, listing.global_model_id) == (
        ListingStatus.PUBLISHED,
        1250,
        job.global_model.id,
    )

    # Credits: a payment received (top-up by its reference) and a buyer's request approved.
    credit_request = credit_request_create(user=buyer_user, amount_cents=2500, note="PO-118")
    page.get_by_role("link", name="Wallets", exact=True).click()
    page.get_by_label("Organisation").select_option(label="Fabrikam Insurance")
    page.get_by_label("Amount (credits)").fill("40")
    page.get_by_label("Payment reference", exact=True).fill("INV-1001")
    page.get_by_role("button", name="Add credits").click()
    page.get_by_text("Fabrikam Insurance: 40.00 credits added.").wait_for()
    screenshots(page, "operator-wallets")
    page.get_by_label(f"Payment reference for #{credit_request.id}").fill("BANK-2026-118")
    page.get_by_role("button", name=f"Approve #{credit_request.id}").click()
    page.get_by_text(
        f"Credit request #{credit_request.id} of Fabrikam Insurance approved."
    ).wait_for()
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 6500
    assert page.get_by_text("payment BANK-2026-118").is_visible()

    # The money page: every wallet, searchable, and one organisation's ledger with the payment references.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Money").click()
    page.get_by_label("Organisation name").fill("fabrikam")
    page.get_by_role("button", name="Search").click()
    page.get_by_role("link", name="Fabrikam Insurance").click()
    assert page.locator("#ledger-balance").inner_text() == "65.00 credits"
    assert page.get_by_text("Payment BANK-2026-118. PO-118").is_visible()
    screenshots(page, "operator-money-ledger")

    done = set(
        AuditEvent.objects.filter(actor=operator, outcome=AuditOutcome.SUCCESS).values_list(
            "action", flat=True
        )
    )
    assert {
        "federation.created",
        "public_dataset.uploaded",
        "evaluation_split.uploaded",
        "job.created",
        "listing.created",
        "listing.published",
        "wallet.topped_up",
        "wallet.credit_request_approved",
    } <= done
    assert script_errors == []
