"""Every language findable, on each engine (docs/architecture.md, "Search: words and
folding"): a text built here in Korean, Japanese, Chinese, Russian, Ukrainian, Greek, Arabic,
Hindi, Turkish, German and Vietnamese, and corpus files (the Korean e-mail, the Greek CSV, the
Korean PDF) are ingested through the real workers into a real ``telha serve``; each word is
found by its own spelling, upper or lower case and without accents where the convention
allows, each ``matches`` range reads back as the whole word, absent words find nothing, and
quotes are located inside words and overlapping, in bytes, code points or UTF-16 units.
The same query set answers the same hits on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import CORPUS
from tests.support.inproc import InProcessServer
from tests.support.languages import LANGUAGES
from tests.support.pg import require_engine
from tests.support.server import write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

#: The built text: one paragraph per language.
TEXT = "\n\n".join(text for text, _, _ in LANGUAGES.values()) + "\n"
#: Corpus files, by what the tests call them.
FILES = {
    "korean_mail": "eml/raw_email.eml",
    "greek_csv": "csv/table-infer-iso-8859-7.csv",
    "korean_pdf": "pdf/normal_4pages.pdf",
}
#: Queries answered by both engines for the comparison.
SHARED_QUERIES = [q for _, present, absent in LANGUAGES.values() for q, _ in present] + [
    q for _, _, absent in LANGUAGES.values() for q in absent
]


def _config(folder: Path, engine: str) -> Path:
    workers = ["text_worker", "tabular_worker", "email_worker", "docling_worker"]
    return write_config(
        folder,
        engine,
        workers={"in_process": workers, "concurrency": 1},
        docling={"timeout_s": 180},
        search={"enabled": True},
    )


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    with InProcessServer(_config(tmp_path_factory.mktemp("languages"), engine)) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _ingest(c: httpx.AsyncClient, fmt: str, name: str, data: bytes, **options: str) -> str:
    body: dict[str, Any] = {
        "format": fmt, "name": name, "contentBase64": base64.b64encode(data).decode(),
    }  # fmt: skip
    if options:
        body["options"] = options
    resp = await c.post("/v1/ingest", json=body)
    assert resp.status_code == 202, resp.text
    job = await wait_job(c, resp.json()["jobId"], "completed", within_s=300)
    return str(job["sourceId"])


@pytest.fixture(scope="module")
async def corpus(
    server: InProcessServer,
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    """One scope holding :data:`TEXT` (``"text"``) and :data:`FILES`."""
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": key}, timeout=120
    ) as c:
        ids = {"text": await _ingest(c, "text", "languages.txt", TEXT.encode())}
        for name, rel in FILES.items():
            path = CORPUS / rel
            # The Greek CSV's encoding is named: detection takes its bytes for cp1251.
            options = {"encoding": "iso-8859-7"} if name == "greek_csv" else {}
            ids[name] = await _ingest(c, path.parent.name, path.name, path.read_bytes(), **options)
        yield c, ids


async def _search(c: httpx.AsyncClient, q: str, **params: str) -> list[dict[str, Any]]:
    resp = await c.get("/v1/search", params={"q": q, "limit": "100", **params})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["hits"])


async def _slice(c: httpx.AsyncClient, hit: dict[str, Any], start: int, end: int) -> str:
    resp = await c.get(
        f"/v1/sources/{hit['sourceId']}/versions/{hit['sourceVersionTx']}/text",
        params={"start": start, "end": end},
    )
    assert resp.status_code == 200, resp.text
    return resp.text


async def _highlighted(c: httpx.AsyncClient, q: str, source_id: str) -> set[str]:
    found = set()
    for hit in await _search(c, q, sourceId=source_id):
        assert hit["matches"], (q, hit)  # every hit says what matched
        for m in hit["matches"]:
            found.add(await _slice(c, hit, m["start"], m["end"]))
    return found


@pytest.mark.parametrize("language", sorted(LANGUAGES))
async def test_each_word_is_found_and_highlighted_whole(
    corpus: tuple[httpx.AsyncClient, dict[str, str]], language: str
) -> None:
    c, ids = corpus
    _, present, absent = LANGUAGES[language]
    for q, word in present:
        assert word in await _highlighted(c, q, ids["text"]), (language, q)
    for q in absent:
        assert await _search(c, q, sourceId=ids["text"]) == [], (language, q)


async def test_corpus_files_are_found_by_their_words(
    corpus: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    c, ids = corpus
    mail = ids["korean_mail"]
    for q, word in [("우리는", "우리는"), ("하나님을", "하나님을"), ("jamis", "Jamis"),
                    ("입니다", "입니다"), ("한국말로", "한국말로")]:  # fmt: skip
        assert word in await _highlighted(c, q, mail), q
    greek = ids["greek_csv"]
    for q, word in [("λεωνιδας", "Λεωνιδας"), ("ΑΛΕΞΑΝΔΡΟΣ", "Αλεξανδρος")]:
        assert word in await _highlighted(c, q, greek), q
    pdf = ids["korean_pdf"]
    for q, word in [("발행처", "발행처"), ("발행인", "발행인"), ("한국표준질병", "한국표준질병"),
                    ("사인분류상의", "사인분류상의"), ("한국표*", "한국표")]:  # fmt: skip
        assert word in await _highlighted(c, q, pdf), q
    assert await _search(c, "한국어", sourceId=pdf) == []


async def test_locate_mid_word_overlapping_and_in_units(
    corpus: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    c, ids = corpus
    text = "Ünïcode buffalo buffalo buffalo bananas.\n"
    source = await _ingest(c, "text", "buffalo.txt", text.encode())
    resp = await c.post("/v1/locate", json={"text": "buffalo buffalo", "sourceId": source})
    assert [(p["start"], p["end"], p["match"]) for p in resp.json()] == [
        (10, 25, "exact"),
        (18, 33, "exact"),
    ]
    resp = await c.post("/v1/locate", json={"text": "ffalo BUF", "sourceId": source})
    assert [(p["start"], p["end"], p["match"]) for p in resp.json()] == [
        (12, 21, "folded"),
        (20, 29, "folded"),
    ]
    # A quote of one word fragment, inside words ("uffal"), ending them ("FFALO"), inside a
    # word with accents ("NÏCO"), overlapping ("ana" in "bananas" twice).
    for quote, places in [
        ("uffal", [(11, 16, "exact"), (19, 24, "exact"), (27, 32, "exact")]),
        ("FFALO", [(12, 17, "folded"), (20, 25, "folded"), (28, 33, "folded")]),
        ("NÏCO", [(2, 7, "folded")]),
        ("ana", [(35, 38, "exact"), (37, 40, "exact")]),
    ]:
        resp = await c.post("/v1/locate", json={"text": quote, "sourceId": source})
        assert [(p["start"], p["end"], p["match"]) for p in resp.json()] == places, quote
    # Inside a Korean word of the built text, without naming the source.
    resp = await c.post("/v1/locate", json={"text": "국어"})
    found = [await _slice(c, p, p["start"], p["end"]) for p in resp.json()]
    assert "국어" in found and set(found) == {"국어"}
    # The same places in code points and UTF-16 units ("Ü", "ï": 2 bytes, 1 unit each).
    for units in ("codepoint", "utf16"):
        resp = await c.post(
            f"/v1/locate?units={units}", json={"text": "buffalo buffalo", "sourceId": source}
        )
        assert [(p["start"], p["end"]) for p in resp.json()] == [(8, 23), (16, 31)]
    # A sentence of the Korean e-mail, cut inside its first and last words.
    quote = "분의 마찬가지로, 우리"
    resp = await c.post("/v1/locate", json={"text": quote, "sourceId": ids["korean_mail"]})
    (place,) = resp.json()
    assert await _slice(c, place, place["start"], place["end"]) == quote
    resp = await c.post("/v1/locate?units=bogus", json={"text": "buffalo"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "INVALID_REQUEST"


async def test_search_answers_offsets_in_the_units_asked(
    corpus: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    c, ids = corpus
    only = {"sourceId": ids["text"], "label": "PARAGRAPH"}
    (hit,) = await _search(c, "한국어", **only)
    (cp,) = await _search(c, "한국어", **only, units="codepoint")
    (u16,) = await _search(c, "한국어", **only, units="utf16")
    raw = TEXT.encode()
    (m,) = hit["matches"]
    assert raw[m["start"] : m["end"]].decode() == "한국어"
    at = TEXT.index("한국어")
    assert cp["matches"] == u16["matches"] == [{"start": at, "end": at + 3}]
    assert cp["start"] == len(raw[: hit["start"]].decode())
    resp = await c.get("/v1/search", params={"q": "한국어", "units": "bogus"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "INVALID_REQUEST"
    assert "units" in resp.json()["error"]["message"]


async def _answers(folder: Path, engine: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every :data:`SHARED_QUERIES` answer of a fresh server on ``engine`` holding
    :data:`TEXT`: per query, the hits' ``(start, end, kind, matches)`` sorted."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    config = write_config(folder, engine, workers={"in_process": ["text_worker"]},
                          search={"enabled": True})  # fmt: skip
    with InProcessServer(config) as proc:
        key = proc.create_key("compare", "org")
        async with httpx.AsyncClient(
            base_url=proc.base_url, headers={"x-api-key": key}, timeout=120
        ) as c:
            await _ingest(c, "text", "languages.txt", TEXT.encode())
            for q in SHARED_QUERIES:
                hits = await _search(c, q)
                out[q] = sorted(
                    (h["start"], h["end"], h["kind"], tuple((m["start"], m["end"])
                     for m in h["matches"]))
                    for h in hits
                )  # fmt: skip
        assert proc.stop() == 0, proc.log_text()
    return out


async def test_sqlite_and_postgres_answer_the_same_hits(tmp_path: Path) -> None:
    require_engine("postgres")
    (tmp_path / "s").mkdir()
    (tmp_path / "p").mkdir()
    sqlite = await _answers(tmp_path / "s", "sqlite")
    postgres = await _answers(tmp_path / "p", "postgres")
    assert sum(len(v) for v in sqlite.values()) > len(SHARED_QUERIES) // 2  # not all empty
    assert sqlite == postgres
