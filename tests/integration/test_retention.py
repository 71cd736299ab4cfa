"""Job retention end to end, on both engines: a real ``telha serve``, real uploads and jobs,
the real ``telha gc`` and ``telha check`` as subprocesses against real configs; and the
periodic collector inside ``telha serve``, seen through the REST API and ``/metrics``."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from telha.config import load_config
from telha.domain.ids import content_hash
from telha.storage import open_store
from telha.storage.core.tx import Tx
from tests.support.inproc import InProcessServer
from tests.support.server import child_environ, telha_check, write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

DAY_US = 86_400_000_000
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Iterator[InProcessServer]:
    """A server whose own collector is off (``retain_days = 0``): ``telha gc`` does it."""
    folder = tmp_path_factory.mktemp(f"retention-{engine}")
    config = write_config(
        folder, engine, workers={"in_process": ["text_worker"]}, jobs={"retain_days": 0}
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
async def client(srv: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
    key = srv.create_key(f"tenant-{uuid.uuid4()}", "org")
    async with httpx.AsyncClient(
        base_url=srv.base_url, headers={"x-api-key": key}, timeout=30
    ) as c:
        yield c


def _gc_config(srv: InProcessServer, retain_days: float) -> Path:
    """The server's config with another ``jobs.retain_days``, beside it (same store)."""
    text = srv.config.read_text(encoding="utf-8").replace(
        "retain_days = 0", f"retain_days = {retain_days}"
    )
    path = srv.config.parent / f"gc-{retain_days}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _telha(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "telha", *args],
        capture_output=True, text=True, timeout=120, check=False, env=child_environ(),
    )  # fmt: skip


def _counts(stdout: str) -> dict[str, int]:
    """``name<TAB>value`` lines of ``telha gc``."""
    pairs = [ln.split("\t") for ln in stdout.splitlines() if ln.count("\t") == 1]
    return {k: int(v) for k, v in pairs}


async def _upload(c: httpx.AsyncClient, name: str, data: bytes) -> dict[str, str]:
    resp = await c.post(
        "/v1/ingest", data={"format": "csv", "name": name}, files={"file": (name, data)}
    )
    assert resp.status_code == 202, resp.text
    body: dict[str, str] = resp.json()
    return body


async def _age(tx: Tx, job_ids: list[bytes], digests: list[bytes], by_us: int) -> None:
    for job_id in job_ids:
        await tx.execute(
            "UPDATE jobs SET updated_at = updated_at - ? WHERE job_id = ?", by_us, job_id
        )
    for digest in digests:
        await tx.execute(
            "UPDATE raw_blobs SET created_at = created_at - ? WHERE content_hash = ?",
            by_us, digest,
        )  # fmt: skip


async def _age_rows(srv: InProcessServer, job_ids: list[str], digests: list[bytes]) -> None:
    """Make these jobs have ended, and these raw uploads have been written, 40 days ago."""
    cfg, base = load_config(srv.config, environ={})
    async with open_store(cfg, base, readers=1, pool_size=2) as store:
        ids = [uuid.UUID(j).bytes for j in job_ids]
        await store.transaction("age", _age, ids, digests, 40 * DAY_US)  # type: ignore[attr-defined]


async def test_telha_gc_removes_old_ended_jobs_and_their_raw_bytes(
    srv: InProcessServer, client: httpx.AsyncClient
) -> None:
    c = client
    # A markdown file with a version (its job stays: the version names it).
    posted = await c.post(
        "/v1/ingest", json={"format": "markdown", "name": "kept.md", "content": "# Kept\n\nText."}
    )
    assert posted.status_code == 202, posted.text
    kept = posted.json()
    assert (await wait_job(c, kept["jobId"]))["state"] == "completed"
    # An upload cancelled long ago (raw bytes, no version: everything goes) and one cancelled
    # just now (stays).
    old_bytes = b"a;b\n" + b"1;2\n" * (MiB // 4)
    old = await _upload(c, "old.csv", old_bytes)
    recent = await _upload(c, "recent.csv", b"a;b\n3;4\n")
    for job in (old, recent):
        assert (await c.post(f"/v1/ingest/{job['jobId']}/cancel")).json()["state"] == "cancelled"
    old_events = len((await c.get(f"/v1/ingest/{old['jobId']}")).json()["events"])
    await _age_rows(srv, [kept["jobId"], old["jobId"]], [content_hash(old_bytes)])

    # retain_days = 0: nothing.
    off = _telha("gc", "--config", str(srv.config))
    assert off.returncode == 0 and "nothing removed" in off.stdout, off.stdout + off.stderr
    gc_config = _gc_config(srv, 30)
    dry = _telha("gc", "--dry-run", "--config", str(gc_config))
    assert dry.returncode == 0, dry.stderr
    assert "would remove 1 job ended" in dry.stdout, dry.stdout
    assert (await c.get(f"/v1/ingest/{old['jobId']}")).status_code == 200
    done = _telha("gc", "--config", str(gc_config))
    assert done.returncode == 0, done.stderr
    counts = _counts(done.stdout)
    assert counts == _counts(dry.stdout), (dry.stdout, done.stdout)
    assert counts["jobs"] == 1 and counts["events"] == old_events
    assert counts["raw_blobs"] == 1 and counts["raw_bytes"] == len(old_bytes)
    assert counts["bytes_freed"] == counts["raw_bytes"] + counts["payload_bytes"]
    assert counts["payload_bytes"] > 0
    assert "removed 1 job ended" in done.stdout and f"{counts['bytes_freed']} bytes" in done.stdout
    again = _counts(_telha("gc", "--config", str(gc_config)).stdout)
    assert (again["jobs"], again["raw_blobs"], again["bytes_freed"]) == (0, 0, 0)

    # The old upload's job and source are gone; the version, its job and the recent job stay.
    assert (await c.get(f"/v1/ingest/{old['jobId']}")).status_code == 404
    assert (await c.get(f"/v1/ingest/{old['jobId']}/events")).status_code == 404
    assert (await c.get(f"/v1/sources/{old['sourceId']}")).status_code == 404
    listed = (await c.get("/v1/sources")).json()["sources"]
    assert {s["name"] for s in listed} == {"kept.md", "recent.csv"}
    assert (await c.get(f"/v1/ingest/{recent['jobId']}")).json()["state"] == "cancelled"
    job = (await c.get(f"/v1/ingest/{kept['jobId']}")).json()
    assert job["state"] == "completed" and job["events"]
    source = (await c.get(f"/v1/sources/{kept['sourceId']}")).json()
    assert source["lastJobId"] == kept["jobId"] and source["lastJobState"] == "completed"
    [v] = source["versions"]
    assert v["jobId"] == kept["jobId"]
    text = await c.get(f"/v1/sources/{kept['sourceId']}/versions/{v['sourceVersionTx']}/text")
    assert text.status_code == 200 and text.text == "# Kept\n\nText."
    checked = telha_check(srv.config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "source_jobs" in checked.stdout


def test_a_bad_retention_config_is_a_config_error(srv: InProcessServer) -> None:
    path = _gc_config(srv, -1)
    bad = _telha("gc", "--config", str(path))
    assert bad.returncode == 2 and "jobs.retain_days" in bad.stderr, bad.stderr


@pytest.fixture(scope="module")
def collecting(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Iterator[InProcessServer]:
    """A server whose collector removes what ended more than ~0.1 s ago, 5 times a second."""
    folder = tmp_path_factory.mktemp(f"collecting-{engine}")
    config = write_config(
        folder, engine, workers={"in_process": ["text_worker"]},
        jobs={"retain_days": 0.1 / 86_400, "gc_interval_s": 0.2},
    )  # fmt: skip
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def test_telha_serve_collects_periodically(collecting: InProcessServer) -> None:
    key = collecting.create_key(f"tenant-{uuid.uuid4()}", "org")
    async with httpx.AsyncClient(
        base_url=collecting.base_url, headers={"x-api-key": key}, timeout=30
    ) as c:
        posted = await c.post(
            "/v1/ingest", json={"format": "text", "name": "k.txt", "content": "kept"}
        )
        kept = (await wait_job(c, posted.json()["jobId"]))["jobId"]
        data = b"x;y\n" + b"5;6\n" * 50_000
        gone = await _upload(c, "gone.csv", data)
        await c.post(f"/v1/ingest/{gone['jobId']}/cancel")
        with anyio.fail_after(20):
            while (await c.get(f"/v1/ingest/{gone['jobId']}")).status_code != 404:  # noqa: ASYNC110
                await anyio.sleep(0.1)
        assert (await c.get(f"/v1/sources/{gone['sourceId']}")).status_code == 404
        assert (await c.get(f"/v1/ingest/{kept}")).json()["state"] == "completed"
        with anyio.fail_after(20):
            while True:
                metrics = (await c.get("/metrics")).text
                freed = [
                    float(ln.split()[-1]) for ln in metrics.splitlines()
                    if ln.startswith("telha_retention_bytes_freed_total ")
                ]  # fmt: skip
                if freed and freed[0] >= len(data):
                    break
                await anyio.sleep(0.1)
        assert 'telha_retention_removed_total{what="jobs"}' in metrics
    assert '"retention_pass"' in collecting.log_text()
