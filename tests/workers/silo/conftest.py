"""The toolkit tests' own login file (the shared toolkit fixtures are in :mod:`tests.fixtures.silo`)."""

import pytest


@pytest.fixture(autouse=True)
def private_config(tmp_path, monkeypatch):
    """Every test gets its own login file, never the developer's ~/.config/onefold."""
    path = tmp_path / "config" / "onefold.json"
    monkeypatch.setenv("ONEFOLD_CONFIG", str(path))
    monkeypatch.delenv("ONEFOLD_MARKET_URL", raising=False)
    return path
