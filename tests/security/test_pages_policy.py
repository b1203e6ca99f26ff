"""Pages carry a Content Security Policy that forbids inline script, and no template needs one."""

import re
from pathlib import Path

from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((ROOT / "frontend" / "templates").rglob("*.html"))


def test_pages_send_a_policy_without_inline_script(silo_user):
    browser = Client()
    browser.force_login(silo_user)
    response = browser.get("/federations/")
    policy = dict(
        part.strip().split(" ", 1)
        for part in response["Content-Security-Policy"].split(";")
        if part.strip()
    )
    assert policy["script-src"] == "'self'"
    assert policy["default-src"] == "'self'"
    assert policy["object-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in response["Content-Security-Policy"]
    assert "unsafe-eval" not in response["Content-Security-Policy"]


def test_the_sign_in_page_also_carries_the_policy(db):
    assert "script-src 'self'" in Client().get("/sign-in/")["Content-Security-Policy"]


def inline_script_and_handlers(text: str) -> list[str]:
    """The inline ``<script>`` tags and event-handler attributes of a template's text."""
    inline_scripts = [
        tag
        for tag in re.findall(r"<script\b[^>]*>", text, re.IGNORECASE)
        if "src=" not in tag and 'type="application/json"' not in tag
    ]
    return inline_scripts + re.findall(r"\s(on[a-z]+|hx-on[:\w-]*)\s*=", text, re.IGNORECASE)


def post_forms_without_token(text: str) -> list[str]:
    """The opening of every POST form of a template's text that carries no CSRF token."""
    return [
        form[:200]
        for form in re.findall(r"<form\b[^>]*>.*?</form>", text, re.IGNORECASE | re.DOTALL)
        if re.search(r'method="post"', form, re.IGNORECASE) and "{% csrf_token %}" not in form
    ]


def offenders(rule) -> dict[str, list[str]]:
    """Every template that breaks ``rule`` (a function of its text), with what breaks it."""
    found = {str(path.relative_to(ROOT)): rule(path.read_text()) for path in TEMPLATES}
    return {path: findings for path, findings in found.items() if findings}


def test_no_template_has_inline_script_or_event_handler_attributes():
    assert len(TEMPLATES) > 50
    assert offenders(inline_script_and_handlers) == {}


def test_every_post_form_carries_a_csrf_token():
    assert offenders(post_forms_without_token) == {}


def test_the_template_rules_find_what_they_forbid():
    assert inline_script_and_handlers('<script>alert(1)</script><a onclick="x()">') == [
        "<script>",
        "onclick",
    ]
    assert post_forms_without_token('<form method="post"><input></form>') == [
        '<form method="post"><input></form>'
    ]
    assert post_forms_without_token('<form method="post">{% csrf_token %}</form>') == []


def test_uploaded_artifacts_are_not_served_from_any_url(settings, silo_user, media_root):
    media_root.mkdir(parents=True, exist_ok=True)
    (media_root / "secret.npz").write_bytes(b"private")
    assert not str(settings.MEDIA_ROOT).startswith(str(settings.STATIC_ROOT))
    browser = Client()
    browser.force_login(silo_user)
    for path in ("/media/secret.npz", "/static/secret.npz", "/secret.npz"):
        assert browser.get(path).status_code == 404
