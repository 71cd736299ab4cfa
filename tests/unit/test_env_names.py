"""Stray ``TELHA_*`` environment variables (telha.env_names; docs/operations.md,
"Environment variables")."""

from __future__ import annotations

import re
from pathlib import Path

from telha.env_names import stray_names

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bTELHA_[A-Z0-9_]*[A-Z0-9]\b")


def test_one_underscore_too_few_names_the_configuration_key() -> None:
    assert stray_names({"TELHA_SERVER_REST_ADDR": "127.0.0.1:9"}) == [
        ("TELHA_SERVER_REST_ADDR", "TELHA_SERVER__REST_ADDR")
    ]
    assert stray_names({"TELHA_APIKEY": "k"}) == [("TELHA_APIKEY", "TELHA_API_KEY")]
    assert stray_names({"TELHA_ZZZ": "1"}) == [("TELHA_ZZZ", None)]


def test_configuration_keys_and_other_variables_are_left_alone() -> None:
    assert stray_names({"TELHA_SERVER__REST_ADDR": "x", "HOME": "/", "TELHAX": "1"}) == []


def test_no_telha_variable_read_anywhere_in_the_repository_is_warned_about() -> None:
    """Every ``TELHA_*`` name in the code, tests, bench, scripts, docs and config.toml
    (``TELHA_<SECTION>__*`` patterns aside) is one something reads: none may be warned on."""
    found: set[str] = set()
    for folder in ("telha", "workers", "tests", "bench", "scripts", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in {".py", ".md", ".toml", ".sh", ""}:
                found.update(NAME.findall(path.read_text(encoding="utf-8", errors="replace")))
    for path in (ROOT / "README.md", ROOT / "config.toml", ROOT / "Makefile"):
        found.update(NAME.findall(path.read_text(encoding="utf-8")))
    # This file's own examples of misspellings are not read by anything.
    found -= {"TELHA_SERVER_REST_ADDR", "TELHA_APIKEY", "TELHA_ZZZ"}
    found = {n for n in found if not n.endswith("_")}
    assert len(found) > 10
    assert stray_names(dict.fromkeys(found, "1")) == []
