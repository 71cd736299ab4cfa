"""UPPER_SNAKE naming and canonical text normalization (docs/rest-api.md)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telha.domain.canonical import is_label, key_snake, nfc, normalize_canonical, upper_snake


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("risks-2026-07.json", "RISKS_2026_07"),
        ("homeAddress", "HOME_ADDRESS"),
        ("dir/sub/contracts.json", "CONTRACTS"),
        ("C:\\exports\\Q3 report.v2.json", "Q3_REPORT_V2"),
        ("HTTPServerLog.json", "HTTP_SERVER_LOG"),
        ("___.json", ""),
        (".hidden", "HIDDEN"),
        ("no_extension", "NO_EXTENSION"),
    ],
)
def test_upper_snake(name: str, expected: str) -> None:
    assert upper_snake(name) == expected


def test_key_snake_keeps_dots_as_separators() -> None:
    assert key_snake("address.city") == "ADDRESS_CITY"
    assert key_snake("parties") == "PARTIES"
    assert key_snake("日本") == ""


@pytest.mark.parametrize(
    ("label", "ok"),
    [
        ("RISK", True),
        ("RISKS_2026_07", True),
        ("risk", False),
        ("A__B", False),
        ("_A", False),
        ("", False),
    ],
)
def test_is_label(label: str, ok: bool) -> None:
    assert is_label(label) is ok


def test_normalize_canonical_line_endings_once() -> None:
    assert normalize_canonical("a\r\nb\rc\n\r\n") == "a\nb\nc\n\n"
    assert normalize_canonical(unicodedata.normalize("NFD", "é")) == "é"


@given(st.text())
def test_normalize_canonical_is_idempotent_nfc_lf(text: str) -> None:
    once = normalize_canonical(text)
    assert normalize_canonical(once) == once
    assert "\r" not in once
    assert unicodedata.is_normalized("NFC", once)
    assert nfc(once) is once
