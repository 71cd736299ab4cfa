"""Markdown blocks as CommonMark reads them (docs/formats.md, "How each format becomes a
graph"): the top-level blocks of a `markdown-it-py` parse (the ``commonmark`` preset), each as
a character range of the canonical text, so fenced and indented code blocks are never
headings and stay one block, and setext headings (``Title`` over ``=====`` or ``-----``) are
headings like ATX ones (``#`` to ``######``).
"""

from __future__ import annotations

from collections.abc import Callable

from markdown_it import MarkdownIt

__all__ = ["Part", "markdown_parts"]

#: ``(kind, start, end, level, title)``: ``kind`` is ``"heading"`` (``level`` 1–6, ``title``
#: its inline text) or ``"paragraph"`` (``level`` 0, ``title`` empty); ``[start, end)`` are
#: character offsets of the block without its edge whitespace.
Part = tuple[str, int, int, int, str]

_PARSER = MarkdownIt("commonmark")
#: Leaf blocks kept whole: a paragraph, a fenced or indented code block.
_WHOLE = frozenset({"paragraph_open", "fence", "code_block"})


def markdown_parts(
    text: str, blocks: Callable[[str, int, int], list[tuple[int, int]]]
) -> list[Part]:
    """The blocks of markdown ``text`` in order: a heading per heading, one paragraph per
    paragraph and per code block (its fences included), and for any other top-level block
    (a list, a block quote, an HTML block, a rule) the blank-line-separated pieces of its
    lines, ``blocks(text, lo, hi)`` giving their character ranges within ``[lo, hi)``."""
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    tokens = _PARSER.parse(text)
    parts: list[Part] = []
    for i, tok in enumerate(tokens):
        if tok.level != 0 or tok.map is None:
            continue
        lo, hi = starts[tok.map[0]], min(starts[tok.map[1]] - 1, len(text))
        if tok.type == "heading_open":
            title = tokens[i + 1].content if i + 1 < len(tokens) else ""
            span = _trim(text, lo, hi)
            if span is not None:
                parts.append(("heading", *span, int(tok.tag[1:]), title.strip()))
        elif tok.type in _WHOLE:
            span = _trim(text, lo, hi)
            if span is not None:
                parts.append(("paragraph", *span, 0, ""))
        else:
            parts.extend(("paragraph", a, b, 0, "") for a, b in blocks(text, lo, hi))
    return parts


def _trim(text: str, lo: int, hi: int) -> tuple[int, int] | None:
    """``[lo, hi)`` without whitespace at either edge; ``None`` when nothing is left."""
    while lo < hi and text[lo].isspace():
        lo += 1
    while hi > lo and text[hi - 1].isspace():
        hi -= 1
    return (lo, hi) if lo < hi else None
