"""Offsets in code points and UTF-16 units (telha/domain/units.py; docs/rest-api.md,
"Offsets in other units"): converted offsets slice the same text in Python (``str``
indices) and in UTF-16 (``utf-16-le`` bytes / 2) as the byte offsets do in UTF-8, over the
whole text or a window of it that starts inside a character."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telha.domain.errors import RequestError
from telha.domain.units import Counts, OffsetConverter, counts, parse_units

#: é (2 bytes, 1 code point, 1 unit), 語 (3, 1, 1), 😀 (4, 1, 2).
TEXT = "Café 日本語 😀 done"


def _boundaries(data: bytes) -> list[int]:
    return [i for i in range(len(data) + 1) if i == len(data) or not 0x80 <= data[i] < 0xC0]


def _utf16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def test_worked_example() -> None:
    """The example of docs/rest-api.md: the emoji's range in each unit."""
    data = TEXT.encode()
    conv = OffsetConverter(data)
    start = data.index("😀".encode())
    assert (start, start + 4) == (16, 20)
    assert conv.to_units([16, 20], "codepoint") == [9, 10]
    assert conv.to_units([16, 20], "utf16") == [9, 11]
    assert TEXT[9:10] == "😀"
    assert TEXT.encode("utf-16-le")[18:22].decode("utf-16-le") == "😀"
    assert conv.to_units([3, 5], "codepoint") == [3, 4]  # é
    assert conv.to_units([6, 15], "utf16") == [5, 8]  # 日本語 and the space after


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_conversions_slice_the_same_text(s: str) -> None:
    data = s.encode()
    conv = OffsetConverter(data)
    marks = _boundaries(data)
    cps = conv.to_units(marks, "codepoint")
    units = conv.to_units(marks, "utf16")
    wide = s.encode("utf-16-le")
    for b, cp, u in zip(marks, cps, units, strict=True):
        assert s[:cp].encode() == data[:b]
        assert wide[: 2 * u].decode("utf-16-le") == data[:b].decode()
        assert conv.to_bytes(cp, "codepoint") == b
        assert conv.to_bytes(u, "utf16") == b
    for a, b in itertools.pairwise(marks):
        ca, cb = conv.to_units([a, b], "codepoint")
        ua, ub = conv.to_units([a, b], "utf16")
        assert s[ca:cb] == data[a:b].decode()
        assert wide[2 * ua : 2 * ub].decode("utf-16-le") == data[a:b].decode()


@given(st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=40), st.data())
def test_a_window_converts_like_the_whole(s: str, draw: st.DataObject) -> None:
    """A window starting anywhere (inside a character too), with the counts before it,
    converts every boundary in it as the whole text does."""
    data = s.encode()
    base = draw.draw(st.integers(0, len(data)))
    whole = OffsetConverter(data)
    window = OffsetConverter(data[base:], base, counts(data[:base]))
    for b in _boundaries(data):
        if b >= base:
            for units in ("codepoint", "utf16"):
                assert window.one(b, units) == whole.one(b, units)  # type: ignore[arg-type]
                assert window.to_bytes(whole.one(b, units), units) == b  # type: ignore[arg-type]


def test_counts_are_additive_across_a_cut_character() -> None:
    data = TEXT.encode()
    for cut in range(len(data) + 1):
        assert counts(data[:cut]) + counts(data[cut:]) == counts(data)
    assert counts("😀é".encode()) == Counts(cont=4, astral=1)


def test_bad_positions() -> None:
    conv = OffsetConverter("a😀b".encode())
    with pytest.raises(RequestError, match="surrogate"):
        conv.to_bytes(2, "utf16")
    with pytest.raises(RequestError, match="past the end"):
        conv.to_bytes(4, "codepoint")
    with pytest.raises(RequestError, match="past the end"):
        conv.to_bytes(5, "utf16")
    # clamp: a position past the end is the text's end (6 bytes).
    assert conv.to_bytes(4, "codepoint", clamp=True) == conv.to_bytes(9, "utf16", clamp=True) == 6
    assert conv.to_bytes(2, "codepoint", clamp=True) == 5
    with pytest.raises(ValueError):
        conv.one(99, "codepoint")


def test_parse_units() -> None:
    assert parse_units(None) == "byte"
    assert parse_units("utf16") == "utf16"
    with pytest.raises(RequestError, match="units"):
        parse_units("chars")
