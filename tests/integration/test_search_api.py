"""Full-text search and quote location against a real ``telha serve`` on each engine
(docs/rest-api.md, "Search" and "Locate a quote"): corpus files ingested through the real
workers are found by their words (the Zen of Python in a PDF, a row of ``countries.csv`` by
its country, a sentence of the ISO-2022-JP e-mail, the Chinese ``.msg``), every match's byte
range slices the canonical text to a matched word; accents and case fold; a quote copied
from a PDF is located to its bytes (``exact`` false when only whitespace differed); a
superseded, retired or erased version leaves the index and ``telha check`` agrees; another
scope's text is never returned; bad input answers 400 naming the parameter."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from telha.client import AsyncTelha, InvalidRequest
from telha.domain.search_text import fold
from tests.conftest import CORPUS
from tests.support.inproc import InProcessServer
from tests.support.server import telha_check, write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

#: Corpus files the module ingests once, by what the tests call them.
FILES = {
    "zen": "pdf/zen_of_python_corrupted.pdf",
    "pdf": "pdf/multi_page.pdf",
    "countries": "csv/countries.csv",
    "japanese": "eml/japanese_iso_2022.eml",
    "chinese": "msg/testMSG_chinese.msg",
}


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("search-api")
    workers = ["text_worker", "tabular_worker", "email_worker", "docling_worker"]
    config = write_config(
        folder,
        engine,
        workers={"in_process": workers, "concurrency": 1},
        docling={"timeout_s": 120},
        search={"enabled": True},
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _client(server: InProcessServer) -> httpx.AsyncClient:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    return httpx.AsyncClient(base_url=server.base_url, headers={"x-api-key": key}, timeout=120)


@pytest.fixture
async def client(server: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
    async with await _client(server) as c:
        yield c


@pytest.fixture(scope="module")
async def corpus(
    server: InProcessServer,
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    """One scope with the corpus files of :data:`FILES` ingested: ``(client, {name: sourceId})``."""
    async with await _client(server) as c:
        ids = {}
        for name, rel in FILES.items():
            path = CORPUS / rel
            resp = await c.post(
                "/v1/ingest",
                json={
                    "format": path.parent.name,
                    "name": path.name,
                    "contentBase64": base64.b64encode(path.read_bytes()).decode(),
                },
            )
            assert resp.status_code == 202, resp.text
            job = await wait_job(c, resp.json()["jobId"], "completed", "dead", within_s=120)
            assert job["state"] == "completed", job
            ids[name] = str(job["sourceId"])
        yield c, ids


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def _text(c: httpx.AsyncClient, hit: dict[str, Any], start: int, end: int) -> str:
    resp = await c.get(
        f"/v1/sources/{hit['sourceId']}/versions/{hit['sourceVersionTx']}/text",
        params={"start": start, "end": end},
    )
    assert resp.status_code == 200, resp.text
    return resp.text


async def _search(c: httpx.AsyncClient, q: str, **params: Any) -> list[dict[str, Any]]:
    resp = await c.get("/v1/search", params={"q": q, **params})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["hits"])


def _folded(text: str) -> str:
    return "".join(fold(c) if not c.isspace() else " " for c in text)


@pytest.mark.parametrize(
    ("what", "q", "words"),
    [
        ("zen", "better than ugly", ["better", "than", "ugly"]),
        ("zen", '"beautiful is better"', ["beautiful is better"]),
        ("zen", "explic*", ["explicit", "explicitly"]),
        ("countries", "Germany", ["germany"]),
        ("japanese", "すみません", ["すみません"]),
        ("chinese", "中文測試", ["中文測試"]),
    ],
)
async def test_corpus_words_are_found_with_exact_byte_ranges(
    corpus: tuple[httpx.AsyncClient, dict[str, str]], what: str, q: str, words: list[str]
) -> None:
    c, ids = corpus
    hits = await _search(c, q)
    mine = [h for h in hits if h["sourceId"] == ids[what]]
    assert mine, hits
    # Every hit of every source: each match slices the canonical text to a matched word.
    for hit in hits:
        span = await _text(c, hit, hit["start"], hit["end"])
        assert hit["matches"], hit
        for m in hit["matches"]:
            assert hit["start"] <= m["start"] < m["end"] <= hit["end"]
            word = await _text(c, hit, m["start"], m["end"])
            assert word in span
            folded = _folded(word)
            assert folded in words or any(folded.startswith(w.rstrip("*")) for w in words), word
        assert hit["snippet"] and hit["snippet"].strip("…")[:20] in span
    top = mine[0]
    assert top["name"] == FILES[what].split("/")[1] and top["nodeIds"] and top["labels"]


async def test_a_country_row_by_its_name_filters_and_geometry(
    corpus: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    c, ids = corpus
    (row,) = await _search(c, "germany", format="csv", label="TABLE_ROW")
    assert row["sourceId"] == ids["countries"] and "TABLE_ROW" in row["labels"]
    assert "Germany" in await _text(c, row, row["start"], row["end"])
    assert await _search(c, "germany", format="pdf") == []
    assert await _search(c, "germany", sourceId=ids["zen"]) == []
    # A PDF paragraph carries its page and box.
    (para, *_) = await _search(c, '"readability counts"', label="PARAGRAPH")
    assert para["page"] == 1 and len(para["bbox"]) == 4


async def test_accents_and_case_fold(client: httpx.AsyncClient) -> None:
    text = "Relatório Anual\n\nO RELATÓRIO foi aprovado em São Paulo.\n"
    resp = await client.post(
        "/v1/ingest", json={"format": "text", "name": "rel.txt", "content": text}
    )
    job = await wait_job(client, resp.json()["jobId"], "completed", within_s=60)
    for q in ("relatorio", "RELATÓRIO", "relatório", "sao paulo", "SÃO*"):
        hits = await _search(client, q)
        assert {h["sourceId"] for h in hits} == {job["sourceId"]}, q
        for h in hits:
            for m in h["matches"]:
                word = await _text(client, h, m["start"], m["end"])
                assert fold(word) in ("relatorio", "sao", "paulo"), word
    assert await _search(client, "relatorios") == []


async def test_locate_a_sentence_copied_from_a_pdf(
    corpus: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    c, ids = corpus
    sentence = (
        "The concept of the word processor predates modern computers and has evolved"
        " through several technological milestones."
    )
    resp = await c.post("/v1/locate", json={"text": sentence})
    assert resp.status_code == 200, resp.text
    (place,) = resp.json()
    assert place["sourceId"] == ids["pdf"] and place["exact"] is True and place["nodeIds"]
    assert place["match"] == "exact"
    assert await _text(c, place, place["start"], place["end"]) == sentence
    # Copied with its line breaks and doubled spaces: the same bytes, found after folding.
    messy = sentence.replace(" of the ", " of\r\nthe  ").replace("modern ", "modern\t ")
    resp = await c.post("/v1/locate", json={"text": messy, "sourceId": ids["pdf"]})
    (loose,) = resp.json()
    assert (loose["start"], loose["end"], loose["exact"]) == (place["start"], place["end"], False)
    assert loose["match"] == "folded"
    # Case differs: the same place, after folding.
    resp = await c.post("/v1/locate", json={"text": sentence.upper()})
    (upper,) = resp.json()
    assert (upper["start"], upper["end"]) == (place["start"], place["end"])
    assert upper["match"] == "folded"
    # Another source named: nothing there.
    resp = await c.post("/v1/locate", json={"text": sentence, "sourceId": ids["zen"]})
    assert resp.json() == []


async def test_another_scope_never_sees_the_text(
    server: InProcessServer, corpus: tuple[httpx.AsyncClient, dict[str, str]]
) -> None:
    c, ids = corpus
    assert await _search(c, "ugly")
    async with await _client(server) as other:
        assert await _search(other, "ugly") == []
        assert await _search(other, "ugly", sourceId=ids["zen"]) == []
        resp = await other.post("/v1/locate", json={"text": "Beautiful is better than ugly."})
        assert resp.status_code == 200 and resp.json() == []


async def _ingest_text(c: httpx.AsyncClient, name: str, text: str) -> dict[str, Any]:
    resp = await c.post("/v1/ingest", json={"format": "text", "name": name, "content": text})
    assert resp.status_code == 202, resp.text
    job = await wait_job(c, resp.json()["jobId"], "completed", within_s=60)
    return dict(job)


async def test_superseded_retired_and_erased_versions_leave_the_index(
    server: InProcessServer, client: httpx.AsyncClient
) -> None:
    job = await _ingest_text(client, "notes.txt", "Alphaword one.\n\nShared line.\n")
    source = job["sourceId"]
    assert len(await _search(client, "alphaword", label="PARAGRAPH")) == 1
    await _ingest_text(client, "notes.txt", "Betaword two.\n\nShared line.\n")
    assert await _search(client, "alphaword", label="PARAGRAPH") == []
    (beta,) = await _search(client, "betaword", label="PARAGRAPH")
    versions = (await client.get(f"/v1/sources/{source}")).json()["versions"]
    assert beta["sourceVersionTx"] == versions[0]["sourceVersionTx"]
    assert (
        len(await _search(client, '"shared line"', label="PARAGRAPH")) == 1
    )  # one current version only
    resp = await client.delete(f"/v1/sources/{source}")
    assert resp.status_code == 200, resp.text
    assert await _search(client, "betaword") == []
    await _ingest_text(client, "notes.txt", "Gammaword three.\n")  # current again
    assert len(await _search(client, "gammaword", label="PARAGRAPH")) == 1
    other = (await _ingest_text(client, "erase-me.txt", "Deltaword four.\n"))["sourceId"]
    assert len(await _search(client, "deltaword", label="PARAGRAPH")) == 1
    resp = await client.post(f"/v1/sources/{other}/erase", json={"reason": "test"})
    assert resp.status_code == 200, resp.text
    assert await _search(client, "deltaword") == []
    resp = await client.post("/v1/locate", json={"text": "Deltaword four."})
    assert resp.json() == []
    check = telha_check(server.config)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "search_index" in check.stdout


async def test_pages_follow_the_cursor(client: httpx.AsyncClient) -> None:
    text = "\n\n".join(f"Pagedword paragraph number {i}." for i in range(7)) + "\n"
    await _ingest_text(client, "paged.txt", text)
    seen: list[tuple[int, int]] = []
    cursor = None
    for _ in range(10):
        params: dict[str, Any] = {"q": "pagedword", "limit": 3}
        if cursor:
            params["cursor"] = cursor
        body = (await client.get("/v1/search", params=params)).json()
        seen += [(h["start"], h["end"]) for h in body["hits"] if "PARAGRAPH" in h["labels"]]
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 7


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({}, "q"),
        ({"q": ""}, "q"),
        ({"q": "   "}, "q"),
        ({"q": "x" * 1001}, "q"),
        ({"q": '"unbalanced'}, "quotes"),
        ({"q": "*"}, "'*'"),
        ({"q": "a *"}, "'*'"),
        ({"q": "NEAR(a b"}, "parenthesis"),
        ({"q": "NEAR("}, "parenthesis"),
        ({"q": "a)"}, "parenthesis"),
        ({"q": "--"}, "q"),
        ({"q": "a", "limit": "0"}, "limit"),
        ({"q": "a", "limit": "101"}, "limit"),
        ({"q": "a", "limit": "x"}, "limit"),
        ({"q": "a", "cursor": "bogus"}, "cursor"),
        ({"q": "a", "sourceId": "nope"}, "sourceId"),
        ({"q": "a", "format": "exe"}, "format"),
        ({"q": "a", "label": "lower"}, "label"),
        ({"q": "a", "asOf": "1"}, "asOf"),
        ({"q": "a", "asOf": "-1"}, "asOf"),
    ],
)
async def test_bad_search_input_answers_400(
    client: httpx.AsyncClient, params: dict[str, str], named: str
) -> None:
    resp = await client.get("/v1/search", params=params)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "INVALID_REQUEST" and named in error["message"], error


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b"{}", "text"),
        (b'{"text": ""}', "text"),
        (b'{"text": "  \\n "}', "text"),
        (b'{"text": "--"}', "text"),
        (b'{"text": 3}', "text"),
        (b'{"text": "a", "limit": 0}', "limit"),
        (b'{"text": "a", "limit": 1001}', "limit"),
        (b'{"text": "a", "sourceId": "x"}', "sourceId"),
        (b'{"text": "a", "other": 1}', "other"),
        (b"not json", "JSON"),
    ],
)
async def test_bad_locate_input_answers_400(
    client: httpx.AsyncClient, body: bytes, named: str
) -> None:
    resp = await client.post(
        "/v1/locate", content=body, headers={"content-type": "application/json"}
    )
    assert resp.status_code == 400, resp.text
    assert named in resp.json()["error"]["message"], resp.text
    resp = await client.post("/v1/locate", json={"text": "x" * 10_001})
    assert resp.status_code == 400 and "text" in resp.json()["error"]["message"]


async def test_the_client_searches_and_locates(server: InProcessServer) -> None:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    async with AsyncTelha(server.base_url, key, timeout=60) as telha:
        r = await telha.ingest("text", "client.txt", content="Clientword here.\n\nAnd more.\n")
        assert r.job_id is not None
        await telha.wait(r.job_id, timeout=60)
        res = await telha.search("clientword", label="PARAGRAPH")
        (hit,) = res.hits
        assert res.next_cursor is None and hit.source_id == r.source_id
        (m,) = hit.matches
        word = await telha.text(hit.source_id, hit.source_version_tx, start=m.start, end=m.end)
        assert word == "Clientword"
        places = await telha.locate("Clientword  here.")
        assert [(p.start, p.end, p.exact) for p in places] == [(0, 16, False)]
        with pytest.raises(InvalidRequest, match="quotes"):
            await telha.search('"open')
        with pytest.raises(InvalidRequest, match="text"):
            await telha.locate("   ")
