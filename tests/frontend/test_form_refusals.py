"""Every page form that can refuse, in Chromium: the refused form comes back with what was typed and the
refusal's sentence beside the field it is about (frontend/form_refusals.py), not an error page whose only link
is "Back to your start page"; the refused page passes axe at 1280 and 390 px. Nothing was written.

Where the browser's own checks (a number's step, a required box) would stop the form before it is sent, the case
turns them off: the market must refuse what a script or an older browser sends, and say so on the form."""

from dataclasses import dataclass, field

import pytest

from market.accounts.models import User
from market.commerce.models import CreditRequest, Listing, WalletEntry
from market.federations.models import Federation
from market.invitations.models import Invitation
from market.invitations.services import invitation_create
from market.webhooks.models import WebhookEndpoint
from tests.fixtures.commerce import BUYER_PASSWORD
from tests.frontend.journey_helpers import page_problems, sign_in

WIDTHS = (1280, 390)


@dataclass(frozen=True)
class Refusal:
    """One form: who signs in, where, what is typed (label → text; a tuple (kind, name, value) for a choice),
    the button, and the sentence and field the refusal is about; ``unchanged`` counts rows that must stay."""

    role: str
    path: str
    typed: dict
    button: str
    sentence: str
    field: str
    kept: dict = field(default_factory=dict)
    unchecked_by_browser: bool = False
    unchanged: tuple = ()


CASES = {
    "webhook address": Refusal(
        role="silo",
        path="/security/webhooks/",
        typed={"HTTPS URL": "https://10.0.0.1/hook", "Description": "Ward alerts"},
        button="Register endpoint",
        sentence="10.0.0.1 is a private address",
        field="url",
        kept={"url": "https://10.0.0.1/hook", "description": "Ward alerts"},
        unchanged=(WebhookEndpoint,),
    ),
    "catalog filter": Refusal(
        role="silo",
        path="/market/?search=adult&min_accuracy_percent=150",
        typed={},
        button="",
        sentence="The accuracy filter must be a percentage from 0 to 100, not '150'.",
        field="min_accuracy_percent",
        kept={"search": "adult", "min_accuracy_percent": "150"},
    ),
    "credit request": Refusal(
        role="buyer",
        path="/market/wallet/",
        typed={"Amount (credits)": "12.505", "Purchase order or note (optional)": "PO 7"},
        button="Request credits",
        sentence="The amount must be an amount of credits with at most two decimals, not '12.505'.",
        field="amount",
        kept={"amount": "12.505", "note": "PO 7"},
        unchecked_by_browser=True,
        unchanged=(CreditRequest,),
    ),
    "wallet top-up": Refusal(
        role="operator",
        path="/market/wallets/",
        typed={
            ("select", "organisation"): "Northwind Hospital",
            "Amount (credits)": "3.001",
            "Payment reference": "BANK-42",
        },
        button="Add credits",
        sentence="The amount must be an amount of credits with at most two decimals, not '3.001'.",
        field="amount",
        kept={"amount": "3.001", "reference": "BANK-42"},
        unchecked_by_browser=True,
        unchanged=(WalletEntry,),
    ),
    "invitation": Refusal(
        role="operator",
        path="/people/",
        typed={("radio", "kind"): "person", "For (e-mail, a note)": "ada@example.org"},
        button="Make invitation link",
        sentence="Choose the organisation the person joins.",
        field="organisation_id",
        kept={"email": "ada@example.org"},
        unchanged=(Invitation,),
    ),
    "federation": Refusal(
        role="operator",
        path="/federations/new/",
        typed={"Name": "Cardiology", "Class labels": "sick, sick"},
        button="Create federation",
        sentence="The class labels must be distinct.",
        field="class_labels",
        kept={"name": "Cardiology", "class_labels": "sick, sick"},
        unchanged=(Federation,),
    ),
    "listing": Refusal(
        role="operator",
        path="/market/models/{global_model_id}/list/",
        typed={"Price (credits)": "4.999"},
        button="Create draft listing",
        sentence="The price must be an amount of credits with at most two decimals, not '4.999'.",
        field="price",
        kept={"price": "4.999"},
        unchecked_by_browser=True,
        unchanged=(Listing,),
    ),
    "sign-up": Refusal(
        role="",
        path="/invitations/{token}/",
        typed={"Username": "ada", "Password": "short"},
        button="Create my account",
        sentence="This password is too short.",
        field="password",
        kept={"username": "ada", "password": ""},
        unchanged=(User,),
    ),
}


def _fill(page, typed: dict) -> None:
    form_area = page.locator("main")
    for label, text in typed.items():
        if isinstance(label, tuple):
            kind, name = label
            if kind == "select":
                form_area.locator(f"select[name={name}]").select_option(label=text)
            else:
                form_area.locator(f"input[name={name}][value={text}]").check()
        else:
            form_area.get_by_label(label, exact=True).fill(text)


def _address(case: Refusal, request) -> str:
    if "{global_model_id}" in case.path:
        model = request.getfixturevalue("make_global_model")()
        return case.path.format(global_model_id=model.id)
    if "{token}" in case.path:
        operator = request.getfixturevalue("operator")
        _, token = invitation_create(
            user=operator, kind="organisation", organisation_name="Lovelace Clinic", is_silo=True
        )
        return case.path.format(token=token)
    return case.path


def _sign_in_as(page, live_server, role: str, request) -> None:  # noqa: F811
    if role == "silo":
        sign_in(
            page, live_server.url, request.getfixturevalue("silo_user").username, "silo-password"
        )
    elif role == "buyer":
        sign_in(
            page, live_server.url, request.getfixturevalue("buyer_user").username, BUYER_PASSWORD
        )
    elif role == "operator":
        request.getfixturevalue("silo_user")  # an organisation to top up
        sign_in(
            page, live_server, request.getfixturevalue("operator").username, "operator-password"
        )


@pytest.mark.browser
@pytest.mark.parametrize("name", CASES)
def test_a_refused_form_comes_back_with_what_was_typed_and_the_sentence_beside_its_field(
    name,
    page,
    live_server,  # noqa: F811
    transactional_db,
    request,
):
    case = CASES[name]
    _sign_in_as(page, live_server, case.role, request)
    address = _address(case, request)
    counts = {model: model.objects.count() for model in case.unchanged}
    page.goto(f"{live_server.url}{address}")
    if case.button:
        if case.unchecked_by_browser:
            page.evaluate(
                "document.querySelectorAll('main form').forEach(f => f.noValidate = true)"
            )
        _fill(page, case.typed)
        page.get_by_role("button", name=case.button).click()
    refused = page.locator("form[data-refused]")
    refused.wait_for()

    beside = refused.locator(f".field:has([name={case.field}]) #form-error")
    assert case.sentence in beside.inner_text()
    assert refused.locator(f"[name={case.field}]").first.get_attribute("aria-invalid") == "true"
    for field_name, value in case.kept.items():
        assert refused.locator(f"[name={field_name}]").first.input_value() == value
    assert page.get_by_text("Back to your start page").count() == 0
    assert {model: model.objects.count() for model in case.unchanged} == counts
    problems = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        problems += page_problems(page, f"{name} refused @{width}px")
    assert problems == []
