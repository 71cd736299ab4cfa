"""Offsets in other units than UTF-8 bytes (docs/rest-api.md, "Offsets in other units").

Every offset Telha stores is a UTF-8 byte offset into a version's canonical text. A response
that carries offsets can give them instead as

- ``codepoint``: Unicode code points, i.e. Python ``str`` indices and the W3C
  ``TextPositionSelector``'s ``start``/``end``;
- ``utf16``: UTF-16 code units, i.e. JavaScript (and Java, C#) string indices: a character
  outside the Basic Multilingual Plane (most emoji) counts 2.

Both follow from two counts of the bytes before an offset ``x`` (on a character boundary):
``cont`` continuation bytes (``0b10xxxxxx``) and ``astral`` 4-byte lead bytes (``0xF0``–
``0xF7``)::

    codepoint(x) = x − cont[0:x]
    utf16(x)     = codepoint(x) + astral[0:x]

The counts are additive, so they can be kept per stored 1 MiB text chunk (a chunk may cut a
character: the counts stay exact) and summed: converting an offset deep into a large text
needs the counts of the chunks before it and the bytes of its own chunk only
(:class:`OffsetConverter`'s ``base`` and ``before``).

How to convert a response's offsets (for the routes of other modules too)::

    units = parse_units(request.query_params.get("units"))  # 400 naming ``units``
    conv = OffsetConverter(window_bytes, base=window_start, before=counts_before_window)
    start, end = conv.to_units([span.start, span.end], units)

Pure: no I/O.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from telha.domain.errors import RequestError

__all__ = ["UNITS", "Counts", "OffsetConverter", "Units", "counts", "parse_units"]

#: What ``units=`` may name; ``byte`` (UTF-8 bytes) is the default and what is stored.
Units = Literal["byte", "codepoint", "utf16"]
UNITS: tuple[Units, ...] = ("byte", "codepoint", "utf16")

_CONT = bytes(range(0x80, 0xC0))
_ASTRAL = bytes(range(0xF0, 0xF8))


def parse_units(value: str | None) -> Units:
    """The ``units`` query parameter (absent: ``byte``).

    :raises RequestError: not one of :data:`UNITS` (the message names ``units``).
    """
    if value is None:
        return "byte"
    for units in UNITS:
        if value == units:
            return units
    raise RequestError(f"units must be one of {', '.join(UNITS)}, got {value!r}")


@dataclass(frozen=True, slots=True)
class Counts:
    """What converting needs to know about some UTF-8 bytes: how many are continuation
    bytes (``cont``) and how many lead a 4-byte sequence (``astral``, one UTF-16 surrogate
    pair each)."""

    cont: int = 0
    astral: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.cont + other.cont, self.astral + other.astral)


def counts(data: bytes | bytearray | memoryview) -> Counts:
    """The :class:`Counts` of ``data`` (any bytes: a cut character is fine). Two C-speed
    passes; about 1 ms per MiB."""
    raw = bytes(data)
    n = len(raw)
    return Counts(n - len(raw.translate(None, _CONT)), n - len(raw.translate(None, _ASTRAL)))


class OffsetConverter:
    """Converts byte offsets of a text to ``units`` and back, over a window of it.

    :param data: the text's bytes ``[base, base + len(data))`` (the whole text: ``base=0``).
    :param base: where ``data`` starts in the text, bytes.
    :param before: the :class:`Counts` of the text's bytes ``[0, base)``.

    Offsets passed in must lie in the window and on UTF-8 character boundaries (stored
    offsets always are); a window may start or end inside a character as long as no offset
    asked for does.
    """

    __slots__ = ("_base", "_before", "_data", "_marked", "_marks")

    def __init__(self, data: bytes, base: int = 0, before: Counts | None = None) -> None:
        self._data = data
        self._base = base
        self._before = before or Counts()
        #: Sorted byte offsets already counted, and the counts before each (a cache that
        #: makes a sorted batch linear in the window's size).
        self._marks: list[int] = [base]
        self._marked: list[Counts] = [self._before]

    @property
    def start(self) -> int:
        """The window's first byte offset."""
        return self._base

    @property
    def end(self) -> int:
        """The window's end (exclusive byte offset)."""
        return self._base + len(self._data)

    def _counts_at(self, offset: int) -> Counts:
        if not self._base <= offset <= self.end:
            raise ValueError(f"offset {offset} is outside [{self._base}, {self.end}]")
        i = bisect_right(self._marks, offset) - 1
        mark = self._marks[i]
        if mark == offset:
            return self._marked[i]
        got = self._marked[i] + counts(self._data[mark - self._base : offset - self._base])
        self._marks.insert(i + 1, offset)
        self._marked.insert(i + 1, got)
        return got

    def one(self, offset: int, units: Units) -> int:
        """Byte ``offset`` in ``units``.

        :raises ValueError: ``offset`` outside the window.
        """
        if units == "byte":
            return offset
        c = self._counts_at(offset)
        cp = offset - c.cont
        return cp if units == "codepoint" else cp + c.astral

    def to_units(self, offsets: Iterable[int], units: Units) -> list[int]:
        """Each byte offset of ``offsets`` in ``units``, in the given order; linear in the
        window's size however many offsets are asked for (they are counted in sorted
        order).

        :raises ValueError: an offset outside the window.
        """
        wanted = list(offsets)
        if units == "byte":
            return wanted
        for offset in sorted(set(wanted)):
            self._counts_at(offset)
        return [self.one(o, units) for o in wanted]

    def to_bytes(self, position: int, units: Units, *, clamp: bool = False) -> int:
        """The byte offset of ``position`` given in ``units`` (``position`` must fall in
        the window). With ``clamp``, a position past the window's end gives the byte
        offset of that end (for a window reaching past ``position``'s furthest byte, as
        :func:`telha.rest.offsets.converter` reads one, that is the text's end).

        :raises RequestError: ``position`` outside the window (past its end only without
            ``clamp``), or inside a character (a UTF-16 position between the two halves
            of a surrogate pair).
        """
        if units == "byte":
            return position
        lo = self.one(self._base, units)
        if position < lo:
            raise RequestError(f"offset {position} ({units}) is before the text window")
        skip, text = _decode_window(self._data)
        rel = position - self.one(self._base + skip, units)
        if units == "codepoint":
            if rel > len(text):
                if clamp:
                    return self._base + skip + len(text.encode("utf-8"))
                raise RequestError(f"offset {position} ({units}) is past the end of the text")
            return self._base + skip + len(text[:rel].encode("utf-8"))
        wide = text.encode("utf-16-le")
        if rel * 2 > len(wide):
            if clamp:
                return self._base + skip + len(text.encode("utf-8"))
            raise RequestError(f"offset {position} ({units}) is past the end of the text")
        try:
            head = wide[: rel * 2].decode("utf-16-le", "strict")
        except UnicodeDecodeError:
            raise RequestError(f"offset {position} (utf16) falls inside a surrogate pair") from None
        return self._base + skip + len(head.encode("utf-8"))


def _decode_window(data: bytes) -> tuple[int, str]:
    """``(skip, text)``: ``data`` decoded after its first ``skip`` bytes (the end of a
    character cut at the window's start), without an incomplete character at its end."""
    skip = 0
    while skip < min(len(data), 3) and 0x80 <= data[skip] < 0xC0:
        skip += 1
    end = len(data)
    back = 0
    while back < min(end - skip, 3) and 0x80 <= data[end - 1 - back] < 0xC0:
        back += 1
    if back < end - skip and data[end - 1 - back] >= 0xC0:
        lead = data[end - 1 - back]
        need = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if back + 1 < need:
            end -= back + 1
    return skip, data[skip:end].decode("utf-8")
