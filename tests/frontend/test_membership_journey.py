"""Bringing a silo in from the browser alone, in Chromium against a live server: the operator invites a new silo
organisation on the People page, the invited person opens the link, chooses a username and password and is signed
in; the silo asks to join a federation by request and the operator admits it on the Members tab. Screenshots at
1280 px and 390 px (no page wider than the phone) go to docs/screenshots/."""

import re

import pytest

from market.federations.models import Membership
from tests.frontend.journey_helpers import DESKTOP, screenshots, sign_in


@pytest.mark.browser
def test_an_invited_silo_signs_up_asks_to_join_and_is_admitted(
    live_server,  # noqa: F811
    transactional_db,
    operator,
    federation_with_data,
    page,
    browser,
):
    from market.federations.models import Federation

    Federation.objects.update(membership_policy="request")
    page.set_viewport_size(DESKTOP)
    sign_in(page, live_server.url, operator.username, "operator-password")

    page.get_by_role("link", name="People").first.click()
    page.get_by_label("New organisation's name").fill("Harbour Clinic")
    page.get_by_label("Silo (trains and uploads)").check()
    page.get_by_role("button", name="Make invitation link").click()
    link = page.get_by_label("Invitation link").input_value()
    assert re.fullmatch(rf"{re.escape(live_server.url)}/invitations/[\w-]{{40,}}/", link)
    screenshots(page, "operator-people")

    invited = browser.new_context(viewport=DESKTOP).new_page()
    invited.goto(link)
    invited.get_by_label("Username").fill("ada")
    invited.get_by_label("Password").fill("harbour-clinic-2026")
    screenshots(invited, "invitation-accept")
    invited.get_by_role("button", name="Create my account").click()
    invited.get_by_text("Welcome, ada: you are signed in to Harbour Clinic.").wait_for()

    invited.goto(f"{live_server.url}/federations/adult-income/")
    invited.get_by_role("button", name="Ask to join Adult income").click()
    invited.get_by_text("Your request to join waits for the market's operator.").wait_for()

    page.goto(f"{live_server.url}/federations/adult-income/?tab=members")
    screenshots(page, "operator-members")
    page.get_by_role("button", name="Admit Harbour Clinic").click()
    page.get_by_text("Harbour Clinic is now a member of Adult income.").wait_for()
    assert Membership.objects.filter(organisation__name="Harbour Clinic").exists()

    invited.reload()
    invited.get_by_role("link", name="Upload models").wait_for()
    invited.context.close()
