"""A real ``telha serve`` started over a store holding rows its actors cannot process
(written with raw SQL before the start, as an older version or a damaged disk might have
left them) stays up: each row is recorded failed with its reason (``row_failed`` logged,
``telha_rows_failed`` counted, ``telha check`` naming the search entry), and a good ingest
and erasure made afterwards complete (docs/operations.md, "Bad rows")."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from telha.config import load_config
from telha.domain.erasure import ERASE_FORMAT, ERASE_KIND, ErasePayload
from telha.domain.ids import content_hash, id_str, new_id, now_us
from telha.domain.model import NewJob, Scope
from telha.storage import StorageEngine, open_store
from telha.storage.core.tx import Tx
from tests.integration.test_search_queue import _commit
from tests.support.metrics import scrape, value
from tests.support.server import ServerProcess, telha_check, write_config
from tests.support.wait import until, wait_job

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")


async def _sql(store: StorageEngine, sql: str, *params: Any) -> None:
    async def op(tx: Tx) -> None:
        await tx.execute(sql, *params)

    await store.transaction("poison", op)  # type: ignore[attr-defined]


async def _poison(config: Path) -> dict[str, bytes]:
    """Rows each actor cannot process, written before the server starts: an expired lease
    whose checkpoint does not decode (reaper), a pending text job whose payload is not JSON
    (worker pools), an erase job whose payload is not an erasure (Eraser), a version whose
    canonical text is gone (search indexer). Returns their ids."""
    cfg, base_dir = load_config(config, environ={})
    async with open_store(cfg, base_dir) as store:
        leased = NewJob(new_id(), "ingest:text", "text", new_id(), content_hash(b"a"), b"{}")
        await store.jobs.enqueue(SCOPE, leased, now_us=now_us(), dedup=False)
        held = await store.jobs.lease_next(
            ["text"], scope=None, worker_id="gone", now_us=now_us(), lease_us=60_000_000
        )
        assert held is not None and held.job_id == leased.job_id
        await _sql(
            store,
            "UPDATE jobs SET continuation = ?, lease_deadline = 1 WHERE job_id = ?",
            b"\xc1junk",
            leased.job_id,
        )
        payload = NewJob(new_id(), "ingest:text", "text", new_id(), content_hash(b"b"), b"{}")
        await store.jobs.enqueue(SCOPE, payload, now_us=now_us(), dedup=False)
        await _sql(
            store, "UPDATE jobs SET payload = ? WHERE job_id = ?", b"\xffnot json", payload.job_id
        )
        source = b"s" * 16
        await _commit(store, ["alpha"], scope=SCOPE, source=source)
        await _sql(
            store,
            "DELETE FROM blob_chunks WHERE blob_id IN (SELECT blob_id FROM source_versions"
            " WHERE source_id = ?)",
            source,
        )
        body = ErasePayload(source_id=str(uuid.UUID(bytes=source)), reason="r", principal="p")
        erase = NewJob(new_id(), ERASE_KIND, ERASE_FORMAT, source, None, msgspec.json.encode(body))
        await store.erasure.enqueue(SCOPE, erase, body, now_us=now_us())
        await _sql(store, "UPDATE jobs SET payload = ? WHERE job_id = ?", b"[]", erase.job_id)
    return {"leased": leased.job_id, "payload": payload.job_id, "erase": erase.job_id}


async def test_serve_stays_up_over_rows_its_actors_cannot_process(
    tmp_path: Path, engine: str
) -> None:
    config = write_config(
        tmp_path, engine, workers={"in_process": ["text_worker"]}, jobs={"reap_interval_s": 0.2}
    )
    ids = await _poison(config)
    with ServerProcess(config) as srv:
        key = srv.create_key(SCOPE.tenant_id, SCOPE.organization_id)
        async with httpx.AsyncClient(
            base_url=srv.base_url, headers={"x-api-key": key}, timeout=30
        ) as c:
            dead = {name: await wait_job(c, id_str(job_id)) for name, job_id in ids.items()}
            assert {name: d["state"] for name, d in dead.items()} == dict.fromkeys(ids, "dead")
            assert dead["leased"]["failureReason"].startswith("corrupt_row: DecodeError: ")
            assert dead["erase"]["failureReason"].startswith("corrupt_row: step mark: ")
            assert dead["payload"]["failureReason"].startswith("corrupt_input: "), dead
            good = await c.post(
                "/v1/ingest", json={"format": "text", "name": "good.txt", "content": "good row"}
            )
            assert good.status_code == 202, good.text
            assert (await wait_job(c, good.json()["jobId"]))["state"] == "completed"

            async def counted() -> bool:
                samples = await scrape(srv.base_url)
                return (
                    value(
                        samples,
                        "telha_rows_failed_total",
                        actor="search_indexer",
                        what="search_entry",
                    )
                    == 1
                )

            await until(counted)
            samples = await scrape(srv.base_url)
            for actor in ("job_queue", "eraser"):
                assert value(samples, "telha_rows_failed_total", actor=actor, what="job") == 1
            hits = await c.get("/v1/search", params={"q": "good"})
            assert hits.status_code == 200, hits.text
            assert hits.json()["hits"], hits.json()
        assert srv.proc is not None and srv.proc.poll() is None  # still serving
        log = srv.log_text()
        assert log.count('"row_failed"') == 3, log
        assert "actor_crashed" not in log
        checked = telha_check(config)
        assert srv.stop() == 0, srv.log_text()
    lines = [
        line for line in checked.stdout.splitlines() if line.startswith("VIOLATION search_index:")
    ]
    assert len(lines) == 1 and "the text is missing or short" in lines[0], (
        checked.stdout + checked.stderr
    )
    assert "VIOLATION job_states" not in checked.stdout, checked.stdout
