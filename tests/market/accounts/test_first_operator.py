"""The first-run path of a real market: `manage.py onefold_first_operator`, run as the README shows it."""

import re
import shlex
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from market.accounts.models import User
from market.audit.models import AuditEvent

pytestmark = pytest.mark.django_db

README = Path(__file__).resolve().parents[3] / "README.md"


def readme_command() -> list[str]:
    (line,) = re.findall(
        r"^ONEFOLD_OPERATOR_PASSWORD=.*onefold_first_operator.*$", README.read_text(), re.M
    )
    return shlex.split(line)


def test_the_readmes_first_run_command_creates_the_first_operator_and_says_what_next(
    monkeypatch, capsys
):
    assignment, python, *arguments = readme_command()
    name, value = assignment.split("=", 1)
    monkeypatch.setenv(name, value)
    assert python == "python" and arguments[0] == "manage.py"

    call_command(*arguments[1:])  # manage.py's arguments, in this process's test database

    operator = User.objects.get(username="operator")
    assert operator.is_operator and operator.check_password("a long passphrase of yours")
    assert (
        operator.organisation.name,
        operator.organisation.is_silo,
        operator.organisation.is_buyer,
    ) == (
        "Market operator",
        False,
        False,
    )
    assert AuditEvent.objects.filter(action="operator.first_created", actor=operator).count() == 1
    out = capsys.readouterr().out
    assert "Created the operator operator (Market operator)." in out
    assert "Federations → New federation" in out


def test_a_second_first_operator_is_refused_and_nothing_is_written(monkeypatch, operator):
    monkeypatch.setenv("ONEFOLD_OPERATOR_PASSWORD", "another long passphrase")
    users = User.objects.count()
    with pytest.raises(
        CommandError, match=r"already has an operator \(.+\); sign in as an operator"
    ):
        call_command("onefold_first_operator", "--username", "second")
    assert User.objects.count() == users


def test_a_weak_password_is_refused_with_the_validators_sentence(monkeypatch):
    monkeypatch.setenv("ONEFOLD_OPERATOR_PASSWORD", "short")
    with pytest.raises(CommandError, match="Choose another password: "):
        call_command("onefold_first_operator", "--username", "operator")
    assert not User.objects.exists()


def test_the_sign_in_page_shows_the_command_until_an_operator_exists(client, django_user_model):
    assert "onefold_first_operator --username operator" in client.get("/sign-in/").content.decode()
    django_user_model.objects.create_user(username="boss", password="x" * 12, is_staff=True)
    assert "onefold_first_operator" not in client.get("/sign-in/").content.decode()
