"""``text_worker``: plain text and markdown (formats ``text``, ``markdown``).

Projection: one ``DOCUMENT`` node (``name``, ``format``) whose span is the whole text (kind
``body``); one ``PARAGRAPH`` node per blank-line-separated block (span kind ``paragraph``);
in markdown, an ATX heading line (``#`` to ``######``) is a ``SECTION`` node with ``level``
(1 = top) and ``title`` (span kind ``heading``). Sections nest by level, as the docling
projection does: a heading contains what follows it up to the next heading of its level or a
higher one (a smaller number); a level-2 heading under a level-1 heading hangs off that
section, one that skips a level (``#`` then ``###``) hangs off the nearest higher one.
``CONTAINS`` edges parent → child carry ``ord`` (0-based, document order per parent). UTF-8
only (a BOM is dropped); undecodable bytes are ``corrupt_input``; U+0000 is dropped and
counted (``stats.nul_chars``); empty input follows :mod:`workers_common.empty`.
Deterministic: the same bytes and options give the same submission.
"""

from __future__ import annotations

import re
from typing import Any

from workers_common import CorruptInput, IngestionResultBuilder, Job, normalize_canonical
from workers_common.canonical import drop_nul
from workers_common.empty import is_empty
from workers_common.projection import installed

__all__ = ["FORMATS", "PROJECTION_VERSION", "handle", "parser_versions", "project"]

FORMATS = ("text", "markdown")
#: How this worker reads bytes (:mod:`workers_common.projection`): raise it whenever the same
#: bytes and options would project differently.
PROJECTION_VERSION = 1


def parser_versions() -> dict[str, str]:
    """The installed versions of the parsers that shape this worker's output:
    its own parser only."""
    return installed()


#: A plain, CPU-bound handler: in-process pools run it in a worker process (see
#: workers_common.handlers).
PROCESS_POOL = True

_BOM = b"\xef\xbb\xbf"
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


def _decode(raw: bytes) -> str:
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptInput(f"not UTF-8: invalid byte at offset {exc.start}") from None


def _blocks(text: str) -> list[tuple[int, int]]:
    """Character ranges of blank-line-separated blocks (trailing whitespace excluded)."""
    blocks: list[tuple[int, int]] = []
    start: int | None = None
    end = 0
    pos = 0
    for line in text.split("\n"):
        line_end = pos + len(line)
        if line.strip():
            if start is None:
                start = pos + (len(line) - len(line.lstrip()))
            end = pos + len(line.rstrip())
        elif start is not None:
            blocks.append((start, end))
            start = None
        pos = line_end + 1
    if start is not None:
        blocks.append((start, end))
    return blocks


def _markdown_parts(text: str, block: tuple[int, int]) -> list[tuple[str, int, int, int]]:
    """Split a markdown block into headings and paragraphs: ``(kind, start, end, level)``."""
    parts: list[tuple[str, int, int, int]] = []
    para_start: int | None = None
    para_end = block[0]
    pos = block[0]
    for line in text[block[0] : block[1]].split("\n"):
        m = _HEADING.match(line)
        if m:
            if para_start is not None:
                parts.append(("paragraph", para_start, para_end, 0))
                para_start = None
            parts.append(("heading", pos, pos + len(line.rstrip()), len(m.group(1))))
        elif line.strip():
            if para_start is None:
                para_start = pos + (len(line) - len(line.lstrip()))
            para_end = pos + len(line.rstrip())
        pos += len(line) + 1
    if para_start is not None:
        parts.append(("paragraph", para_start, para_end, 0))
    return parts


def project(
    text: str, name: str, fmt: str, nul_chars: int = 0, empty: bool = False
) -> dict[str, Any]:
    """The submission for canonical ``text`` (already normalized; ``nul_chars``: U+0000
    characters dropped from it, reported in ``stats``; ``empty``: the input was empty by
    :mod:`workers_common.empty`, ``stats.empty: true``)."""
    b = IngestionResultBuilder()
    b.count_nul(nul_chars)
    b.set_canonical_text(text)
    data = text.encode("utf-8")
    whole = b.add_span_range(0, len(data), "body")
    doc = b.add_node(["DOCUMENT"], {"name": name, "format": fmt}, spans=[whole])
    # Character offsets → byte offsets; boundaries come in increasing order, so each call
    # encodes only the text since the previous one.
    cursor = [0, 0]  # (character offset, byte offset)

    def byte_at(i: int) -> int:
        cursor[1] += len(text[cursor[0] : i].encode("utf-8"))
        cursor[0] = i
        return cursor[1]

    order = 0
    # Open sections, outermost first: [level, node ref, next ord]; the DOCUMENT is level 0.
    open_: list[list[int]] = [[0, doc, 0]]
    for block in _blocks(text):
        parts = _markdown_parts(text, block) if fmt == "markdown" else [("paragraph", *block, 0)]
        for kind, start, end, level in parts:
            span = b.add_span_range(byte_at(start), byte_at(end), kind)
            body = text[start:end]
            if kind == "heading":
                m = _HEADING.match(body)
                title = (m.group(2) or "").strip() if m else body
                node = b.add_node(["SECTION"], {"level": level, "title": title}, spans=[span])
                while open_[-1][0] >= level:
                    open_.pop()
            else:
                node = b.add_node(["PARAGRAPH"], {"text": body}, spans=[span])
            parent = open_[-1]
            b.add_relationship(
                "CONTAINS", from_ref=parent[1], to_ref=node, properties={"ord": parent[2]}
            )
            parent[2] += 1
            if kind == "heading":
                open_.append([level, node, 0])
            order += 1
    stats: dict[str, Any] = {"blocks": order, "bytes": len(data)}
    if empty:
        stats["empty"] = True
    b.set_stats(stats)
    return b.build()


def handle(job: Job) -> dict[str, Any]:
    """Project one text or markdown job.

    :raises CorruptInput: the bytes are not UTF-8.
    """
    if is_empty(job):
        return project("", job.name, job.format, empty=True)
    text, nul = drop_nul(_decode(job.content))
    return project(normalize_canonical(text), job.name, job.format, nul)
