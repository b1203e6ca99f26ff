"""The privacy core is pure: its tests run without Django (``-p no:django``)."""

import pytest


@pytest.fixture(autouse=True)
def media_root():
    """Shadow the suite-wide fixture that needs Django's settings; nothing here writes files."""
    return None
