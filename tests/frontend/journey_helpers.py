"""What the role journeys share: signing in, and screenshots at desktop and phone width with no page that
scrolls sideways on the phone."""

from pathlib import Path

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def sign_in(page, url: str, username: str, password: str) -> None:
    page.goto(f"{url}/sign-in/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


def page_width_overflow(page) -> int:
    """How many CSS pixels the page is wider than the viewport (0: nothing scrolls sideways)."""
    return page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )


def screenshots(page, name: str) -> None:
    """``docs/screenshots/<name>-desktop.png`` (1280 px) and ``<name>-phone.png`` (390 px); at 390 px the page
    must not overflow."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / f"{name}-desktop.png", full_page=True)
    page.set_viewport_size(PHONE)
    try:
        overflow = page_width_overflow(page)
        assert overflow <= 0, f"{name}: the page is {overflow} px wider than a 390 px phone"
        page.screenshot(path=SCREENSHOTS / f"{name}-phone.png", full_page=True)
    finally:
        page.set_viewport_size(DESKTOP)
