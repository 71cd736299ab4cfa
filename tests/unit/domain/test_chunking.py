"""Retrieval chunks (telha/domain/chunking.py; docs/rest-api.md, "Chunks"): a chunk's text
never exceeds ``max_bytes`` and is exactly its canonical slice (after a repeated header);
no chunk starts or ends inside a span that fits; an oversized span is cut at a sentence
end, else whitespace, else a character boundary; top-level sections are not crossed unless
``within="document"``; table headers are repeated; overlap reaches back to a word start."""

from __future__ import annotations

import itertools
import re

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from telha.domain.chunking import Chunk, ChunkNode, ChunkSpan, chunk_text, chunk_texts

DOC = b"D" * 16


Version = tuple[bytes, list[ChunkSpan], dict[bytes, ChunkNode]]


def _doc(blocks: list[tuple[str, str, int]]) -> Version:
    """A text_worker-like version: blocks ``(kind, text, level)`` joined by blank lines, a
    body span, a SECTION per heading (``level``) and a PARAGRAPH per paragraph (page =
    its position // 3 + 1)."""
    text = "\n\n".join(t for _, t, _ in blocks).encode()
    spans = [ChunkSpan(0, len(text), "body", (DOC,))]
    nodes = {DOC: ChunkNode(("DOCUMENT",))}
    pos = 0
    for k, (kind, block, level) in enumerate(blocks):
        raw = block.encode()
        node = k.to_bytes(16, "big")
        spans.append(ChunkSpan(pos, pos + len(raw), kind, (node,)))
        if kind == "heading":
            nodes[node] = ChunkNode(("SECTION",), block.lstrip("# "), level, k // 3 + 1)
        else:
            nodes[node] = ChunkNode(("PARAGRAPH",), page=k // 3 + 1)
        pos += len(raw) + 2
    return text, spans, nodes


def _top(text: bytes, spans: list[ChunkSpan], nodes: dict[bytes, ChunkNode]) -> list[int]:
    """Where the top-level sections start (no open heading of a lower level above them)."""
    levels: list[int] = []
    top = []
    for s in spans:
        node = nodes.get(s.node_ids[0]) if s.node_ids else None
        if node is not None and "SECTION" in node.labels and node.level is not None:
            while levels and levels[-1] >= node.level:
                levels.pop()
            if not levels:
                top.append(s.start)
            levels.append(node.level)
    return top


def _check(
    text: bytes,
    spans: list[ChunkSpan],
    chunks: list[Chunk],
    max_bytes: int,
    overlap: int = 0,
    bounds: list[int] | None = None,
) -> list[str]:
    """The invariants every chunking keeps (``bounds``: the top-level sections' starts, with
    ``within="section"``); the chunks' texts."""
    out = []
    for c, body in zip(chunks, chunk_texts(text, chunks), strict=True):
        assert len(body) <= max_bytes
        assert body.endswith(text[c.start : c.end])
        out.append(body.decode("utf-8"))  # never cut inside a character
        for b in bounds or []:
            assert not c.start < b < c.end, (c, b)  # no top-level section crossed
        for s in spans:
            if s.end - s.start <= max_bytes and not any(s.start < b < s.end for b in bounds or []):
                assert not s.start < c.end < s.end, (c, s)
                if not overlap:
                    assert not s.start < c.start < s.end, (c, s)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert all(a.start < b.start and a.end < b.end for a, b in itertools.pairwise(chunks))
    return out


def test_empty_and_blank_texts_have_no_chunks() -> None:
    assert chunk_text(b"", [], {}, max_bytes=64) == []
    assert chunk_text(b" \n\n ", [ChunkSpan(0, 4, "body")], {}, max_bytes=64) == []


def test_bounds() -> None:
    with pytest.raises(ValueError):
        chunk_text(b"x", [], {}, max_bytes=63)
    with pytest.raises(ValueError):
        chunk_text(b"x", [], {}, max_bytes=1024 * 1024 + 1)
    with pytest.raises(ValueError):
        chunk_text(b"x", [], {}, max_bytes=100, overlap=51)


def test_paragraphs_are_packed_whole() -> None:
    paras = [("paragraph", f"Paragraph {i} says something useful here.", 0) for i in range(10)]
    text, spans, nodes = _doc(paras)
    chunks = chunk_text(text, spans, nodes, max_bytes=100)
    got = _check(text, spans, chunks, 100)
    assert all(t.count("Paragraph") == 2 for t in got)  # 42 bytes each: two fit
    assert chunks[0].pages == (1, 1) and chunks[1].pages == (1, 2)
    assert len(chunks[0].node_ids) == 2 and DOC not in chunks[0].node_ids  # body was opened
    assert chunk_text(text, spans, nodes, max_bytes=100) == chunks  # deterministic


def test_a_small_document_is_one_chunk_with_its_document_node() -> None:
    text, spans, nodes = _doc([("paragraph", "One.", 0), ("paragraph", "Two.", 0)])
    (only,) = chunk_text(text, spans, nodes, max_bytes=64)
    assert (only.start, only.end) == (0, len(text)) and only.node_ids[0] == DOC


def test_oversized_span_is_cut_at_sentence_ends() -> None:
    para = " ".join(f"Sentence number {i} is here." for i in range(20))
    text, spans, nodes = _doc([("paragraph", para, 0)])
    chunks = chunk_text(text, spans, nodes, max_bytes=100)
    got = _check(text, spans, chunks, 100)
    assert len(chunks) > 1
    assert all(t.endswith(".") for t in got)
    assert " ".join(got) == para  # only the spaces between pieces are left out
    assert all(c.node_ids == (b"\0" * 16,) for c in chunks)  # the span they cut


def test_oversized_span_without_sentence_ends_is_cut_at_whitespace() -> None:
    para = " ".join(f"word{i}" for i in range(60))
    text, spans, nodes = _doc([("paragraph", para, 0)])
    got = _check(text, spans, chunk_text(text, spans, nodes, max_bytes=64), 64)
    assert " ".join(got) == para
    assert all(re.fullmatch(r"(word\d+ ?)+", t) and not t.endswith(" ") for t in got)


@pytest.mark.parametrize("char", ["é", "語", "😀"])
def test_oversized_span_without_whitespace_is_cut_at_character_boundaries(char: str) -> None:
    para = "x" + char * 100
    text, spans, nodes = _doc([("paragraph", para, 0)])
    got = _check(text, spans, chunk_text(text, spans, nodes, max_bytes=64), 64)
    assert "".join(got) == para
    assert all(len(t.encode()) > 64 - len(char.encode()) for t in got[:-1])  # as full as fits


def test_cjk_sentence_ends() -> None:
    para = "これは文です。" * 12
    text, spans, nodes = _doc([("paragraph", para, 0)])
    got = _check(text, spans, chunk_text(text, spans, nodes, max_bytes=64), 64)
    assert "".join(got) == para and all(t.endswith("。") for t in got)


def _sections() -> list[tuple[str, str, int]]:
    return [
        ("heading", "# One", 1),
        ("paragraph", "Alpha text.", 0),
        ("heading", "## One.A", 2),
        ("paragraph", "Beta text.", 0),
        ("heading", "# Two", 1),
        ("paragraph", "Gamma text.", 0),
    ]


def test_top_level_sections_are_not_crossed() -> None:
    text, spans, nodes = _doc(_sections())
    chunks = chunk_text(text, spans, nodes, max_bytes=1000)
    got = _check(text, spans, chunks, 1000, bounds=_top(text, spans, nodes))
    assert got == ["# One\n\nAlpha text.\n\n## One.A\n\nBeta text.", "# Two\n\nGamma text."]
    assert [c.heading_path for c in chunks] == [("One",), ("Two",)]
    (whole,) = chunk_text(text, spans, nodes, max_bytes=1000, within="document")
    assert whole.heading_path == ("One",) and whole.node_ids[0] == DOC


def test_heading_paths_and_headings_open_chunks() -> None:
    blocks = [(k, t + (" and some more words" if k == "paragraph" else ""), n)
              for k, t, n in _sections()]  # fmt: skip
    text, spans, nodes = _doc(blocks)
    chunks = chunk_text(text, spans, nodes, max_bytes=64, within="document")
    got = _check(text, spans, chunks, 64)
    assert not any(t.endswith(("# One", "## One.A", "# Two")) for t in got)
    assert ("One", "One.A") in [c.heading_path for c in chunks]
    assert chunks[-1].heading_path == ("Two",)


def _csv(rows: int) -> tuple[bytes, list[ChunkSpan], dict[bytes, ChunkNode]]:
    """A tabular_worker-like table: the header line is the TABLE's span, a cell span per
    row."""
    lines = ["id\tname\tvalue"] + [f"{i}\tname {i}\t{i * 7}" for i in range(rows)]
    text = "\n".join(lines).encode()
    table = b"T" * 16
    spans = [ChunkSpan(0, len(lines[0]), "heading", (table,))]
    nodes = {table: ChunkNode(("TABLE",))}
    pos = len(lines[0]) + 1
    for i, line in enumerate(lines[1:]):
        node = i.to_bytes(16, "big")
        spans.append(ChunkSpan(pos, pos + len(line), "cell", (node,)))
        nodes[node] = ChunkNode(("TABLE_ROW",))
        pos += len(line) + 1
    return text, spans, nodes


def test_table_rows_get_their_header_repeated() -> None:
    text, spans, nodes = _csv(30)
    chunks = chunk_text(text, spans, nodes, max_bytes=128)
    got = _check(text, spans, chunks, 128)
    assert chunks[0].header is None and got[0].startswith("id\tname\tvalue\n0\t")
    header = text[: text.index(b"\n") + 1]
    for c, t in zip(chunks[1:], got[1:], strict=True):
        assert c.header == (0, len(header))
        assert t.startswith("id\tname\tvalue\n") and t[len(header) :][0].isdigit()
        assert c.node_ids[0] == b"T" * 16  # the header's TABLE node first
    rows = [line for t in got for line in t.split("\n")[1:]]
    assert rows == text.decode().split("\n")[1:]  # every row once, none cut


def test_overlap_starts_at_a_word() -> None:
    paras = [("paragraph", f"Paragraph {i} says something useful here.", 0) for i in range(10)]
    text, spans, nodes = _doc(paras)
    chunks = chunk_text(text, spans, nodes, max_bytes=100, overlap=20)
    _check(text, spans, chunks, 100, overlap=20)
    for a, b in itertools.pairwise(chunks):
        assert a.end - 20 <= b.start < a.end  # it reaches back, at most 20 bytes
        assert text[b.start - 1 : b.start] in (b" ", b"\n")


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["heading", "paragraph"]),
            st.text(alphabet=st.sampled_from("ab é語😀.!? \n"), min_size=1, max_size=150)
            .map(str.strip)
            .filter(bool),
            st.integers(1, 3),
        ),
        max_size=12,
    ),
    st.sampled_from([64, 100, 257]),
    st.sampled_from(["section", "document"]),
)
def test_invariants(blocks: list[tuple[str, str, int]], max_bytes: int, within: str) -> None:
    text, spans, nodes = _doc(blocks)
    chunks = chunk_text(text, spans, nodes, max_bytes=max_bytes, within=within)  # type: ignore[arg-type]
    bounds = _top(text, spans, nodes) if within == "section" else None
    got = _check(text, spans, chunks, max_bytes, bounds=bounds)
    words = text.decode().split()
    assert [w for t in got for w in t.split()] == words  # all of the text, once, in order


_FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"  # 25 bytes, one cluster
_CLUSTERS = [
    _FAMILY,
    "e\u0301",
    "\u1100\u1161\u11a8",
    "हि",
    "🇵🇹",
    "a",
    "日",
    "\U0001f44d\U0001f3fd",
]


def _cluster_bounds(text: bytes) -> set[int]:
    out, off = {0}, 0
    for m in regex.finditer(r"\X", text.decode()):
        off += len(m.group().encode())
        out.add(off)
    return out


@given(
    parts=st.lists(st.sampled_from(_CLUSTERS), min_size=20, max_size=200),
    max_bytes=st.integers(min_value=64, max_value=160),
    overlap=st.integers(min_value=0, max_value=32),
)
def test_cuts_fall_between_grapheme_clusters(
    parts: list[str], max_bytes: int, overlap: int
) -> None:
    text = "".join(parts).encode()
    spans = [ChunkSpan(0, len(text), "paragraph", (DOC,))]
    chunks = chunk_text(text, spans, {DOC: ChunkNode(("PARAGRAPH",))}, max_bytes=max_bytes,
                        overlap=overlap)  # fmt: skip
    bounds = _cluster_bounds(text)
    assert chunks and chunks[-1].end == len(text)
    for c in chunks:
        assert c.start in bounds and c.end in bounds, (c.start, c.end)
        assert c.end - c.start <= max_bytes


def test_a_family_emoji_is_never_cut() -> None:
    text = (_FAMILY * 12).encode()
    spans = [ChunkSpan(0, len(text), "paragraph", (DOC,))]
    for c in chunk_texts(
        text, chunk_text(text, spans, {DOC: ChunkNode(("PARAGRAPH",))}, max_bytes=64)
    ):
        assert c.decode() == _FAMILY * (len(c) // len(_FAMILY.encode()))
