"""Markdown as CommonMark reads it (``text_worker``, :mod:`text_worker.markdown`): a ``#``
line inside a fenced or indented code block is never a SECTION, a code block is one
PARAGRAPH (its fences included) that chunks keep whole when it fits, setext headings are
SECTIONs, and every node's span slices the canonical text exactly."""

from __future__ import annotations

from typing import Any

import text_worker
from telha.domain.chunking import ChunkNode, ChunkSpan, chunk_text, chunk_texts
from workers_common import Job

FENCE = "```python\n# not a heading\n\nx = 1\n\n# still code\n```"
DOC = (
    "Title\n=====\n\nIntro para.\n\n"
    + FENCE
    + "\n\n    # indented code\n\nSub part\n--------\n\n## Atx ##\nunder atx\n\n"
    + "- item one\n\n- item # two\n"
)


def _job(content: str, fmt: str = "markdown") -> Job:
    return Job("id", f"ingest:{fmt}", fmt, "doc.md", content.encode(), None, {}, 0, "t", "o")


def _nodes(out: dict[str, Any]) -> list[tuple[str, Any, str]]:
    text = out["canonicalText"].encode()
    spans = out["spans"]
    return [
        (
            n["labels"][0],
            n["properties"].get("title", n["properties"].get("level")),
            text[spans[n["spanRefs"][0]]["start"] : spans[n["spanRefs"][0]]["end"]].decode(),
        )
        for n in out["nodes"][1:]
    ]


def test_code_blocks_are_never_headings_and_setext_headings_are() -> None:
    out = text_worker.handle(_job(DOC))
    assert _nodes(out) == [
        ("SECTION", "Title", "Title\n====="),
        ("PARAGRAPH", None, "Intro para."),
        ("PARAGRAPH", None, FENCE),
        ("PARAGRAPH", None, "# indented code"),
        ("SECTION", "Sub part", "Sub part\n--------"),
        ("SECTION", "Atx", "## Atx ##"),
        ("PARAGRAPH", None, "under atx"),
        ("PARAGRAPH", None, "- item one"),
        ("PARAGRAPH", None, "- item # two"),
    ]
    levels = [n["properties"]["level"] for n in out["nodes"] if n["labels"] == ["SECTION"]]
    assert levels == [1, 2, 2]
    # The setext level-2 heading and the ATX one hang off the level-1 section.
    sections = {
        i: n["properties"]["title"]
        for i, n in enumerate(out["nodes"])
        if "title" in n["properties"]
    }
    parents = {r["toRef"]: r["fromRef"] for r in out["relationships"]}
    assert {sections[c]: sections.get(p, "doc") for c, p in parents.items() if c in sections} == {
        "Title": "doc",
        "Sub part": "Title",
        "Atx": "Title",
    }


def test_plain_text_is_still_blank_line_blocks() -> None:
    out = text_worker.handle(_job("Title\n=====\n\n```\n# x\n\ny\n```\n", fmt="text"))
    assert [n for n, _, _ in _nodes(out)] == ["PARAGRAPH"] * 3


def test_a_code_block_that_fits_stays_whole_in_a_chunk() -> None:
    body = "\n".join(f"line {i} of the code" for i in range(12))
    text = "# Doc\n\n" + "Some words here. " * 6 + "\n\n```\n" + body + "\n```\n\nAfter.\n"
    out = text_worker.handle(_job(text))
    raw = out["canonicalText"].encode()
    spans = [
        ChunkSpan(s["start"], s["end"], s["kind"], (bytes([i]),))
        for i, s in enumerate(out["spans"])
    ]
    nodes: dict[bytes, ChunkNode] = {}
    for n in out["nodes"]:
        ref = bytes([n["spanRefs"][0]])
        props = n["properties"]
        nodes[ref] = ChunkNode(tuple(n["labels"]), props.get("title"), props.get("level"))
    fence = "```\n" + body + "\n```"
    chunks = chunk_texts(raw, chunk_text(raw, spans, nodes, max_bytes=len(fence) + 40))
    assert any(fence.encode() in c for c in chunks)
    assert all(c.count(b"```") in (0, 2) for c in chunks)
