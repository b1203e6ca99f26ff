"""A database too busy to answer is a 503 with Retry-After wherever Django answers for an exception."""

import json

from django.db import OperationalError
from django.test import RequestFactory

from market.errors import server_error

BUSY = "The market's database is busy with other requests; try again in a few seconds."


def server_error_for(path: str, error: Exception):
    request = RequestFactory().post(path)
    try:
        raise error
    except OperationalError:  # Django calls its 500 view while handling the exception
        return server_error(request)


def test_the_error_view_answers_a_locked_database_with_503_and_retry_after():
    api = server_error_for("/api/auth/token/", OperationalError("database is locked"))
    page = server_error_for("/sign-in/", OperationalError("database is locked"))
    assert (api.status_code, api["Retry-After"], json.loads(api.content)) == (
        503,
        "2",
        {"detail": BUSY},
    )
    assert (page.status_code, page["Retry-After"], page.content.decode()) == (503, "2", BUSY)


def test_any_other_database_failure_is_still_a_500():
    response = server_error_for("/api/auth/token/", OperationalError("disk I/O error"))
    assert response.status_code == 500
    assert "Retry-After" not in response
