"""``text_worker``: plain text and markdown (formats ``text``, ``markdown``).

Projection: one ``DOCUMENT`` node (``name``, ``format``) whose span is the whole text (kind
``body``); in plain text, one ``PARAGRAPH`` node per blank-line-separated block (span kind
``paragraph``). Markdown is read as CommonMark reads it (:mod:`text_worker.markdown`): a
heading — ATX (``#`` to ``######``) or setext (``Title`` over ``===`` or ``---``) — is a
``SECTION`` node with ``level`` (1 = top) and ``title`` (span kind ``heading``); a paragraph
and a fenced or indented code block (fences included, never a heading inside) are one
``PARAGRAPH`` each; any other block (a list, a block quote) one per blank-line-separated
piece. Sections nest by level, as the docling
projection does: a heading contains what follows it up to the next heading of its level or a
higher one (a smaller number); a level-2 heading under a level-1 heading hangs off that
section, one that skips a level (``#`` then ``###``) hangs off the nearest higher one.
``CONTAINS`` edges parent → child carry ``ord`` (0-based, document order per parent). UTF-8
only (a BOM is dropped); undecodable bytes are ``corrupt_input``; U+0000 is dropped and
counted (``stats.nul_chars``); empty input follows :mod:`workers_common.empty`.
Deterministic: the same bytes and options give the same submission.
"""

from __future__ import annotations

from typing import Any

from text_worker.markdown import markdown_parts
from workers_common import CorruptInput, IngestionResultBuilder, Job, normalize_canonical
from workers_common.canonical import drop_nul
from workers_common.empty import is_empty
from workers_common.projection import installed

__all__ = ["FORMATS", "PROJECTION_VERSION", "handle", "parser_versions", "project"]

FORMATS = ("text", "markdown")
#: How this worker reads bytes (:mod:`workers_common.projection`): raise it whenever the same
#: bytes and options would project differently.
PROJECTION_VERSION = 2


def parser_versions() -> dict[str, str]:
    """The installed versions of the parsers that shape this worker's output:
    markdown-it-py reads markdown (CommonMark)."""
    return installed("markdown-it-py")


#: A plain, CPU-bound handler: in-process pools run it in a worker process (see
#: workers_common.handlers).
PROCESS_POOL = True
#: ... except an input under 4 KiB, run in a thread: pure Python (nothing that can crash the
#: host), and parsing it costs the host less CPU than its side of the hand-off (pickling,
#: the pipe: ~0.3 ms, as much as parsing 4 KiB of text; bench/RESULTS.md, "Per-job cuts").
PROCESS_POOL_MIN_BYTES = 4096

_BOM = b"\xef\xbb\xbf"


def _decode(raw: bytes) -> str:
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptInput(f"not UTF-8: invalid byte at offset {exc.start}") from None


def _blocks(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Character ranges of the blank-line-separated blocks of ``text[lo:hi]`` (``lo`` at a
    line start; edge whitespace excluded)."""
    blocks: list[tuple[int, int]] = []
    start: int | None = None
    end = 0
    pos = lo
    for line in text[lo:hi].split("\n"):
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
    if fmt == "markdown":
        parts = markdown_parts(text, _blocks)
    else:
        parts = [("paragraph", a, z, 0, "") for a, z in _blocks(text, 0, len(text))]
    for kind, start, end, level, title in parts:
        span = b.add_span_range(byte_at(start), byte_at(end), kind)
        if kind == "heading":
            node = b.add_node(["SECTION"], {"level": level, "title": title}, spans=[span])
            while open_[-1][0] >= level:
                open_.pop()
        else:
            node = b.add_node(["PARAGRAPH"], {"text": text[start:end]}, spans=[span])
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
