"""Retrieval chunks and offsets in other units against a real ``telha serve`` on each
engine, through the real workers (docs/rest-api.md, "Chunks" and "Offsets in other
units"): a markdown text with é, CJK and an emoji, the corpus's ``countries.csv`` (header
repeated), ``multi_page.pdf`` (pages) and ``word_sample.docx`` (sections). Every chunk's
text is its canonical slice (after a repeated header) and at most ``maxBytes``; pages join
to the same chunks; converted offsets slice the same text in Python and in UTF-16; bad
input answers 400 naming the parameter, another scope's version 404."""

from __future__ import annotations

import base64
from typing import Any

import anyio
import pytest

from telha.client import AsyncTelha, InvalidRequest, NotFound
from tests.conftest import CORPUS
from tests.integration.versions_support import Scoped, scoped
from tests.support.server import ServerProcess

pytestmark = pytest.mark.anyio

MARKDOWN = (
    "# Café\n\nThe café serves crème brûlée. It opens at nine.\n\n"
    "## 日本語\n\n東京は日本の首都です。大阪は大きい都市です。\n\n"
    "# Emoji 😀\n\nSmiles 😀 and waves 👋 are astral characters.\n"
)


async def _ingest(s: Scoped, fmt: str, name: str, raw: bytes) -> tuple[str, int]:
    job = await s.ingest(fmt, name, raw, within_s=300)
    source = str(job["sourceId"])
    return source, int((await s.versions(source))[-1]["sourceVersionTx"])


async def _chunks(s: Scoped, source: str, tx: int, **params: Any) -> list[dict[str, Any]]:
    """Every chunk, page by page (``limit`` as given)."""
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        resp = await s.client.get(f"/v1/sources/{source}/versions/{tx}/chunks", params=query)
        assert resp.status_code == 200, resp.text
        page = resp.json()
        out += page["chunks"]
        cursor = page["nextCursor"]
        if cursor is None:
            return out


async def _text(s: Scoped, source: str, tx: int) -> bytes:
    resp = await s.client.get(f"/v1/sources/{source}/versions/{tx}/text")
    assert resp.status_code == 200
    return resp.content


async def _check(s: Scoped, source: str, tx: int, max_bytes: int) -> list[dict[str, Any]]:
    """The chunks of a version with ``maxBytes``, checked against its text and spans."""
    text = await _text(s, source, tx)
    spans = (await s.client.get(f"/v1/sources/{source}/versions/{tx}/spans")).json()["spans"]
    chunks = await _chunks(s, source, tx, maxBytes=max_bytes)
    assert chunks and [c["index"] for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        body = text[c["start"] : c["end"]]
        assert c["ranges"][0] == [c["start"], c["end"]]
        if len(c["ranges"]) == 2:
            h0, h1 = c["ranges"][1]
            assert c["text"].encode() == text[h0:h1] + body
        else:
            assert c["text"].encode() == body
        assert len(c["text"].encode()) <= max_bytes
        for sp in spans:
            if sp["end"] - sp["start"] <= max_bytes and sp["kind"] != "body":
                assert not sp["start"] < c["start"] < sp["end"], (c, sp)
                assert not sp["start"] < c["end"] < sp["end"], (c, sp)
    assert await _chunks(s, source, tx, maxBytes=max_bytes, limit=1) == chunks  # paging
    return chunks


async def test_markdown_chunks_sections_and_units(server: ServerProcess) -> None:
    async with scoped(server) as s:
        source, tx = await _ingest(s, "markdown", "notes/units.md", MARKDOWN.encode())
        chunks = await _check(s, source, tx, 64)
        assert {tuple(c["headingPath"]) for c in chunks} >= {("Café",), ("Café", "日本語")}
        assert all(c["pages"] is None for c in chunks)
        whole = await _chunks(s, source, tx, maxBytes=4096)
        assert [c["headingPath"] for c in whole] == [["Café"], ["Emoji 😀"]]  # not crossed
        (doc,) = await _chunks(s, source, tx, maxBytes=4096, within="document")
        text = (await _text(s, source, tx)).decode()
        assert doc["text"] == text == MARKDOWN  # the body span fits: the whole document
        wide = text.encode("utf-16-le")
        for units in ("codepoint", "utf16"):
            converted = await _chunks(s, source, tx, maxBytes=64, units=units)
            assert [c["text"] for c in converted] == [c["text"] for c in chunks]
            for c in converted:
                a, b = c["start"], c["end"]
                got = text[a:b] if units == "codepoint" else wide[2 * a : 2 * b].decode("utf-16-le")
                assert got == c["text"]


async def test_offsets_in_units_on_spans_text_and_nodes(server: ServerProcess) -> None:
    async with scoped(server) as s:
        source, tx = await _ingest(s, "markdown", "notes/offsets.md", MARKDOWN.encode())
        text = (await _text(s, source, tx)).decode()
        wide = text.encode("utf-16-le")
        url = f"/v1/sources/{source}/versions/{tx}"
        by_bytes = (await s.client.get(f"{url}/spans")).json()["spans"]
        for units, cut in (
            ("codepoint", lambda a, b: text[a:b]),
            ("utf16", lambda a, b: wide[2 * a : 2 * b].decode("utf-16-le")),
        ):
            spans = (await s.client.get(f"{url}/spans", params={"units": units})).json()["spans"]
            assert len(spans) == len(by_bytes)
            for sp, raw in zip(spans, by_bytes, strict=True):
                expected = text.encode()[raw["start"] : raw["end"]].decode()
                assert cut(sp["start"], sp["end"]) == expected
                resp = await s.client.get(
                    f"{url}/text", params={"start": sp["start"], "end": sp["end"], "units": units}
                )
                assert resp.status_code == 200 and resp.text == expected
            emoji = next(sp for sp in spans if "👋" in cut(sp["start"], sp["end"]))
            node_id = emoji["linkedNodes"][0]
            node = (await s.client.get(f"/v1/nodes/{node_id}", params={"units": units})).json()
            (prov,) = node["provenance"]["spans"]
            assert (prov["start"], prov["end"]) == (emoji["start"], emoji["end"])
            assert cut(prov["start"], prov["end"]) == prov["text"]
            listed = (
                await s.client.get("/v1/nodes", params={"sourceId": source, "units": units})
            ).json()["nodes"]
            for n in listed:
                for p in n["provenance"]["spans"]:
                    assert cut(p["start"], p["end"]) == p["text"]
        # The emoji's two UTF-16 halves: a bound between them is no character boundary.
        at = text.index("👋")
        u16 = len(text[:at].encode("utf-16-le")) // 2
        bad = await s.client.get(f"{url}/text", params={"start": u16 + 1, "units": "utf16"})
        assert bad.status_code == 400 and "surrogate" in bad.json()["error"]["message"]


async def test_countries_csv_rows_repeat_their_header(server: ServerProcess) -> None:
    async with scoped(server) as s:
        raw = (CORPUS / "csv" / "countries.csv").read_bytes()
        source, tx = await _ingest(s, "csv", "csv/countries.csv", raw)
        chunks = await _check(s, source, tx, 96)
        text = await _text(s, source, tx)
        header = text[: text.index(b"\n") + 1].decode()
        assert len(chunks) >= 2 and chunks[0]["text"].startswith(header)
        for c in chunks[1:]:
            assert c["ranges"][1] == [0, len(header.encode())]
            assert c["text"].startswith(header)
        rows = [line for c in chunks for line in c["text"].split("\n")[1:]]
        assert rows == text.decode().split("\n")[1:]  # each row whole, once
        assert any("Germany" in c["text"] for c in chunks)


async def test_pdf_chunks_carry_pages(server: ServerProcess) -> None:
    async with scoped(server) as s:
        raw = (CORPUS / "pdf" / "multi_page.pdf").read_bytes()
        source, tx = await _ingest(s, "pdf", "pdf/multi_page.pdf", raw)
        chunks = await _check(s, source, tx, 1024)
        pages = [c["pages"] for c in chunks]
        assert all(p is not None and 1 <= p[0] <= p[1] for p in pages)
        assert pages[0][0] == 1 and pages[-1][1] >= 5 and pages == sorted(pages)
        first = chunks[len(chunks) // 2]
        for node_id in first["nodeIds"]:
            node = (await s.client.get(f"/v1/nodes/{node_id}")).json()
            page = node["properties"].get("page")
            if page is not None:
                assert first["pages"][0] <= page <= first["pages"][1]


async def test_docx_chunks_follow_sections(server: ServerProcess) -> None:
    async with scoped(server) as s:
        raw = (CORPUS / "docx" / "word_sample.docx").read_bytes()
        source, tx = await _ingest(s, "docx", "docx/word_sample.docx", raw)
        chunks = await _check(s, source, tx, 256)
        paths = [c["headingPath"] for c in chunks]
        assert ["Swimming in the lake"] in paths
        sections = (
            await s.client.get("/v1/nodes", params={"sourceId": source, "label": "SECTION"})
        ).json()["nodes"]
        titles = {n["properties"]["title"] for n in sections}
        assert {t for p in paths for t in p} <= titles


async def test_bad_input_and_other_scopes(server: ServerProcess) -> None:
    async with scoped(server) as s:
        source, tx = await _ingest(s, "markdown", "notes/bad.md", MARKDOWN.encode())
        url = f"/v1/sources/{source}/versions/{tx}"
        cursor = base64.urlsafe_b64encode(b"1:2048:0:document").decode().rstrip("=")
        for params, name in (
            ({"maxBytes": 63}, "maxBytes"),
            ({"maxBytes": 1048577}, "maxBytes"),
            ({"maxBytes": "abc"}, "maxBytes"),
            ({"maxBytes": 100, "overlap": 51}, "overlap"),
            ({"within": "page"}, "within"),
            ({"units": "chars"}, "units"),
            ({"limit": 0}, "limit"),
            ({"limit": 1001}, "limit"),
            ({"cursor": "nope"}, "cursor"),
            ({"cursor": cursor}, "cursor"),  # made for other parameters
        ):
            resp = await s.client.get(f"{url}/chunks", params=params)
            assert resp.status_code == 400, (params, resp.text)
            assert resp.json()["error"]["code"] == "INVALID_REQUEST"
            assert name in resp.json()["error"]["message"]
        for path in ("spans", "text", "chunks"):
            resp = await s.client.get(f"{url}/{path}", params={"units": "bytes"})
            assert resp.status_code == 400 and "units" in resp.text
        node = (await s.client.get("/v1/nodes", params={"sourceId": source})).json()["nodes"][0]
        resp = await s.client.get(f"/v1/nodes/{node['nodeId']}", params={"units": "x"})
        assert resp.status_code == 400 and "units" in resp.text
        assert (await s.client.get(f"/v1/sources/{source}/versions/1/chunks")).status_code == 404
        async with scoped(server) as other:
            for path in ("chunks", "spans", "text"):
                resp = await other.client.get(f"{url}/{path}", params={"units": "utf16"})
                assert resp.status_code == 404, resp.text
            assert (await other.client.get(f"/v1/nodes/{node['nodeId']}")).status_code == 404


async def test_chunks_of_an_erased_version_are_gone(server: ServerProcess) -> None:
    async with scoped(server) as s:
        source, tx = await _ingest(s, "markdown", "notes/erase.md", MARKDOWN.encode())
        assert await _chunks(s, source, tx, maxBytes=64)  # cut, and kept by the front
        resp = await s.client.post(f"/v1/sources/{source}/erase", json={"reason": "test"})
        assert resp.status_code == 200, resp.text
        for _ in range(200):
            got = await s.client.get(f"/v1/sources/{source}/versions/{tx}/chunks")
            if got.status_code == 410:
                break
            await anyio.sleep(0.05)
        assert got.status_code == 410 and got.json()["error"]["code"] == "CONTENT_ERASED"


async def test_client_chunks_iterates_every_page(server: ServerProcess) -> None:
    async with scoped(server) as s:
        raw = (CORPUS / "csv" / "countries.csv").read_bytes()
        source, tx = await _ingest(s, "csv", "csv/countries.csv", raw)
        key = s.client.headers["x-api-key"]
        async with AsyncTelha(server.base_url, key) as telha:
            got = [c async for c in telha.chunks(source, tx, max_bytes=96, page_size=1)]
            assert [c.index for c in got] == list(range(len(got))) and len(got) >= 2
            by_rest = await _chunks(s, source, tx, maxBytes=96)
            assert [c.text for c in got] == [c["text"] for c in by_rest]
            assert got[1].ranges[1] == by_rest[1]["ranges"][1]
            wide = [c async for c in telha.chunks(source, tx, max_bytes=96, units="utf16")]
            assert [c.start for c in wide] == [c.start for c in got]  # ASCII: the same
            spans = await telha.spans(source, tx, units="codepoint")
            assert await telha.text(source, tx, spans[1].start, spans[1].end, units="codepoint")
            with pytest.raises(InvalidRequest, match="maxBytes"):
                await telha.chunks_page(source, tx, max_bytes=10)
            with pytest.raises(NotFound):
                await telha.chunks_page(source, 1)
