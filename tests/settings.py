"""The market's settings for the test suite: a fast password hasher, and a broker of each test process's own.

PBKDF2's 1,000,000 iterations cost about 0.23 s for every user created and every password checked, minutes
over the suite. PBKDF2 stays listed, so that a password hashed by a process started with market.settings still
verifies. Worker and server processes that tests start inherit DJANGO_SETTINGS_MODULE and use this module too.

``make test`` runs the suite in several test processes (pytest-xdist's gw0, gw1, ...). pytest-django gives each
its own test database; here each gets its own broker, so that a test purging the queue, or a worker it starts,
never sees another process's tasks: a Redis database counting down from the URL's (gw0 keeps the URL's, gw1
takes the one below). The processes a test starts inherit PYTEST_XDIST_WORKER and ONEFOLD_TEST_BROKER_BASE_URL,
and so arrive at the same broker. (Tests of the filesystem broker give each worker a var folder of its own.)
"""

import os
from urllib.parse import urlsplit, urlunsplit

from market.settings import *  # noqa: F403
from market.settings import CELERY_BROKER_URL

PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]


def broker_of_test_process(base_url: str, test_process: str) -> str:
    """The Redis URL of test process ``gwN``: the base URL's database number minus N."""
    parts = urlsplit(base_url)
    number = int(parts.path.strip("/") or 0) - int(test_process.removeprefix("gw"))
    if number < 0:
        raise ValueError(
            f"CELERY_BROKER_URL={base_url} leaves no Redis database for test process {test_process}: "
            "give a higher database number (make test uses 15) or fewer test processes"
        )
    return urlunsplit(parts._replace(path=f"/{number}"))


_test_process = os.environ.get("PYTEST_XDIST_WORKER")
if _test_process and CELERY_BROKER_URL.startswith("redis://"):
    CELERY_BROKER_URL = broker_of_test_process(
        os.environ.setdefault("ONEFOLD_TEST_BROKER_BASE_URL", CELERY_BROKER_URL), _test_process
    )
    # Celery prefers the variable to the setting
    os.environ["CELERY_BROKER_URL"] = CELERY_BROKER_URL
