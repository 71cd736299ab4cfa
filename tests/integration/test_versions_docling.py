"""Versions that supersede for docling's formats, end to end (docs/architecture.md,
"Versions and node identity"): a DOCX from the corpus edited with python-docx, and a small
text PDF in the corpus's ``simple1.pdf`` shape with one line edited and one dropped. After
the changed re-ingest the source's current graph is exactly the new version's, the DOCUMENT
and every unchanged paragraph keep their ids, and the old graph is readable ``asOf`` the old
version. Few and small: docling is slow on small machines."""

from __future__ import annotations

import io
from collections.abc import Iterator

import docx
import pytest

from tests.conftest import CORPUS
from tests.integration.versions_support import (
    Graph,
    Scoped,
    check_new_version,
    graph,
    scoped,
    streamed,
)
from tests.support.inproc import InProcessServer
from tests.support.pdf import assemble_pdf
from tests.support.server import write_config

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("versions-docling")
    config = write_config(
        folder,
        engine,
        workers={"in_process": ["docling_worker"], "concurrency": 1},
        docling={"timeout_s": 180, "mem_ceiling_mb": 4096},
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _reingest(
    server: InProcessServer, scope: Scoped, fmt: str, name: str, v1: bytes, v2: bytes
) -> tuple[str, Graph, Graph, int]:
    """``v1`` then ``v2`` as ``name``, checked (:func:`check_new_version`); the source id,
    the graphs before and after and a tx the old graph is read at (the old version's, or
    just before the new one when the old one streamed)."""
    async with scoped(server) as ref:
        reference = await graph(ref, (await ref.ingest(fmt, name, v2, within_s=300))["sourceId"])
    job1 = await scope.ingest(fmt, name, v1, within_s=300)
    src = str(job1["sourceId"])
    before = await graph(scope, src)
    await scope.ingest(fmt, name, v2, within_s=300)
    after = await graph(scope, src)
    first, second = await scope.versions(src)
    v1_tx = None if streamed(job1) else int(first["sourceVersionTx"])
    v2_tx = int(second["sourceVersionTx"])
    await check_new_version(scope, src, before, after, reference, v1_tx, v2_tx)
    return src, before, after, v2_tx - 1 if v1_tx is None else v1_tx


def _texts(g: Graph, label: str) -> dict[str, str]:
    """Span text → id of the nodes with ``label``."""
    return {"".join(p[2]): node_id for node_id, p in g.by_label(label).items()}


def _docx_v2(raw: bytes) -> bytes:
    """The corpus DOCX with one paragraph edited and the quote removed."""
    doc = docx.Document(io.BytesIO(raw))
    paragraphs = doc.paragraphs
    edited = next(p for p in paragraphs if p.text.startswith("After we had a good day"))
    edited.text = edited.text.replace("important", "essential")
    quote = next(p for p in paragraphs if p.text == "I like to eat leaves")
    quote._element.getparent().remove(quote._element)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


async def test_docx(server: InProcessServer) -> None:
    v1 = (CORPUS / "docx" / "word_sample.docx").read_bytes()
    async with scoped(server) as scope:
        _, before, after, v1_tx = await _reingest(
            server, scope, "docx", "duck.docx", v1, _docx_v2(v1)
        )
        assert set(before.by_label("DOCUMENT")) == set(after.by_label("DOCUMENT")) != set()
        old, new = _texts(before, "PARAGRAPH"), _texts(after, "PARAGRAPH")
        (edited,) = [t for t in old if t.startswith("After we had a good day")]
        assert await scope.status(old[edited]) == 404
        assert await scope.status(old[edited], v1_tx) == 200
        assert "essential" in next(t for t in new if t.startswith("After we had a good day"))
        for text in set(old) & set(new):
            assert old[text] == new[text], text  # unchanged paragraphs keep their ids
        assert set(old) & set(new)


def _pdf(lines: list[str]) -> bytes:
    """A one-page text PDF in ``simple1.pdf``'s shape (Helvetica, one text object), a line
    every 60 points, with a correct cross-reference table."""
    ops = ["BT", "/F1 14 Tf", "72 740 Td"]
    for i, line in enumerate(lines):
        if i:
            ops.append("0 -60 Td")
        ops.append(f"({line}) Tj")
    ops.append("ET")
    stream = "\n".join(ops).encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [ 3 0 R ] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [ 0 0 612 792 ] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    return assemble_pdf(objects)


_LINES = [
    "Quarterly report of the lake survey.",
    "The ducks counted this spring were many.",
    "Water quality stayed good all season.",
    "The reeds on the north shore grew back.",
]


async def test_pdf(server: InProcessServer) -> None:
    v2_lines = [_LINES[0], "The ducks counted this spring were few.", _LINES[3]]
    async with scoped(server) as scope:
        _, before, after, v1_tx = await _reingest(
            server, scope, "pdf", "survey.pdf", _pdf(_LINES), _pdf(v2_lines)
        )
        assert set(before.by_label("DOCUMENT")) == set(after.by_label("DOCUMENT")) != set()
        old, new = _texts(before, "PARAGRAPH"), _texts(after, "PARAGRAPH")
        assert _LINES[2] in old and _LINES[2] not in new
        assert await scope.status(old[_LINES[2]]) == 404
        assert await scope.status(old[_LINES[2]], v1_tx) == 200
        for line in (_LINES[0], _LINES[3]):
            assert old[line] == new[line], line
