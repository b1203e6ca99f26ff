"""The commands a silo runs at home for one federation, as its page shows them (and a test runs them as shown).

Install the toolkit from this market's own wheel into a fresh virtualenv, log in, pull, train, upload: nothing
needs a checkout. ``my-table.csv`` stands for the silo's labelled table.
"""

from __future__ import annotations

import shlex

from market.toolkit.apis import toolkit_wheel_url
from workers.silo.folders import pulled_folder_name

VIRTUALENV = "onefold-venv"
SILO_TABLE = "my-table.csv"


def toolkit_commands(request, federation) -> str:
    """The shell lines, ``#`` comments included, for the viewer (its username) and this federation."""
    onefold = f"{VIRTUALENV}/bin/onefold"
    wheel = shlex.quote(f"onefold-toolkit[train] @ {toolkit_wheel_url(request)}")
    market = request.build_absolute_uri("/")
    slug = shlex.quote(federation.slug)
    lines = [
        "# 1. Install the toolkit from this market (Python 3.11+; [neural] instead of [train] for networks)",
        f"python3 -m venv {VIRTUALENV}",
        f"{VIRTUALENV}/bin/pip install {wheel}",
        "# 2. Log in (asks for your password) and download the public features and specification",
        f"{onefold} login --market {shlex.quote(market)} --username {shlex.quote(request.user.username)}",
        f"{onefold} pull {slug}",
        f"# 3. Train on your table ({SILO_TABLE}: the columns below and the label column), then upload",
        f"{onefold} train {slug} --data {SILO_TABLE}",
        f"{onefold} upload {shlex.quote(pulled_folder_name(federation.slug))}/students",
    ]
    return "\n".join(lines)


__all__ = ["SILO_TABLE", "VIRTUALENV", "toolkit_commands"]
