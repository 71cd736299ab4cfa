"""The chunk and offset reads of the store on each engine (telha/storage/reads/text.py):
a version of 2.5 MiB whose emoji straddles the first 1 MiB chunk boundary converts offsets
in its third chunk from a window of that chunk alone exactly as from the whole text;
``chunk_inputs`` gives the whole text, every span and only the nodes chunking reads, and
refuses a text over its bound; another scope's version is not found."""

from __future__ import annotations

import uuid

import msgspec
import pytest

from telha.domain.errors import NotFound, PayloadTooLarge
from telha.domain.ids import new_id
from telha.domain.model import BLOB_CHUNK, Dedup, NewVersion, Scope
from telha.domain.projection import NodeOut, Projection, SpanOut
from telha.domain.units import OffsetConverter
from telha.storage import StorageEngine

pytestmark = pytest.mark.anyio


def _projection() -> Projection:
    """Lines of é/CJK/emoji text; the emoji of one line starts 2 bytes before 1 MiB. A
    SECTION every 1000 lines, a PARAGRAPH (with a page) or a TABLE_ROW (without) per line."""
    lines, size = [], 0
    while size < BLOB_CHUNK * 5 // 2:
        line = f"Line {len(lines)} café 東京 done"
        if size < BLOB_CHUNK <= size + len(line.encode()) + 40:
            line = "x" * (BLOB_CHUNK - 2 - size) + "😀 straddles"
        lines.append(line)
        size += len(line.encode()) + 1
    text = "\n".join(lines).encode()
    assert text[BLOB_CHUNK - 2 : BLOB_CHUNK + 2].decode() == "😀"
    spans, nodes, at = [], [], 0
    for i, line in enumerate(lines):
        n = len(line.encode())
        spans.append(SpanOut(at, at + n, "heading" if i % 1000 == 0 else "paragraph"))
        if i % 1000 == 0:
            labels, props = ("SECTION",), {"title": line, "level": 1}
        elif i % 2:
            labels, props = ("PARAGRAPH",), {"text": line, "page": i // 50 + 1}
        else:
            labels, props = ("TABLE_ROW",), {"text": line}
        nodes.append(NodeOut(labels, msgspec.json.encode(props), (i,)))
        at += n + 1
    return Projection(text, spans, nodes, [])


async def test_windows_and_chunk_inputs(store: StorageEngine) -> None:
    scope = Scope("t", f"o-{uuid.uuid4()}")
    source = new_id()
    projection = _projection()
    text = projection.canonical
    v = NewVersion(source, "big.txt", "text", new_id() * 2, len(text), "test")
    out = await store.versions.commit(scope, v, projection, dedup=Dedup.NONE)
    tx = out.source_version_tx
    assert tx is not None
    whole = OffsetConverter(text)
    lo = text.index(b"\n", 2 * BLOB_CHUNK + 10) + 1
    hi = text.index(b"\n", lo + 100)
    window = await store.reads.text_window(scope, source, tx, lo, hi)
    assert window.base == 2 * BLOB_CHUNK and window.data == text[2 * BLOB_CHUNK :]
    conv = OffsetConverter(window.data, window.base, window.before)
    for units in ("codepoint", "utf16"):
        assert conv.to_units([lo, hi], units) == whole.to_units([lo, hi], units)  # type: ignore[arg-type]
        cp = whole.one(lo, units)  # type: ignore[arg-type]
        assert conv.to_bytes(cp, units) == lo  # type: ignore[arg-type]
    # The emoji that straddles the chunk boundary: a window of the second chunk alone.
    emoji = BLOB_CHUNK - 2
    second = await store.reads.text_window(scope, source, tx, BLOB_CHUNK, BLOB_CHUNK + 10)
    conv = OffsetConverter(second.data, second.base, second.before)
    after = emoji + 4
    assert conv.one(after, "utf16") == whole.one(after, "utf16")
    assert conv.to_bytes(whole.one(after, "codepoint"), "codepoint") == after

    got = await store.reads.chunk_inputs(scope, source, tx)
    assert got.text == text and len(got.spans) == len(projection.spans)
    kinds = {n.labels[0] for n in got.nodes.values()}
    assert kinds == {"SECTION", "PARAGRAPH"}  # rows without a page are left out
    assert all(n.page is not None for n in got.nodes.values() if "PARAGRAPH" in n.labels)
    section = next(n for n in got.nodes.values() if "SECTION" in n.labels)
    assert section.level == 1 and section.title is not None
    with pytest.raises(PayloadTooLarge):
        await store.reads.chunk_inputs(scope, source, tx, max_text_bytes=BLOB_CHUNK)
    other = Scope("t", f"o-{uuid.uuid4()}")
    with pytest.raises(NotFound):
        await store.reads.chunk_inputs(other, source, tx)
    with pytest.raises(NotFound):
        await store.reads.text_window(other, source, tx, 0, 10)
