"""Small projections and index counts for store-level tests of versions and indexes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec

from telha.domain.projection import NodeOut, Projection, SpanOut

__all__ = ["WORKER_ID", "index_entries", "word_projection"]

#: The id the projection's one worker-identified node carries.
WORKER_ID = b"W" * 16


def word_projection(words: list[str], label: str, props: bytes = b"{}") -> Projection:
    """Text ``words`` joined by spaces; one ``label`` node per word spanning it (no id: it is
    matched by key), then one ``FILE`` node with :data:`WORKER_ID` spanning the first."""
    text = " ".join(words).encode()
    spans, start = [], 0
    for w in words:
        spans.append(SpanOut(start, start + len(w), "body"))
        start += len(w) + 1
    nodes = [NodeOut((label,), props, (i,)) for i in range(len(words))]
    nodes.append(NodeOut(("FILE",), msgspec.json.encode({"n": 1}), (0,), WORKER_ID))
    return Projection(text, spans, nodes)


def index_entries(db: Path, index: str) -> int:
    """Entries in SQLite index ``index`` of the store file ``db`` (its leaf cells, from
    ``dbstat``; 0 when there is no such index)."""
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT sum(ncell) FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (index,)
        ).fetchone()
    return int(row[0] or 0)
