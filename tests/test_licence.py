"""Onefold is released under the Apache License 2.0: the repository's LICENSE, both projects' metadata, the README."""

import hashlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: SHA-256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the full text with its appendix.
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_the_repository_licence_is_the_full_apache_2_0_text():
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:5] == ["Apache", "License", "Version", "2.0,", "January"]
    assert "END OF TERMS AND CONDITIONS" in text
    assert "APPENDIX: How to apply the Apache License to your work." in text
    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_0_SHA256


def test_the_market_and_the_toolkit_declare_apache_2_0_and_ship_the_same_licence_file():
    for folder in (ROOT, ROOT / "workers"):
        project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
        assert (project["license"], project["license-files"]) == ("Apache-2.0", ["LICENSE"])
    assert (ROOT / "workers" / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()


def test_the_readme_says_onefold_is_released_under_the_apache_licence():
    assert (
        "Onefold is released under the [Apache License 2.0](LICENSE)."
        in (ROOT / "README.md").read_text()
    )
