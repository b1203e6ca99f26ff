"""The Content Security Policy in a real Chromium: no page of the market triggers a single violation."""

import pytest

from tests.conftest import scaled_milliseconds

OPERATOR_PAGES = [
    "/federations/",
    "/federations/adult-income/",
    "/submissions/",
    "/security/tokens/",
    "/security/audit/",
    "/market/",
    "/budgets/",
    "/federations/adult-income/budgets/",
    "/jobs/",
    "/federations/adult-income/jobs/new/",
]
SILO_PAGES = [
    "/federations/adult-income/",
    "/federations/adult-income/upload/",
    "/submissions/",
    "/market/",
    "/market/wallet/",
    "/market/earnings/",
    "/security/tokens/",
]
# Collects violations as the browser reports them (the init script itself is not subject to the page's policy).
REPORT_VIOLATIONS = """document.addEventListener("securitypolicyviolation",
    event => (window.cspViolations = window.cspViolations || []).push(
        `${event.violatedDirective} ${event.blockedURI} ${event.sourceFile}:${event.lineNumber}`));"""


def violations_on(page, base_url: str, username: str, password: str, paths: list[str]) -> list[str]:
    messages = []
    page.on(
        "console",
        lambda message: (
            messages.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    page.add_init_script(REPORT_VIOLATIONS)
    page.goto(f"{base_url}/sign-in/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base_url}/")  # signing in lands on the role's home page
    found = []
    for path in paths:
        response = page.goto(f"{base_url}{path}")
        assert response.status == 200, f"{path} answered {response.status}"
        page.wait_for_timeout(scaled_milliseconds(300))  # let deferred scripts and htmx run
        found += [
            f"{path}: {violation}" for violation in page.evaluate("window.cspViolations || []")
        ]
    return found + messages


@pytest.mark.browser
def test_operator_pages_run_without_policy_violations(live_server, federation_with_data, page):
    assert (
        violations_on(page, live_server.url, "olivia-operator", "operator-password", OPERATOR_PAGES)
        == []
    )


@pytest.mark.browser
def test_silo_pages_run_without_policy_violations(live_server, federation_with_data, page):
    assert violations_on(page, live_server.url, "sam-silo", "silo-password", SILO_PAGES) == []


@pytest.mark.browser
def test_an_injected_inline_script_is_blocked_and_reported(live_server, federation_with_data, page):
    violations_on(page, live_server.url, "sam-silo", "silo-password", ["/federations/"])
    page.evaluate("""() => { const script = document.createElement("script");
                             script.textContent = "window.injected = true"; document.body.append(script); }""")
    page.wait_for_timeout(scaled_milliseconds(200))
    assert page.evaluate("window.injected === undefined")
    assert any(
        violation.startswith("script-src-elem inline")
        for violation in page.evaluate("window.cspViolations")
    )
