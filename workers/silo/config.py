"""Where the toolkit keeps its login: one JSON file readable by its owner only.

The file is ``$ONEFOLD_CONFIG`` if set, else ``~/.config/onefold/config.json``. It holds the
market's address with the token, so that a token is never sent to a market it was not issued by.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from workers.silo.client import normalise_market_url
from workers.silo.errors import ConfigurationError

CONFIG_ENVIRONMENT_VARIABLE = "ONEFOLD_CONFIG"


@dataclass(frozen=True)
class Login:
    market_url: str
    token: str
    username: str


def config_path() -> Path:
    configured = os.environ.get(CONFIG_ENVIRONMENT_VARIABLE)
    return Path(configured) if configured else Path.home() / ".config" / "onefold" / "config.json"


def login_save(login: Login) -> Path:
    """Write the login (file mode 0600) and return where."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(asdict(login), file, indent=2)
    os.chmod(path, 0o600)
    return path


def login_load(*, market_url: str | None = None) -> Login:
    """The stored login, checked against the market the user asked for (if any).

    Raises :class:`ConfigurationError` when nobody logged in, or when the stored token was issued
    by another market than ``market_url``.
    """
    path = config_path()
    if not path.exists():
        raise ConfigurationError(
            f"You are not logged in (no {path}); run `python -m workers.silo login "
            "--market URL --username NAME` first."
        )
    try:
        stored = json.loads(path.read_text())
        login = Login(
            market_url=normalise_market_url(stored["market_url"]),
            token=stored["token"],
            username=stored.get("username", ""),
        )
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigurationError(
            f"The login file {path} is damaged; run `python -m workers.silo login` again."
        ) from error
    if market_url is not None and normalise_market_url(market_url) != login.market_url:
        raise ConfigurationError(
            f"The stored token was issued by the market at {login.market_url}, not by {normalise_market_url(market_url)}; "
            f"a token only works on the market that issued it. Run `python -m workers.silo login --market "
            f"{normalise_market_url(market_url)}` to log in there."
        )
    return login
