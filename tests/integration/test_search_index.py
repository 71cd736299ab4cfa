"""The full-text index's life beyond single requests, on each engine (docs/architecture.md,
"Search"): an erased text leaves no trace of its words in the database even after it was
indexed, superseded (its words left in FTS5's segments) and then erased — the raw database
files (SQLite) or live rows (PostgreSQL) hold the marker in no form, folded lowercase
included, nor (SQLite) any two neighbouring characters of a Hangul marker, which the
substring index's trigrams would hold; ``[search] enabled = false`` answers 404 and keeps
no index, and switching it on builds the index from the current versions at start, which
``telha check`` accepts."""

from __future__ import annotations

import json
import random
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.integration.test_erasure import _dsn_of, files_holding, rows_holding
from tests.support.inproc import InProcessServer
from tests.support.server import telha_check, write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio


async def _ingest(c: httpx.AsyncClient, name: str, text: str) -> dict[str, Any]:
    resp = await c.post("/v1/ingest", json={"format": "text", "name": name, "content": text})
    assert resp.status_code == 202, resp.text
    return dict(await wait_job(c, resp.json()["jobId"], "completed", within_s=60))


async def _hits(c: httpx.AsyncClient, q: str) -> list[dict[str, Any]]:
    resp = await c.get("/v1/search", params={"q": q})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["hits"])


def _client(proc: InProcessServer, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=proc.base_url, headers={"x-api-key": key}, timeout=60)


async def _located(c: httpx.AsyncClient, text: str) -> list[dict[str, Any]]:
    resp = await c.post("/v1/locate", json={"text": text})
    assert resp.status_code == 200, resp.text
    return list(resp.json())


def _pairs(word: str) -> list[bytes]:
    """Every two neighbouring characters of ``word``, UTF-8: what is left of a trigram of it
    in an FTS5 segment whose previous term shares its first character."""
    return [word[i : i + 2].encode() for i in range(len(word) - 1)]


def _pairs_in_files(folder: Path, word: str) -> list[str]:
    """``file: pair`` for each of :func:`_pairs` of ``word`` a file under ``folder`` holds."""
    found = []
    for path in (p for p in sorted(folder.rglob("*")) if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.name}: {p.decode()}" for p in _pairs(word) if p in data]
    return found


async def test_erased_words_leave_no_trace(tmp_path: Path, engine: str) -> None:
    marker = f"Mark{uuid.uuid4().hex}Z"
    # Ten different Hangul syllables: one word, its trigrams no other text shares, so the
    # substring index's terms of it are stored whole but for their first character.
    hangul = "".join(map(chr, random.sample(range(0xAC00, 0xD7A4), 10)))
    config = write_config(
        tmp_path, engine, workers={"in_process": ["text_worker"]}, search={"enabled": True}
    )
    with InProcessServer(config) as proc:
        dsn = _dsn_of(proc)
        async with _client(proc, proc.create_key(f"t-{uuid.uuid4()}", "org")) as c:
            # Indexed, then superseded (its rows leave the index; FTS5 keeps its words in a
            # segment), then the whole source erased; a second source erased while current.
            first = await _ingest(c, "old.txt", f"Patient {marker} seen {hangul}.\n\nOther text.\n")
            assert len(await _hits(c, marker.lower())) == 2  # paragraph and document
            assert len(await _located(c, hangul[1:-1])) == 1  # the substring index
            await _ingest(c, "old.txt", "Other text only.\n")
            assert await _hits(c, marker) == []
            second = await _ingest(c, "current.txt", f"Again {marker} here {hangul}.\n")
            assert len(await _located(c, hangul[2:])) == 1
            kept = await _ingest(c, "kept.txt", "Other words stay.\n")
            assert await _hits(c, marker)
            for source in (first["sourceId"], second["sourceId"]):
                resp = await c.post(f"/v1/sources/{source}/erase", json={"reason": "GDPR"})
                assert resp.status_code == 200, resp.text
            assert await _hits(c, marker) == []
            assert await _located(c, hangul[2:]) == []
            assert await _located(c, marker[2:-2]) == []
            assert {h["sourceId"] for h in await _hits(c, "other")} == {kept["sourceId"]}
        check = telha_check(config)
        assert check.returncode == 0, check.stdout + check.stderr
        forms = [marker, marker.lower(), marker.upper(), hangul]
        if dsn:
            for form in forms:
                assert await rows_holding(dsn, form.encode()) == [], form
        assert proc.stop() == 0, proc.log_text()
        if not dsn:
            for form in forms:
                assert files_holding(tmp_path, form.encode()) == [], form
            assert _pairs_in_files(tmp_path, hangul) == []


async def test_search_disabled_then_enabled_builds_the_index(tmp_path: Path, engine: str) -> None:
    config = write_config(
        tmp_path, engine, workers={"in_process": ["text_worker"]}, search={"enabled": False}
    )
    storage = {k: v for k, v in (line.split(" = ", 1) for line in _section(config, "storage"))}
    with InProcessServer(config) as proc:
        key = proc.create_key("t", "o")
        async with _client(proc, key) as c:
            job = await _ingest(c, "a.txt", "Kept while search was off.\n")
            resp = await c.get("/v1/search", params={"q": "kept"})
            assert resp.status_code == 404 and "disabled" in resp.json()["error"]["message"]
            resp = await c.post("/v1/locate", json={"text": "Kept"})
            assert resp.status_code == 404
        check = telha_check(config)
        assert check.returncode == 0, check.stdout + check.stderr
        assert proc.stop() == 0, proc.log_text()
    on = write_config(
        tmp_path,
        engine,
        storage={k: json.loads(v) for k, v in storage.items()},
        workers={"in_process": ["text_worker"]},
        search={"enabled": True},
    )
    with InProcessServer(on) as proc:
        async with _client(proc, key) as c:
            hits = await _hits(c, "kept search")
            assert {h["sourceId"] for h in hits} == {job["sourceId"]}
            await _ingest(c, "b.txt", "Written while search is on.\n")
            assert len(await _hits(c, "written")) == 2  # paragraph and document
        check = telha_check(on)
        assert check.returncode == 0, check.stdout + check.stderr
        assert proc.stop() == 0, proc.log_text()


def _section(config: Path, name: str) -> list[str]:
    """The ``key = value`` lines of ``[name]`` in a config written by ``write_config``."""
    lines = config.read_text().splitlines()
    start = lines.index(f"[{name}]") + 1
    out = []
    for line in lines[start:]:
        if line.startswith("["):
            break
        out.append(line)
    return out


async def test_check_finds_an_index_out_of_step(tmp_path: Path, engine: str) -> None:
    config = write_config(
        tmp_path, engine, workers={"in_process": ["text_worker"]}, search={"enabled": True}
    )
    with InProcessServer(config) as proc:
        dsn = _dsn_of(proc)
        async with _client(proc, proc.create_key("t", "o")) as c:
            await _ingest(c, "a.txt", "First paragraph.\n\nSecond paragraph.\n")
            assert len(await _hits(c, "paragraph")) == 3  # indexed (a search catches up)
        assert proc.stop() == 0, proc.log_text()
    # One index row lost, one of a version that never existed.
    lose = "DELETE FROM search_spans WHERE rowid = (SELECT min(rowid) FROM search_spans)"
    cols = 'scope_id, source_id, version_tx, start, "end", kind, linked_nodes, labels, format, body'
    cols += ", words" if dsn else ""  # PostgreSQL's substring index's text
    stale = (
        f"INSERT INTO search_spans ({cols}) SELECT {cols.replace('version_tx', '1')}"
        " FROM search_spans LIMIT 1"
    )
    if dsn:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(lose)
            await conn.execute(stale)
        finally:
            await conn.close()
    else:
        with sqlite3.connect(tmp_path / "telha.db") as db:
            db.execute(lose)  # its FTS5 document stays: the counts no longer match
            db.execute(stale)
            # One row moved out of its scope's rowid range (scope 1: [2^40, 2^41)).
            db.execute(
                "UPDATE search_spans SET rowid = 5 WHERE rowid = (SELECT max(rowid)"
                " FROM search_spans WHERE version_tx <> 1)"
            )
    check = telha_check(config)
    out = check.stdout + check.stderr
    assert check.returncode == 1, out
    assert "not indexed" in out and "not a span row of its source's current version" in out, out
    if not dsn:
        assert "outside its scope's rowid range" in out, out
