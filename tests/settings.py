"""The market's settings for the test suite, with one change: a fast password hasher.

PBKDF2's 1,000,000 iterations cost about 0.23 s for every user created and every password checked, minutes
over the suite. PBKDF2 stays listed, so that a password hashed by a process started with market.settings still
verifies. Worker and server processes that tests start inherit DJANGO_SETTINGS_MODULE and use this module too.
"""

from market.settings import *  # noqa: F403

PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
