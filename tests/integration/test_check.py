"""``telha check``: a store after mixed ingests (JSON, text, a streamed CSV,
DOCX, an email with an attachment) passes on both engines while the server runs; copies of the
SQLite file corrupted with ``sqlite3`` (a span past the text, an offset inside a UTF-8
character, a tampered chunk, a leased job without a lease, a completed job without its
version, a visible orphan stream) each fail with the right check named and exit code 1."""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import CORPUS
from tests.support.inproc import InProcessServer
from tests.support.server import telha_check, write_config
from tests.support.wait import wait_job_blocking

CHECKS = (
    "spans_in_text", "span_links", "chunk_hashes", "orphan_versions", "job_states",
    "source_jobs", "erasure",
)  # fmt: skip
JSON_RECORDS = '[{"title": "Café crème", "n": 1}, {"title": "Zoë", "n": 2}]'


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _load(server: InProcessServer) -> None:
    """Post the mixed load and wait until every job posted is terminal."""
    key = server.create_key("acme", "main")
    posts: list[dict[str, object]] = [
        {"format": "json", "name": "risks.json", "content": JSON_RECORDS},
        {"format": "text", "name": "notes.txt", "content": "Première note.\n\nSecond paragraph."},
        {
            "format": "csv",
            "name": "countries.csv",
            "contentBase64": _b64(CORPUS / "csv" / "countries.csv"),
            "options": {"rows_per_partial": 2},
        },
        {
            "format": "docx",
            "name": "word_sample.docx",
            "contentBase64": _b64(CORPUS / "docx" / "word_sample.docx"),
        },
        {
            "format": "eml",
            "name": "eml_with_attachment.eml",
            "contentBase64": _b64(CORPUS / "eml" / "eml_with_attachment.eml"),
        },
    ]
    with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=30) as c:
        jobs = []
        for body in posts:
            resp = c.post("/v1/ingest", json=body)
            assert resp.status_code in (201, 202), resp.text
            if resp.status_code == 202:
                jobs.append(resp.json()["jobId"])
        for job_id in jobs:
            job = wait_job_blocking(c, job_id, within_s=120)
            assert job["state"] == "completed", job


@pytest.fixture(scope="module")
def loaded(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp(f"check-{engine}")
    workers = ["text_worker", "tabular_worker", "docling_worker", "email_worker"]
    config = write_config(folder, engine, workers={"in_process": workers, "concurrency": 1})
    with InProcessServer(config) as server:
        _load(server)
        yield server
        assert server.stop() == 0, server.log_text()


def _summary(stdout: str) -> dict[str, tuple[int, int]]:
    rows = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in CHECKS:
            rows[parts[0]] = (int(parts[1]), int(parts[2]))
    return rows


def test_a_clean_store_passes_beside_the_live_server(loaded: InProcessServer) -> None:
    result = telha_check(loaded.config, process=True)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = _summary(result.stdout)
    assert set(rows) == set(CHECKS), result.stdout
    assert all(violations == 0 for _, violations in rows.values())
    for name in ("spans_in_text", "span_links", "chunk_hashes", "job_states"):
        assert rows[name][0] > 0, (name, result.stdout)
    assert "telha check: OK, no violations" in result.stdout
    # Read-only: the server is still answering and nothing was written by the check.
    assert httpx.get(f"{loaded.base_url}/healthz", timeout=5).status_code == 200


# -- corruptions, written with sqlite3 into a copy of the SQLite file -----------------------

Conn = sqlite3.Connection


def _version(conn: Conn, fmt: str) -> tuple[int, bytes, int, bytes, int]:
    """``(scope, source_id, tx, blob_id, text_len)`` of the finalized version of ``fmt``."""
    row = conn.execute(
        "SELECT scope_id, source_id, tx, blob_id, text_len FROM source_versions"
        " WHERE format = ? AND canonical_text_hash IS NOT NULL ORDER BY tx LIMIT 1",
        (fmt,),
    ).fetchone()
    assert row is not None, fmt
    return row  # type: ignore[no-any-return]


def _node_of(conn: Conn, fmt: str) -> tuple[bytes, int, str]:
    """``(node_id, tx_from, provenance)`` of a node written by the ``fmt`` version."""
    scope, source, tx, _, _ = _version(conn, fmt)
    row = conn.execute(
        "SELECT node_id, tx_from, provenance FROM nodes WHERE scope_id = ? AND source_id = ?"
        " AND tx_from = ? AND provenance <> '[]' ORDER BY node_id LIMIT 1",
        (scope, source, tx),
    ).fetchone()
    assert row is not None
    return row[0], row[1], bytes(row[2]).decode()


def _job_of(conn: Conn, fmt: str) -> bytes:
    row = conn.execute("SELECT job_id FROM source_versions WHERE format = ?", (fmt,)).fetchone()
    return bytes(row[0])


def span_past_the_text(conn: Conn) -> None:
    node_id, tx, _ = _node_of(conn, "json")
    text_len = _version(conn, "json")[4]
    conn.execute(
        "UPDATE nodes SET provenance = ? WHERE node_id = ? AND tx_from = ?",
        (f"[[0,{text_len + 10}]]".encode(), node_id, tx),
    )


def offset_inside_a_character(conn: Conn) -> None:
    scope, _, tx, blob, _ = _version(conn, "json")
    (text,) = conn.execute(
        "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ? AND idx = 0", (scope, blob)
    ).fetchone()
    inside = bytes(text).index("é".encode()) + 1
    node_id, _, _ = _node_of(conn, "json")
    conn.execute(
        "UPDATE nodes SET provenance = ? WHERE node_id = ? AND tx_from = ?",
        (f"[[{inside},{inside + 3}]]".encode(), node_id, tx),
    )


def tampered_chunk(conn: Conn) -> None:
    scope, _, _, blob, _ = _version(conn, "docx")
    (data,) = conn.execute(
        "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ? AND idx = 0", (scope, blob)
    ).fetchone()
    flipped = bytes([data[0] ^ 0x01]) + bytes(data[1:])  # same length, one bit changed
    conn.execute(
        "UPDATE blob_chunks SET data = ? WHERE scope_id = ? AND blob_id = ? AND idx = 0",
        (flipped, scope, blob),
    )


def leased_without_lease(conn: Conn) -> None:
    conn.execute(
        "UPDATE jobs SET state = 'leased', lease_owner = NULL, lease_deadline = NULL"
        " WHERE job_id = ?",
        (_job_of(conn, "text"),),
    )


def completed_without_version(conn: Conn) -> None:
    job_id = _job_of(conn, "text")
    conn.execute("DELETE FROM source_versions WHERE job_id = ?", (job_id,))


def last_job_removed(conn: Conn) -> None:
    conn.execute(
        "DELETE FROM jobs WHERE job_id = (SELECT last_job_id FROM sources"
        " WHERE last_job_id IS NOT NULL ORDER BY source_id LIMIT 1)"
    )


def orphan_left_visible(conn: Conn) -> None:
    scope, source, tx, _, _ = _version(conn, "csv")
    conn.execute(
        "UPDATE source_versions SET canonical_text_hash = NULL, text_len = 0"
        " WHERE scope_id = ? AND source_id = ? AND tx = ?",
        (scope, source, tx),
    )


CORRUPTIONS: list[tuple[Callable[[Conn], None], str, str]] = [
    (span_past_the_text, "spans_in_text", "is outside the text"),
    (offset_inside_a_character, "spans_in_text", "is inside a UTF-8 character"),
    (tampered_chunk, "chunk_hashes", "chunks hash to"),
    (leased_without_lease, "job_states", "leased without a lease"),
    (completed_without_version, "job_states", "completed without its version"),
    (orphan_left_visible, "orphan_versions", "is visible"),
    (last_job_removed, "source_jobs", "is not a job of the source"),
]


@pytest.mark.parametrize(
    ("corrupt", "check", "detail"), CORRUPTIONS, ids=[c[0].__name__ for c in CORRUPTIONS]
)
def test_a_corrupted_copy_fails_naming_thetelha_check(
    engine: str,
    loaded: InProcessServer,
    tmp_path: Path,
    corrupt: Callable[[Conn], None],
    check: str,
    detail: str,
) -> None:
    if engine != "sqlite":
        pytest.skip("the corruptions are written into a copy of an SQLite file")
    config = write_config(tmp_path)
    src = sqlite3.connect(f"file:{loaded.db}?mode=ro", uri=True)
    dst = sqlite3.connect(tmp_path / "telha.db")
    src.backup(dst)  # a consistent copy of the live database
    src.close()
    with dst:
        corrupt(dst)
    dst.close()
    result = telha_check(config)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith(f"VIOLATION {check}: ")]
    assert any(detail in ln for ln in lines), result.stdout
    assert _summary(result.stdout)[check][1] >= 1, result.stdout


def test_a_missing_database_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    result = telha_check(write_config(tmp_path), process=True)
    assert result.returncode == 1
    assert "storage error" in result.stderr, result.stderr
    assert not (tmp_path / "telha.db").exists()
