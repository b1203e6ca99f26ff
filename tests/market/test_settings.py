import re
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from market.settings import env_bool, env_int

ROOT = Path(__file__).resolve().parents[2]


def test_every_setting_read_from_the_environment_is_documented_in_env_example():
    settings, web_server = (
        (ROOT / "market/settings.py").read_text(),
        (ROOT / "docker/gunicorn.conf.py").read_text(),
    )
    read = set(re.findall(r'env_(?:text|bool|int)\(\s*"([A-Z_]+)"', settings))
    read |= set(re.findall(r'os\.environ\.get\(\s*"([A-Z_]+)"', settings + web_server))
    documented = set(
        re.findall(r"^([A-Z_]+)=", (ROOT / "docker/.env.example").read_text(), re.MULTILINE)
    )
    assert read == documented


@pytest.mark.parametrize(
    "reader, value, message",
    [
        (env_int, "lots", "must be a whole number"),
        (env_int, "-3", "must be at least 1"),
        (env_bool, "maybe", "must be true or false"),
    ],
)
def test_bad_setting_values_stop_start_up_with_the_variables_name(
    monkeypatch, reader, value, message
):
    monkeypatch.setenv("ONEFOLD_EXAMPLE", value)
    with pytest.raises(ImproperlyConfigured, match=f"ONEFOLD_EXAMPLE {message}"):
        reader("ONEFOLD_EXAMPLE", 1)
