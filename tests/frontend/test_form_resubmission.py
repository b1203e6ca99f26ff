"""Every state-changing page form is safe to send twice (frontend.sent_once): the one-time key its page rendered
makes a second send — Back and the button again, a double click — answer with the first send's result and act
no second time: one job and one reservation, one purchase and one charge, one top-up, one token, one request,
one payout, one invitation (and one account from its link), one join request and one admission, one federation
edit; the upload page's files stored once."""

import json
import re
from pathlib import Path

import pytest

from frontend.models import FormSubmission
from market.accounts.models import ApiToken
from market.augmentations.models import Augmentation
from market.budgets.models import BudgetEntry, PrivacyBudget
from market.commerce.models import CreditRequest, Purchase, Wallet, WalletEntry
from market.jobs.models import Job
from tests.conftest import api_client_for
from tests.fixtures.jobs import L1_JOB
from tests.frontend.augmentation_helpers import FORM as AUGMENTATION_FORM
from tests.frontend.augmentation_helpers import open_augmentation, seeds_file
from tests.frontend.journey_helpers import form_key

TEMPLATES = Path(__file__).resolve().parents[2] / "frontend" / "templates"
#: Forms that change nothing: signing in and out, the price calculator, a download link, a trial prediction.
READ_ONLY_FORM_ACTIONS = ("'login'", "'logout'", "'budget-price'", "'commerce-download'")
READ_ONLY_FORM_ACTIONS += ("'model-download'", "'model-try'", "{{ api_url }}")
#: Forms whose link is itself used once: a second send of an invitation's acceptance finds it used (410).
SINGLE_USE_LINK_FORMS = ('id="accept-form"',)
#: The forms without an action post to their own page.
OWN_PAGE = {
    "operator/federation_new.html": "federation-create",
    "operator/federation_data.html": "federation-data",
    "operator/listing_new.html": "listing-create",
    "operator/wallets.html": "wallet-operations",
    "augmentations/new.html": "augmentation-create",
    "operator/federation_edit.html": "federation-edit",
    "operator/people.html": "invitation-list",
    "operator/ledger.html": "money-ledger",
}


def sent_twice(client, path: str, data: dict) -> tuple:
    first = client.post(path, data)
    return first, client.post(path, data)


def post_forms() -> list[tuple[str, str]]:
    """(template, form) for every POST form of the pages."""
    return [
        (str(template.relative_to(TEMPLATES / "frontend")), match.group(0))
        for template in TEMPLATES.rglob("*.html")
        for match in re.finditer(r'<form[^>]*method="post".*?</form>', template.read_text(), re.S)
    ]


def test_every_state_changing_form_carries_a_one_time_key():
    forms = post_forms()
    unguarded = [
        (template, form.split(">")[0])
        for template, form in forms
        if "{% form_key_field %}" not in form
        and not any(action in form.split(">")[0] for action in READ_ONLY_FORM_ACTIONS)
        and not any(mark in form.split(">")[0] for mark in SINGLE_USE_LINK_FORMS)
    ]
    assert len(forms) >= 29 and unguarded == []


def test_every_view_a_keyed_form_posts_to_claims_its_key():
    from frontend.urls import urlpatterns

    views = {pattern.name: pattern.callback for pattern in urlpatterns}

    targets = set()
    for template, form in post_forms():
        if "{% form_key_field %}" in form:
            named = re.search(r"action=\"{% (?:if [^%]*%}{% )?url '([^']+)'", form.split(">")[0])
            targets.add(named.group(1) if named else OWN_PAGE[template])
    assert (
        len(targets) == 33
    )  # 28 page forms (the listing's pricing plan, issue 44, the latest) and the five webhook actions
    assert (
        sorted(name for name in targets if not getattr(views[name], "claims_form_key", False)) == []
    )


def test_each_rendering_carries_a_new_key(client, operator, federation_with_data):
    client.force_login(operator)
    keys = {
        form_key(
            client.get("/federations/adult-income/augmentations/new/").content.decode(),
            'id="augmentation-form"',
        )
        for _ in range(3)
    }
    assert len(keys) == 3 and all(key.startswith("form-") for key in keys)


def test_launching_twice_with_the_same_key_queues_one_job_and_reserves_once(
    client, operator, fedkt_submissions
):
    client.force_login(operator)
    launcher = client.get("/federations/adult-income/jobs/new/").content.decode()
    form = {
        "kind": "fedkt",
        "privacy_level": "L1",
        "parameters": json.dumps(L1_JOB["parameters"]),
        "seed": "7",
        "submissions": [str(submission.id) for submission in fedkt_submissions],
        "idempotency_key": form_key(launcher, 'id="job-form"'),
    }
    first, resent = sent_twice(client, "/federations/adult-income/jobs/new/", form)

    job = Job.objects.get()
    assert first.status_code == resent.status_code == 302
    assert first["Location"] == resent["Location"] == f"/jobs/{job.id}/"
    reserved = sorted(
        PrivacyBudget.objects.filter(federation=job.federation).values_list("reserved", flat=True)
    )
    assert len(reserved) == 3 and reserved[0] > 0 and len(set(reserved)) == 1
    assert (
        BudgetEntry.objects.filter(kind="reserve", spender_kind="job", spender_id=job.id).count()
        == 3
    )
    assert BudgetEntry.objects.count() == 3
    shown = client.get(resent["Location"]).content.decode()
    assert "This form was already sent; here is its result. Nothing was done again." in shown


def test_a_launch_refused_for_its_input_frees_its_key_for_the_corrected_form(
    client, operator, fedkt_submissions
):
    client.force_login(operator)
    key = form_key(
        client.get("/federations/adult-income/jobs/new/").content.decode(), 'id="job-form"'
    )
    form = {"kind": "fedkt", "privacy_level": "L0", "seed": "", "idempotency_key": key}
    refused = client.post("/federations/adult-income/jobs/new/", {**form, "parameters": "[1,"})
    assert refused.status_code == 400 and not Job.objects.exists()
    assert not FormSubmission.objects.exists()
    corrected = client.post("/federations/adult-income/jobs/new/", {**form, "parameters": "{}"})
    assert corrected.status_code == 302 and Job.objects.count() == 1


def test_buying_twice_with_the_same_key_charges_once(client, buyer_user, published_listing, top_up):
    listing = published_listing(price_cents=1250)
    top_up(buyer_user.organisation, 5000)
    client.force_login(buyer_user)
    confirm = client.get(f"/market/listings/{listing.id}/buy/").content.decode()
    key = form_key(confirm, f"/market/listings/{listing.id}/purchase/")
    first, resent = sent_twice(
        client, f"/market/listings/{listing.id}/purchase/", {"idempotency_key": key}
    )
    assert first.status_code == resent.status_code == 302
    assert first["Location"] == resent["Location"]
    assert Purchase.objects.count() == 1
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 3750


def test_topping_up_twice_with_the_same_key_credits_once(client, operator, buyer_user):
    client.force_login(operator)
    key = form_key(client.get("/market/wallets/").content.decode(), 'id="top-up-form"')
    form = {
        "organisation": buyer_user.organisation.id,
        "amount": "20.00",
        "reference": "",  # no payment reference: only the form's key tells the second send apart
        "note": "paid by bank transfer",
        "idempotency_key": key,
    }
    first, resent = sent_twice(client, "/market/wallets/", form)
    # Both refused for the missing payment reference: a refusal frees the key for the corrected form.
    assert first.status_code == resent.status_code == 400
    assert not WalletEntry.objects.exists()
    first, resent = sent_twice(client, "/market/wallets/", {**form, "reference": "bank-77"})
    assert first.status_code == resent.status_code == 302
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 2000
    assert WalletEntry.objects.count() == 1


def test_requesting_and_approving_credits_twice_with_the_same_keys_acts_once(
    client, operator, buyer_user
):
    client.force_login(buyer_user)
    key = form_key(client.get("/market/wallet/").content.decode(), 'id="add-credits-form"')
    first, resent = sent_twice(
        client, "/market/wallet/add-credits/", {"amount": "30.00", "idempotency_key": key}
    )
    assert first.status_code == resent.status_code == 302
    credit_request = CreditRequest.objects.get()

    client.force_login(operator)
    approve = f"/market/credit-requests/{credit_request.id}/approve/"
    key = form_key(client.get("/market/wallets/").content.decode(), approve)
    first, resent = sent_twice(
        client, approve, {"idempotency_key": key, "payment_reference": "BANK-2026-0042"}
    )
    assert first.status_code == resent.status_code == 302
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 3000
    assert WalletEntry.objects.count() == 1
    assert CreditRequest.objects.get().payment_reference == "BANK-2026-0042"


def test_recording_a_payout_twice_with_the_same_key_pays_once(
    client, operator, silo_user, buyer_user, published_listing, top_up
):
    from market.commerce.purchases import purchase_create

    top_up(buyer_user.organisation, 5000)
    purchase_create(listing=published_listing(price_cents=2000), user=buyer_user)
    silo = silo_user.organisation
    earned = Wallet.objects.get(organisation=silo).balance_cents
    client.force_login(operator)
    ledger = f"/market/money/organisations/{silo.id}/"
    key = form_key(client.get(ledger).content.decode(), 'id="payout-form"')
    form = {"amount": "1.00", "reference": "TRANSFER-9", "note": "", "idempotency_key": key}
    first, resent = sent_twice(client, ledger, form)
    assert first.status_code == resent.status_code == 302
    assert WalletEntry.objects.filter(kind="payout").count() == 1
    assert Wallet.objects.get(organisation=silo).balance_cents == earned - 100


def test_creating_a_token_twice_with_the_same_key_creates_one(client, silo_user):
    client.force_login(silo_user)
    key = form_key(client.get("/security/tokens/").content.decode(), "/security/tokens/new/")
    first, resent = sent_twice(
        client, "/security/tokens/new/", {"name": "laptop", "idempotency_key": key}
    )
    assert first.status_code == 200 and resent.status_code == 409
    assert "This form was already sent; nothing was done again." in resent.content.decode()
    assert ApiToken.objects.filter(user=silo_user).count() == 1


def test_opening_uploading_and_starting_an_augmentation_twice_acts_once(
    client, operator, federation_with_data, silo_user
):
    client.force_login(operator)
    new = "/federations/adult-income/augmentations/new/"
    key = form_key(client.get(new).content.decode(), 'id="augmentation-form"')
    first, resent = sent_twice(client, new, {**AUGMENTATION_FORM, "idempotency_key": key})
    assert first.status_code == resent.status_code == 302
    assert first["Location"] == resent["Location"] and Augmentation.objects.count() == 1

    augmentation_id = open_augmentation(operator)
    client.force_login(silo_user)
    detail = client.get(f"/augmentations/{augmentation_id}/").content.decode()
    key = form_key(detail, 'id="seeds-form"')
    for _ in range(2):
        sent = client.post(
            f"/augmentations/{augmentation_id}/seeds/",
            {"seeds": seeds_file(), "idempotency_key": key},
        )
        assert sent.status_code == 302
    assert Augmentation.objects.get(id=augmentation_id).seeds.count() == 1

    client.force_login(operator)
    start = f"/augmentations/{augmentation_id}/start/"
    key = form_key(client.get(f"/augmentations/{augmentation_id}/").content.decode(), start)
    first, resent = sent_twice(client, start, {"idempotency_key": key})
    assert first.status_code == resent.status_code == 302
    assert (
        BudgetEntry.objects.filter(spender_kind="augmentation", spender_id=augmentation_id).count()
        == 1
    )


def test_a_key_still_being_processed_acts_not_and_each_address_of_a_page_acts_once(
    client, silo_user
):
    client.force_login(silo_user)
    FormSubmission.objects.create(user=silo_user, key="form-1", path="/security/tokens/new/")
    pending = client.post("/security/tokens/new/", {"name": "a", "idempotency_key": "form-1"})
    assert pending.status_code == 409
    assert "still being processed" in pending.content.decode()
    for hostile in ("k" * 65, "form-\x00", "form- 1", "ключ"):
        refused = client.post("/security/tokens/new/", {"name": "a", "idempotency_key": hostile})
        assert refused.status_code == 400
        assert "This form&#x27;s key is not one this market rendered" in refused.content.decode()
    assert not ApiToken.objects.exists()
    # The forms of one page share its key: another address acts, once.
    for _ in range(2):
        client.post("/market/wallet/add-credits/", {"amount": "1", "idempotency_key": "form-1"})
    assert CreditRequest.objects.count() == 1


def test_a_page_answering_a_form_carries_a_new_key(client, silo_user):
    client.force_login(silo_user)
    key = form_key(client.get("/security/tokens/").content.decode(), "/security/tokens/new/")
    first = client.post("/security/tokens/new/", {"name": "laptop", "idempotency_key": key})
    answered = first.content.decode()
    assert first.status_code == 200 and form_key(answered, "/security/tokens/new/") != key
    assert 'src="/static/frontend/form_key.js"' in answered
    second = client.post(
        "/security/tokens/new/",
        {"name": "phone", "idempotency_key": form_key(answered, "/security/tokens/new/")},
    )
    assert second.status_code == 200 and ApiToken.objects.filter(user=silo_user).count() == 2


@pytest.mark.browser
def test_back_and_launch_again_in_a_browser_queues_one_l1_job_and_reserves_once(
    live_server,  # noqa: F811
    transactional_db,
    fedkt_submissions,
    operator,
    page,
):
    federation = fedkt_submissions[0].federation
    page.goto(f"{live_server.url}/sign-in/")
    page.get_by_label("Username").fill("olivia-operator")
    page.get_by_label("Password").fill("operator-password")
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/federations/{federation.slug}/jobs/new/")
    page.get_by_label("Kind").select_option("fedkt")
    page.get_by_label("Privacy level").select_option("L1")
    page.get_by_role("button", name="Launch job").click()
    page.get_by_text("queued").first.wait_for()
    job = Job.objects.get()
    reserved = dict(
        PrivacyBudget.objects.filter(federation=federation).values_list("organisation", "reserved")
    )

    page.go_back()  # the launcher again: fetched anew or as the browser kept it, with the same key
    page.get_by_role("button", name="Launch job").click()
    page.wait_for_url(lambda url: not url.endswith("/jobs/new/"))

    assert page.url == f"{live_server.url}/jobs/{job.id}/"
    assert page.get_by_text("This form was already sent; here is its result.").is_visible()
    assert list(Job.objects.values_list("id", flat=True)) == [job.id]
    assert (
        dict(
            PrivacyBudget.objects.filter(federation=federation).values_list(
                "organisation", "reserved"
            )
        )
        == reserved
    )
    assert len(reserved) == 3 and all(value > 0 for value in reserved.values())
    assert BudgetEntry.objects.filter(kind="reserve").count() == 3


def test_making_an_invitation_twice_with_the_same_key_makes_one_link(client, operator):
    from market.invitations.models import Invitation

    client.force_login(operator)
    key = form_key(client.get("/people/").content.decode(), 'id="invitation-form"')
    form = {
        "kind": "organisation",
        "organisation_name": "Harbour Clinic",
        "is_silo": "on",
        "idempotency_key": key,
    }
    first, resent = sent_twice(client, "/people/", form)
    assert first.status_code == 200 and "Invitation link" in first.content.decode()
    assert resent.status_code == 409
    assert "This form was already sent; nothing was done again." in resent.content.decode()
    assert Invitation.objects.count() == 1


def test_accepting_an_invitation_twice_makes_one_account(client, operator):
    from market.accounts.models import User
    from market.invitations.services import invitation_create

    _, token = invitation_create(
        user=operator, kind="organisation", organisation_name="Harbour Clinic", is_silo=True
    )
    form = {"username": "ada", "password": "harbour-clinic-2026"}
    first, resent = sent_twice(client, f"/invitations/{token}/", form)
    assert first.status_code == 302 and resent.status_code == 410
    assert User.objects.filter(organisation__name="Harbour Clinic").count() == 1


def test_asking_to_join_and_admitting_twice_with_the_same_keys_acts_once(
    client, operator, federation_with_data, other_silo_user
):
    from market.audit.models import AuditEvent
    from market.federations.models import JoinRequest, Membership

    federation_with_data.membership_policy = "request"
    federation_with_data.save(update_fields=["membership_policy"])
    client.force_login(other_silo_user)
    join = "/federations/adult-income/join/"
    key = form_key(client.get("/federations/adult-income/").content.decode(), join)
    first, resent = sent_twice(client, join, {"idempotency_key": key})
    assert first.status_code == resent.status_code == 302
    assert JoinRequest.objects.count() == 1

    client.force_login(operator)
    admit = f"/join-requests/{JoinRequest.objects.get().id}/admit/"
    key = form_key(client.get("/federations/adult-income/?tab=members").content.decode(), admit)
    first, resent = sent_twice(client, admit, {"idempotency_key": key})
    assert first.status_code == resent.status_code == 302
    assert first["Location"] == resent["Location"]
    assert Membership.objects.filter(organisation=other_silo_user.organisation).count() == 1
    assert AuditEvent.objects.filter(action="membership.admitted").count() == 1


def test_editing_a_federation_twice_with_the_same_key_saves_and_audits_once(
    client, operator, federation
):
    from market.audit.models import AuditEvent

    client.force_login(operator)
    edit = "/federations/adult-income/edit/"
    key = form_key(client.get(edit).content.decode(), 'id="federation-edit-form"')
    form = {
        "name": "Adult income",
        "description": "Households above 50K.",
        "membership_policy": "request",
        "revenue_split": "equal",
        "idempotency_key": key,
    }
    first, resent = sent_twice(client, edit, form)
    assert first.status_code == resent.status_code == 302
    assert AuditEvent.objects.filter(action="federation.updated").count() == 1
    federation.refresh_from_db()
    assert (federation.revenue_split, federation.membership_policy) == ("equal", "request")


def test_the_upload_pages_form_sent_again_stores_one_submission(
    silo_user, federation_with_data, model_files
):
    """The upload page posts to the API with its Idempotency-Key (upload.js): the same key answers the first
    submission; a reload's new key with the same files is refused as a duplicate. One submission either way."""
    from market.submissions.models import Submission
    from tests.market.submissions.helpers import submit

    page_client = api_client_for(silo_user)
    files = {"forest.onnx": model_files["forest.onnx"]}
    first = submit(page_client, files, idempotency_key="page-1")
    replayed = submit(page_client, files, idempotency_key="page-1")
    reloaded = submit(page_client, files, idempotency_key="page-2")
    assert (first.status_code, replayed.status_code, reloaded.status_code) == (202, 200, 409)
    assert replayed.json()["id"] == first.json()["id"]
    assert Submission.objects.count() == 1
