"""``telha check``'s version checks (``current_versions``, ``current_provenance``,
``unpublished_versions``, ``retired_sources``) on a real store of each engine: markdown, JSON
and a streamed CSV each ingested twice with changes (supersedes), and a text source retired
through the storage's ``retire``. The store passes; copies of it corrupted with raw SQL (the
SQLite file backed up, the PostgreSQL database cloned from it as a template) each fail with
the right check named and exit code 1."""

from __future__ import annotations

import base64
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import asyncpg
import httpx
import pytest

from telha.config import load_config
from telha.domain.model import Scope
from tests.crash.retire import retire_sources
from tests.support.inproc import InProcessServer
from tests.support.pg import admin_dsn
from tests.support.server import telha_check, write_config
from tests.support.wait import wait_job_blocking

CHECKS = ("current_versions", "current_provenance", "unpublished_versions", "retired_sources")
SCOPE = Scope("acme", "main")

MD_V1 = "# Title\n\nAlpha paragraph.\n\nBeta paragraph.\n"
MD_V2 = "# Title\n\nAlpha paragraph.\n\nGamma paragraph.\n"
JSON_V1 = '[{"title": "Café", "n": 1}, {"title": "Zoë", "n": 2}, {"title": "Ana", "n": 3}]'
JSON_V2 = '[{"title": "Café", "n": 1}, {"title": "Zoë", "n": 20}]'
CSV_V1 = "id,name\n1,Alpha\n2,Beta\n3,Gamma\n4,Delta\n5,Epsilon\n"
CSV_V2 = "id,name\n1,Alpha\n2,Beta\n3,Gamma prime\n4,Delta\n6,Zeta\n"


def _csv(text: str) -> dict[str, Any]:
    return {"contentBase64": base64.b64encode(text.encode()).decode(),
            "options": {"rows_per_partial": 2}}  # fmt: skip


#: (name, format, the bodies posted in order: each a new version of the one source).
PLAN: list[tuple[str, str, list[dict[str, Any]]]] = [
    ("notes.md", "markdown", [{"content": MD_V1}, {"content": MD_V2}]),
    ("risks.json", "json", [{"content": JSON_V1}, {"content": JSON_V2}]),
    ("table.csv", "csv", [_csv(CSV_V1), _csv(CSV_V2)]),
    ("retired.txt", "text", [{"content": "Gone soon.\n\nStill history."}]),
]


@dataclass(frozen=True)
class Stored:
    """The loaded store: its config, engine, and source ids by name."""

    config: Path
    engine: str
    sources: dict[str, bytes]


def _in_thread(fn: Callable[[], Any]) -> Any:
    """Run an async callable on its own event loop in its own thread."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, fn).result()


@pytest.fixture(scope="module")
def stored(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stored]:
    folder = tmp_path_factory.mktemp(f"check-versions-{engine}")
    workers = {"in_process": ["text_worker", "tabular_worker"], "concurrency": 1}
    config = write_config(folder, engine, workers=workers)
    sources: dict[str, bytes] = {}
    with InProcessServer(config) as server:
        key = server.create_key(SCOPE.tenant_id, SCOPE.organization_id)
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=60) as c:
            for name, fmt, bodies in PLAN:
                for body in bodies:
                    resp = c.post("/v1/ingest", json={"format": fmt, "name": name, **body})
                    assert resp.status_code in (201, 202), resp.text
                    if resp.status_code == 202:
                        job = wait_job_blocking(c, resp.json()["jobId"], within_s=120)
                        assert job["state"] == "completed", job
                    sources[name] = uuid.UUID(resp.json()["sourceId"]).bytes
        retired = [sources["retired.txt"]]
        _in_thread(lambda: retire_sources(config, SCOPE, retired, "test"))
        assert server.stop() == 0, server.log_text()
    yield Stored(config, engine, sources)


def _summary(stdout: str) -> dict[str, tuple[int, int]]:
    rows = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in CHECKS:
            rows[parts[0]] = (int(parts[1]), int(parts[2]))
    return rows


def test_a_store_of_superseded_and_retired_sources_passes(stored: Stored) -> None:
    result = telha_check(stored.config)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = _summary(result.stdout)
    assert set(rows) == set(CHECKS), result.stdout
    assert rows["current_versions"][0] == 3, result.stdout  # the retired source has no rows
    assert rows["current_provenance"][0] > 10, result.stdout
    assert rows["unpublished_versions"][0] == 7, result.stdout
    assert rows["retired_sources"][0] == 1, result.stdout
    assert all(violations == 0 for _, violations in rows.values()), result.stdout


# -- raw SQL on a copy, either engine ------------------------------------------------------


class Sql:
    """Raw SQL on a copy of the store (``?`` placeholders on both engines)."""

    def __init__(self, engine: str, target: str) -> None:
        self.engine = engine
        self.target = target  # an SQLite path or a PostgreSQL DSN

    def _pg(self, query: str) -> str:
        parts = query.split("?")
        return parts[0] + "".join(f"${i}{p}" for i, p in enumerate(parts[1:], 1))

    def all(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Every row of ``query``."""
        if self.engine == "sqlite":
            with sqlite3.connect(self.target) as conn:
                return list(conn.execute(query, params).fetchall())

        async def go() -> list[tuple[Any, ...]]:
            conn = await asyncpg.connect(self.target)
            try:
                return [tuple(r) for r in await conn.fetch(self._pg(query), *params)]
            finally:
                await conn.close()

        return list(_in_thread(go))

    def run(self, query: str, *params: Any) -> None:
        """Execute ``query`` and commit."""
        if self.engine == "sqlite":
            with sqlite3.connect(self.target) as conn:
                conn.execute(query, params)
            return

        async def go() -> None:
            conn = await asyncpg.connect(self.target)
            try:
                await conn.execute(self._pg(query), *params)
            finally:
                await conn.close()

        _in_thread(go)


def _txs(sql: Sql, source: bytes) -> list[int]:
    """The published versions of ``source``, oldest first."""
    rows = sql.all(
        "SELECT tx FROM source_versions WHERE source_id = ? AND published_tx IS NOT NULL"
        " ORDER BY tx",
        source,
    )
    return [int(r[0]) for r in rows]


Corruption = Callable[[Sql, dict[str, bytes]], None]


def two_versions_current(sql: Sql, ids: dict[str, bytes]) -> None:
    """The markdown v1 rows v2 dropped ("Beta") reopened: a supersede half undone."""
    src = ids["notes.md"]
    v1, v2 = _txs(sql, src)
    sql.run(
        "UPDATE nodes SET tx_to = NULL WHERE source_id = ? AND tx_from = ? AND node_id NOT IN"
        " (SELECT node_id FROM nodes WHERE source_id = ? AND tx_from = ?)",
        src, v1, src, v2,
    )  # fmt: skip


def old_graph_current(sql: Sql, ids: dict[str, bytes]) -> None:
    """The JSON v2 graph closed and v1's reopened: the publish lost, the old graph current."""
    src = ids["risks.json"]
    v1, v2 = _txs(sql, src)
    for table in ("nodes", "edges"):
        sql.run(f"UPDATE {table} SET tx_to = tx_from WHERE source_id = ? AND tx_from = ?", src, v2)
        sql.run(f"UPDATE {table} SET tx_to = NULL WHERE source_id = ? AND tx_from = ?", src, v1)


def provenance_into_old_version(sql: Sql, ids: dict[str, bytes]) -> None:
    """A current CSV v2 node's provenance pointed at v1's text."""
    src = ids["table.csv"]
    v1, v2 = _txs(sql, src)
    node_id, tx_from = sql.all(
        "SELECT node_id, tx_from FROM nodes WHERE source_id = ? AND tx_from = ?"
        " AND tx_to IS NULL ORDER BY node_id LIMIT 1",
        src, v2,
    )[0]  # fmt: skip
    sql.run(
        "UPDATE nodes SET provenance = ? WHERE node_id = ? AND tx_from = ?",
        f"[[0,1,{v1}]]".encode(), node_id, tx_from,
    )  # fmt: skip


def finalized_not_published(sql: Sql, ids: dict[str, bytes]) -> None:
    src = ids["risks.json"]
    v2 = _txs(sql, src)[-1]
    sql.run(
        "UPDATE source_versions SET published_tx = NULL WHERE source_id = ? AND tx = ?", src, v2
    )


def abandoned_stream_left_open(sql: Sql, ids: dict[str, bytes]) -> None:
    """The streamed CSV v2 made to look abandoned (never finalized) with its rows open."""
    src = ids["table.csv"]
    v2 = _txs(sql, src)[-1]
    sql.run(
        "UPDATE source_versions SET canonical_text_hash = NULL, published_tx = NULL"
        " WHERE source_id = ? AND tx = ?",
        src, v2,
    )  # fmt: skip


def retired_rows_reopened(sql: Sql, ids: dict[str, bytes]) -> None:
    src = ids["retired.txt"]
    ((retired_tx,),) = sql.all(
        "SELECT retired_tx FROM source_versions WHERE source_id = ? AND retired_tx IS NOT NULL",
        src,
    )
    sql.run("UPDATE nodes SET tx_to = NULL WHERE source_id = ? AND tx_to = ?", src, retired_tx)


def kept_edge_unmarked(sql: Sql, ids: dict[str, bytes]) -> None:
    """An edge v1 wrote and v2 kept open lost v2's mark: a v1 row current beside v2's."""
    src = ids["table.csv"]
    v1, v2 = _txs(sql, src)
    sql.run(
        "UPDATE edges SET seen_tx = NULL WHERE source_id = ? AND tx_from = ? AND seen_tx = ?",
        src, v1, v2,
    )  # fmt: skip


def fingerprint_forged(sql: Sql, ids: dict[str, bytes]) -> None:
    """A version's fingerprint no longer the BLAKE3 of its identity."""
    src = ids["notes.md"]
    v2 = _txs(sql, src)[-1]
    sql.run(
        "UPDATE source_versions SET fingerprint = ? WHERE source_id = ? AND tx = ?",
        b"\x00" * 32, src, v2,
    )  # fmt: skip


def fingerprint_missing(sql: Sql, ids: dict[str, bytes]) -> None:
    """A new version written without its identity after one that has it."""
    src = ids["risks.json"]
    v2 = _txs(sql, src)[-1]
    sql.run(
        "UPDATE source_versions SET fingerprint = NULL, identity = NULL, reason = NULL"
        " WHERE source_id = ? AND tx = ?",
        src, v2,
    )  # fmt: skip


CORRUPTIONS: list[tuple[Corruption, str, str]] = [
    (fingerprint_forged, "unpublished_versions", "not the BLAKE3 of its identity"),
    (fingerprint_missing, "unpublished_versions", "an earlier version of its source has one"),
    (kept_edge_unmarked, "current_versions", "versions are current at once"),
    (two_versions_current, "current_versions", "versions are current at once"),
    (old_graph_current, "current_versions", "not of its current version"),
    (provenance_into_old_version, "current_provenance", "whose current version is"),
    (finalized_not_published, "unpublished_versions", "never published"),
    (abandoned_stream_left_open, "unpublished_versions", "no live stream, yet"),
    (retired_rows_reopened, "retired_sources", "rows are current"),
]


def _live_sql(stored: Stored) -> Sql:
    """Raw SQL on the loaded store itself (its server is stopped)."""
    if stored.engine == "sqlite":
        return Sql("sqlite", str(stored.config.parent / "telha.db"))
    cfg, _ = load_config(stored.config, environ={})
    return Sql("postgres", cfg.storage.dsn)


@pytest.mark.parametrize("name", ["table.csv", "notes.md"])
def test_a_new_version_keeps_its_unchanged_edges_open(stored: Stored, name: str) -> None:
    """docs/architecture.md, "Kept edges": v2 wrote only the edges v1 did not have; every
    edge both versions assert is v1's row, still open and marked with v2's tx; no edge has
    two open rows; the edges v2 dropped were closed at v2's publish."""
    sql = _live_sql(stored)
    src = stored.sources[name]
    v1, v2 = _txs(sql, src)
    rows = sql.all("SELECT edge_id, tx_from, tx_to, seen_tx FROM edges WHERE source_id = ?", src)
    by_version: dict[int, set[bytes]] = {v1: set(), v2: set()}
    for edge_id, tx_from, _, _ in rows:
        by_version[int(tx_from)].add(bytes(edge_id))
    assert by_version[v1] and not (by_version[v1] & by_version[v2]), name  # none written twice
    open_rows = [r for r in rows if r[2] is None]
    assert len({bytes(r[0]) for r in open_rows}) == len(open_rows), name
    kept = [r for r in open_rows if int(r[1]) == v1]
    assert all(r[3] is not None and int(r[3]) == v2 for r in kept), name
    ((published,),) = sql.all(
        "SELECT published_tx FROM source_versions WHERE source_id = ? AND tx = ?", src, v2
    )
    closed = [r for r in rows if int(r[1]) == v1 and r[2] is not None]
    assert all(int(r[2]) == int(published) for r in closed), name
    assert kept, name
    if name == "table.csv":  # rows 1, 2 and 4 are the same; 3 changed, 5 left, 6 came
        assert closed and by_version[v2], name


def _with_db(dsn: str, name: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


def _admin(statement: str) -> None:
    async def go() -> None:
        conn = await asyncpg.connect(admin_dsn())
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    _in_thread(go)


@pytest.mark.parametrize(
    ("corrupt", "check", "detail"), CORRUPTIONS, ids=[c[0].__name__ for c in CORRUPTIONS]
)
def test_a_corrupted_copy_fails_naming_the_check(
    stored: Stored, tmp_path: Path, corrupt: Corruption, check: str, detail: str
) -> None:
    copy_db = ""
    if stored.engine == "sqlite":
        src = sqlite3.connect(f"file:{stored.config.parent / 'telha.db'}?mode=ro", uri=True)
        dst = sqlite3.connect(tmp_path / "telha.db")
        src.backup(dst)  # the WAL's frames included
        src.close()
        dst.close()
        config = write_config(tmp_path)
        sql = Sql("sqlite", str(tmp_path / "telha.db"))
    else:
        cfg, _ = load_config(stored.config, environ={})
        original = urlsplit(cfg.storage.dsn).path.lstrip("/")
        copy_db = f"telha_test_{uuid.uuid4().hex[:16]}"
        _admin(f'CREATE DATABASE "{copy_db}" TEMPLATE "{original}"')
        dsn = _with_db(cfg.storage.dsn, copy_db)
        config = write_config(tmp_path, "postgres", storage={"dsn": dsn})
        sql = Sql("postgres", dsn)
    try:
        corrupt(sql, stored.sources)
        result = telha_check(config)
    finally:
        if copy_db:
            _admin(f'DROP DATABASE IF EXISTS "{copy_db}" WITH (FORCE)')
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith(f"VIOLATION {check}: ")]
    assert any(detail in ln for ln in lines), result.stdout
    assert _summary(result.stdout)[check][1] >= 1, result.stdout
