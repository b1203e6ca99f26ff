"""What the role journeys share: signing in, and screenshots at desktop and phone width with no page that
scrolls sideways on the phone."""

import re
from contextlib import suppress
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.conftest import scaled_milliseconds

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# How long a page may take to lay itself out again at a new width: charts (Chart.js) resize their canvas on a
# ResizeObserver callback, after the viewport has changed, so a desktop-wide canvas lingers for a frame or more.
RELAYOUT_WAIT_MS = 30_000
# axe-core 4.14.1, vendored beside this file (tests/frontend/vendor, MPL-2.0), evaluated through the DevTools
# protocol so that the pages' Content Security Policy stays as strict as it is for users.
AXE_SOURCE = (Path(__file__).resolve().parent / "vendor" / "axe-core-4.14.1.min.js").read_text()
BLOCKING_IMPACTS = ("serious", "critical")
WIDTHS = (1280, 390)
RUN_AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                      targets: v.nodes.slice(0, 3).map(n => n.target.join(" "))}));
}"""


def sign_in(page, url: str, username: str, password: str) -> None:
    """Sign in at ``url`` (the live server's) in a new session (the previous user's cookies are dropped), and return
    once the market has let the user in."""
    page.context.clear_cookies()
    page.goto(f"{url}/sign-in/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda address: "/sign-in/" not in address)


def page_problems(page, state: str) -> list[str]:
    """axe's serious and critical violations of the page as it is now, and horizontal overflow at phone width."""
    page.evaluate(AXE_SOURCE)
    problems = [
        f"{state}: {violation['impact']} {violation['id']} ({violation['help']}) at {violation['targets']}"
        for violation in page.evaluate(RUN_AXE)
        if violation["impact"] in BLOCKING_IMPACTS
    ]
    width = page.evaluate("document.documentElement.scrollWidth")
    if width > page.viewport_size["width"]:
        problems.append(f"{state}: the page is {width} px wide at {page.viewport_size['width']} px")
    return problems


def page_width_overflow(page) -> int:
    """How many CSS pixels the page is wider than the viewport (0: nothing scrolls sideways)."""
    return page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )


def screenshots(page, name: str, folder: Path = SCREENSHOTS) -> None:
    """``docs/screenshots/<name>-desktop.png`` (1280 px) and ``<name>-phone.png`` (390 px), or in ``folder`` (the
    ignored ``test-artifacts/`` for pages the docs do not show); at 390 px the page must not overflow."""
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=folder / f"{name}-desktop.png", full_page=True)
    page.set_viewport_size(PHONE)
    try:
        # A page that still overflows when the wait ends is measured and reported below.
        with suppress(PlaywrightTimeoutError):
            page.wait_for_function(
                "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth",
                timeout=scaled_milliseconds(RELAYOUT_WAIT_MS),
            )
        overflow = page_width_overflow(page)
        assert overflow <= 0, f"{name}: the page is {overflow} px wider than a 390 px phone"
        page.screenshot(path=folder / f"{name}-phone.png", full_page=True)
    finally:
        page.set_viewport_size(DESKTOP)


#: The reason a journey gives when the publish gate refuses the small test federation's model (it may not beat
#: the operator's own rows: market.jobs.quality), so that the journey goes on to the buyer as a market would.
JOURNEY_OVERRIDE_REASON = (
    "Published by the journey's operator: a pilot buyer asked for this version."
)


def publish_from_card(page) -> bool:
    """Click *Publish* on a draft listing's page; where the gate refuses (its sentence in ``#publish-refusal``),
    publish anyway with :data:`JOURNEY_OVERRIDE_REASON`. Whether the gate refused it."""
    page.get_by_role("button", name="Publish", exact=True).click()
    page.locator("#publish-refusal").or_(page.get_by_text("is now published.")).first.wait_for()
    if not page.locator("#publish-refusal").count():
        return False
    page.get_by_label("Override reason").fill(JOURNEY_OVERRIDE_REASON)
    page.get_by_role("button", name="Publish anyway").click()
    page.get_by_text("is now published.").first.wait_for()
    return True


def budget_row(page, organisation):
    return page.locator("tr", has=page.get_by_role("rowheader", name=organisation))


def exact(row, figure: str) -> str:
    """A budget figure to the ledger's precision (the page shows 3 significant figures, the cell keeps all)."""
    return row.locator(f"[data-budget-{figure}]").get_attribute("data-value")


def form_key(page: str, action: str) -> str:
    """The one-time key of the form whose opening tag holds ``action``."""
    form = re.search(rf"<form[^>]*{re.escape(action)}[^>]*>(.*?)</form>", page, re.S)
    assert form is not None, f"no form with {action!r}"
    return re.search(r'name="idempotency_key" value="([^"]+)"', form.group(1)).group(1)
