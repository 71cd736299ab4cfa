"""Reads for retrieval chunks and offset conversion, written once for both engines
(docs/rest-api.md, "Chunks" and "Offsets in other units").

- :func:`chunk_inputs`: a version's whole canonical text, its span rows and what chunking
  needs of its nodes (labels, a SECTION's title and level, a page), in one read transaction.
- :func:`text_window`: the stored chunks holding a byte range, with the
  :class:`~telha.domain.units.Counts` of every byte before them, so the range's offsets can
  be converted to code points or UTF-16 units without holding the text before it (the
  chunks before are counted one at a time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from telha.domain.chunking import MAX_CHUNKED_TEXT_BYTES, ChunkNode, ChunkSpan
from telha.domain.errors import PayloadTooLarge
from telha.domain.model import BLOB_CHUNK, Scope
from telha.domain.records import slice_chunks
from telha.domain.units import Counts, counts
from telha.storage.core.tx import Tx
from telha.storage.reads.graph import blob_range, version_at

__all__ = ["ChunkInputs", "TextWindow", "chunk_inputs", "text_window"]


@dataclass(frozen=True, slots=True)
class ChunkInputs:
    """A version's text (bytes), span rows in document order, and nodes by id."""

    text: bytes
    spans: list[ChunkSpan]
    nodes: dict[bytes, ChunkNode]


@dataclass(frozen=True, slots=True)
class TextWindow:
    """Bytes ``[base, base + len(data))`` of a version's text (whole stored chunks: the
    window may start or end inside a character) and the counts of the bytes before it."""

    base: int
    data: bytes
    before: Counts


class _Facts(msgspec.Struct):
    """The node properties chunking reads (any other property is skipped unparsed)."""

    title: Any = None
    level: Any = None
    page: Any = None


_facts = msgspec.json.Decoder(_Facts)
_labels = msgspec.json.Decoder(list[str])


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def chunk_inputs(
    tx: Tx,
    scope: Scope,
    source_id: bytes,
    at: int,
    max_text_bytes: int = MAX_CHUNKED_TEXT_BYTES,
) -> ChunkInputs:
    """What :func:`telha.domain.chunking.chunk_text` needs of version ``at``: its text, its
    span rows, and the nodes that matter to chunking (a SECTION, a TABLE, or one placed on
    a page; the others are left out).

    :raises NotFound: no such version in ``scope``.
    :raises ContentErased: the version was erased.
    :raises PayloadTooLarge: its text is over ``max_text_bytes`` (default
        :data:`~telha.domain.chunking.MAX_CHUNKED_TEXT_BYTES`).
    """
    sid, version = await version_at(tx, scope, source_id, at)
    if (version.text_len or 0) > max_text_bytes:
        raise PayloadTooLarge(
            f"source version {at} has {version.text_len} bytes of text: chunks are cut for"
            f" versions of at most {max_text_bytes} bytes"
        )
    text = b""
    if version.blob_id is not None and version.text_len:
        rows = await tx.fetchall(
            "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ? ORDER BY idx",
            sid,
            version.blob_id,
        )
        text = b"".join(bytes(r[0]) for r in rows)[: version.text_len]
    span_rows = await tx.fetchall(
        'SELECT start, "end", kind, linked_nodes FROM span_rows WHERE scope_id = ?'
        ' AND source_id = ? AND source_version_tx = ? ORDER BY start, "end"',
        sid,
        source_id,
        at,
    )
    spans = [
        ChunkSpan(s, e, k, tuple(ids[i : i + 16] for i in range(0, len(ids), 16)))
        for s, e, k, ids in span_rows
    ]
    node_rows = [
        row
        for half in tx.dialect.version_halves()
        for row in await tx.fetchall(
            "SELECT node_id, labels, properties FROM nodes"
            f" WHERE scope_id = ? AND source_id = ? AND tx_from = ?{half}",
            sid,
            source_id,
            at,
        )
    ]
    nodes: dict[bytes, ChunkNode] = {}
    for node_id, labels, props in node_rows:
        try:
            f = _facts.decode(props)
        except msgspec.DecodeError:  # properties that are not an object: none of ours
            f = _Facts()
        page = _int(f.page)
        kinds = tuple(_labels.decode(labels))
        if page is None and "SECTION" not in kinds and "TABLE" not in kinds:
            continue  # nothing chunking reads: leave it out (a table's rows, mostly)
        title = f.title if isinstance(f.title, str) else None
        nodes[bytes(node_id)] = ChunkNode(kinds, title, _int(f.level), page)
    return ChunkInputs(text, spans, nodes)


async def text_window(
    tx: Tx, scope: Scope, source_id: bytes, at: int, start: int, end: int
) -> TextWindow:
    """The stored chunks of version ``at`` holding bytes ``[start, end)`` (clamped to the
    text; ``start`` after ``end`` is read as empty at ``start``) and the counts of the text
    before them.

    :raises NotFound: no such version in ``scope``.
    :raises ContentErased: the version was erased.
    """
    sid, version = await version_at(tx, scope, source_id, at)
    length = version.text_len or 0
    lo = min(max(start, 0), length)
    _, _, first, last = slice_chunks(length, lo, min(max(end, lo), length))
    if version.blob_id is None or length == 0:
        return TextWindow(0, b"", Counts())
    before = Counts()
    for idx in range(first):  # one chunk at a time: bounded memory
        row = await tx.fetchone(
            "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ? AND idx = ?",
            sid,
            version.blob_id,
            idx,
        )
        if row is not None:
            before = before + counts(bytes(row[0]))
    chunks = await blob_range(tx, sid, version.blob_id, first, last)
    return TextWindow(first * BLOB_CHUNK, b"".join(chunks), before)
