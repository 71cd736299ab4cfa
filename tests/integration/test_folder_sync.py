"""Sync runs of the ``folder`` connector (docs/connectors.md) against a real server on both
engines, with the connector worker in-process and as its own process: counts, new
versions of changed files, retires of deleted ones with history kept, unchanged files'
bytes never read, a listing that fails halfway retiring nothing, the prune guard, a
hand-ingested source of the same name untouched, and typed failures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from telha.domain.connectors import connector_source_id
from telha.domain.model import Scope
from tests.support.inproc import InProcessServer, Server
from tests.support.server import child_environ, telha_check, write_config
from tests.support.sync_runs import run_counts, run_sync
from tests.support.wait import wait_search_indexed

pytestmark = pytest.mark.anyio

#: Runs retry a missing root quickly here (a transient failure).
_JOBS = {"max_attempts": 2, "backoff_base_ms": 50, "backoff_max_s": 1}


@pytest.fixture(scope="module")
def sync_server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server running the text worker and the connector worker in-process."""
    folder = tmp_path_factory.mktemp(f"sync-{engine}")
    config = write_config(
        folder, engine, workers={"in_process": ["text_worker", "connectors"]}, jobs=_JOBS,
        search={"enabled": True}, connectors={"allowed_roots": [tempfile.gettempdir()]},
    )  # fmt: skip
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
def tree() -> Iterator[Path]:
    """A folder any user can read (a worker may run as ``nobody``)."""
    path = Path(tempfile.mkdtemp(prefix="telha-sync-"))
    path.chmod(0o755)
    yield path
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    shutil.rmtree(path)


@pytest.fixture
def scope() -> Scope:
    return Scope(f"tenant-{uuid.uuid4()}", "org")


@pytest.fixture
async def api(sync_server: Server, scope: Scope) -> AsyncIterator[httpx.AsyncClient]:
    key = sync_server.create_key(scope.tenant_id, scope.organization_id)
    async with httpx.AsyncClient(
        base_url=sync_server.base_url, headers={"x-api-key": key}, timeout=30
    ) as c:
        yield c


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o644)


async def _add(api: httpx.AsyncClient, root: Path, **extra: Any) -> str:
    resp = await api.post(
        "/v1/connectors", json={"kind": "folder", "settings": {"root": str(root)}, **extra}
    )
    assert resp.status_code == 201, resp.text
    return str(resp.json()["connectorId"])


async def _settled(api: httpx.AsyncClient, job_id: str) -> None:
    for _ in range(1200):
        job = (await api.get(f"/v1/ingest/{job_id}")).json()
        if job["state"] not in ("pending", "leased"):
            assert job["state"] == "completed", job
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"job {job_id} unfinished")


async def _item(api: httpx.AsyncClient, cid: str, ext: str) -> dict[str, Any]:
    resp = await api.get("/v1/sources", params={"connector": cid, "externalId": ext})
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def _source(api: httpx.AsyncClient, source_id: str) -> dict[str, Any]:
    resp = await api.get(f"/v1/sources/{source_id}")
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def _hits(api: httpx.AsyncClient, word: str) -> int:
    """How many sources of the current graph hold ``word`` (once the index caught up)."""

    def drained() -> None:
        with httpx.Client(base_url=str(api.base_url)) as c:
            wait_search_indexed(c, within_s=120)

    await anyio.to_thread.run_sync(drained)
    resp = await api.get("/v1/search", params={"q": word})
    assert resp.status_code == 200, resp.text
    return len({h["sourceId"] for h in resp.json()["hits"]})


def _keep_times(path: Path, text: str) -> None:
    """Rewrite ``path`` with ``text`` of the same size, its mtime put back: its change
    marker stays, so only a connector that reads unchanged files' bytes would see it."""
    st = path.stat()
    assert len(text.encode()) == st.st_size
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


async def test_folder_sync_changes_deletes_adds(
    api: httpx.AsyncClient, tree: Path, scope: Scope, tmp_path: Path, sync_server: Server
) -> None:
    for i in range(10):
        _write(tree / f"f{i}.txt", f"file number {i} word{i}x\n")
    _write(tree / "sub" / "deep.md", "# Deep\n\nwordsubx\n")
    _write(tree / "data.json", '{"skipped": true}')  # no sync format: not listed
    outside = tmp_path / "outside.txt"
    outside.write_text("secret wordoutsidex\n")
    (tree / "escape.txt").symlink_to(outside)  # leaves the root: not listed
    (tree / "loop").symlink_to(tree)  # a directory link: never followed
    # A source ingested by hand under the same name as a file of the tree.
    hand = await api.post("/v1/ingest", json={"format": "text", "name": "f1.txt",
                                              "content": "by hand wordhandx"})  # fmt: skip
    assert hand.status_code == 202, hand.text
    await _settled(api, hand.json()["jobId"])
    cid = await _add(api, tree)
    first = await run_sync(api, cid)
    assert first["state"] == "completed" and first["complete"] is True, first
    assert run_counts(first) == (11, 11, 0, 0, 0, 0)
    assert first["children"] == {"completed": 11}
    deep = await _item(api, cid, "sub/deep.md")
    assert deep["sourceId"] == str(connector_source_id(cid, scope.tenant_id, "sub/deep.md"))
    assert deep["rootNodeId"] is not None and deep["state"] == "current"
    assert deep["acl"] == ["group:root", "user:root"] or all(
        p.startswith(("user:", "group:")) for p in deep["acl"]
    )
    for missing in ("escape.txt", "data.json", "loop/f0.txt"):
        r = await api.get("/v1/sources", params={"connector": cid, "externalId": missing})
        assert r.status_code == 404, (missing, r.text)
    assert await _hits(api, "wordoutsidex") == 0
    f1, f2, f3 = [await _item(api, cid, f"f{i}.txt") for i in (1, 2, 3)]
    # 1 changed, 1 deleted, 1 added; f3 rewritten with its marker kept (never re-read).
    _write(tree / "f1.txt", "file number 1 changed wordchangedx\n")
    (tree / "f2.txt").unlink()
    _write(tree / "f10.txt", "file number 10 word10x\n")
    _keep_times(tree / "f3.txt", "FILE NUMBER 3 WORD3X\n")
    second = await run_sync(api, cid)
    assert run_counts(second) == (11, 1, 1, 9, 1, 0), second
    assert second["warning"] is None and second["complete"] is True
    changed = await _source(api, f1["sourceId"])
    assert changed["versionCount"] == 2 and changed["state"] == "current"
    gone = await _source(api, f2["sourceId"])
    assert gone["state"] == "retired" and gone["retired"] is not None
    assert gone["versionCount"] == 1  # history kept
    assert (await _item(api, cid, "f2.txt"))["retired"] is True
    assert await _hits(api, "word2x") == 0
    assert await _hits(api, "wordchangedx") == 1
    kept = await _source(api, f3["sourceId"])
    assert kept["versionCount"] == 1  # the rewritten bytes were never read
    assert await _hits(api, "word3x") == 1
    assert (await _item(api, cid, "f10.txt"))["state"] == "current"
    # The hand-ingested f1.txt is its own source, untouched by the connector.
    mine = await _source(api, hand.json()["sourceId"])
    assert mine["state"] == "current" and mine["versionCount"] == 1
    assert await _hits(api, "wordhandx") == 1
    # Nothing changed: nothing read, nothing retired.
    third = await run_sync(api, cid)
    assert run_counts(third) == (11, 0, 0, 11, 0, 0)
    # The store stays consistent: runs write no version and are not taken for jobs that
    # should have.
    checked = await anyio.to_thread.run_sync(telha_check, sync_server.config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A run's job has no name: the listing shows the 13 sources (12 items, f2 retired among
    # them, and 1 by hand) only.
    listed = (await api.get("/v1/sources", params={"limit": 100})).json()["sources"]
    assert len(listed) == 13 and cid not in {s["sourceId"] for s in listed}


async def _telha_sync(srv: Server, key: str, *args: str) -> tuple[int, str, str]:
    """``telha sync ARGS`` against ``srv``: exit code, stdout, stderr."""
    env = {**child_environ(), "TELHA_URL": srv.base_url, "TELHA_API_KEY": key}
    done = await anyio.run_process(
        [sys.executable, "-m", "telha", "sync", *args], env=env, check=False
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_prune_guard(api: httpx.AsyncClient, tree: Path, sync_server: Server) -> None:
    for i in range(10):
        _write(tree / f"p{i}.txt", f"prune {i}\n")
    cid = await _add(api, tree)
    key = api.headers["x-api-key"]
    code, out, err = await _telha_sync(sync_server, key, cid)
    assert code == 0, err
    assert "listed 10  added 10  changed 0  unchanged 0  retired 0  failed 0" in out
    for i in range(5):
        (tree / f"p{i}.txt").unlink()
    code, out, err = await _telha_sync(sync_server, key, cid)
    assert code == 3 and "prune guard" in err and "retired 0" in out, (code, out, err)
    held = (await api.get(f"/v1/connectors/{cid}/runs")).json()["runs"][0]
    assert held["retired"] == 0 and "5 of 10" in held["warning"]
    for i in range(5):
        assert (await _item(api, cid, f"p{i}.txt"))["state"] == "current"
    code, out, err = await _telha_sync(sync_server, key, cid, "--confirm-prune")
    assert code == 0 and "retired 5" in out, (code, out, err)
    for i in range(5):
        assert (await _item(api, cid, f"p{i}.txt"))["state"] == "retired"
    assert (await _item(api, cid, "p7.txt"))["state"] == "current"
    # Within the fraction (1 of 5 live is 0.2): retired without confirmation.
    (tree / "p5.txt").unlink()
    assert (await run_sync(api, cid))["retired"] == 1
    code, _, err = await _telha_sync(sync_server, key, str(uuid.uuid4()))
    assert code == 1 and "NOT_FOUND" in err
    # Runs are jobs: the job listing shows them (no name), and each run's item jobs name it.
    jobs = (await api.get("/v1/ingest", params={"kind": "sync:folder"})).json()["jobs"]
    assert len(jobs) == 4 and {j["name"] for j in jobs} == {None}
    first = jobs[-1]["jobId"]
    items = (await api.get("/v1/ingest", params={"parent": first})).json()["jobs"]
    assert len(items) == 10 and {j["kind"] for j in items} == {"ingest:text"}


async def test_prune_guard_counts_the_live_sources_before_the_run(
    api: httpx.AsyncClient, tree: Path
) -> None:
    """Every file swapped for more new ones (a root pointed elsewhere): the guard judges the
    5 gone against the 5 live before the run, not against the 25 live once its pages
    added the 20 new ones (5 of 25 would pass at the default fraction 0.2)."""
    for i in range(5):
        _write(tree / f"old{i}.txt", f"old {i}\n")
    cid = await _add(api, tree)
    assert (await run_sync(api, cid))["added"] == 5
    for i in range(5):
        (tree / f"old{i}.txt").unlink()
    for i in range(20):
        _write(tree / f"new{i}.txt", f"new {i}\n")
    held = await run_sync(api, cid)
    assert held["added"] == 20 and held["retired"] == 0, held
    assert held["warning"] is not None and "retire 5 of 5" in held["warning"], held
    assert (await _item(api, cid, "old0.txt"))["state"] == "current"


async def test_a_connector_never_retires_another_ones_sources(
    api: httpx.AsyncClient, tree: Path
) -> None:
    for i in range(6):
        _write(tree / "a" / f"x{i}.txt", f"x {i}\n")
    one = await _add(api, tree)
    two = await _add(api, tree / "a")
    await run_sync(api, one)
    await run_sync(api, two)
    (tree / "a" / "x0.txt").unlink()
    run = await run_sync(api, two, confirmPrune=True)
    assert run["retired"] == 1
    # The first connector's a/x0.txt is still current until it runs itself.
    assert (await _item(api, one, "a/x0.txt"))["state"] == "current"
    assert (await _item(api, two, "x0.txt"))["state"] == "retired"


async def test_bad_runs(api: httpx.AsyncClient, tree: Path) -> None:
    missing = await _add(api, tree / "not-there")
    run = await run_sync(api, missing)
    assert run["state"] == "dead" and "not a directory" in run["failureReason"], run
    assert run["listed"] is None
    # A root that goes away after a run (an unmounted share): the run fails, nothing is
    # retired, even with the prune guard out of the way.
    _write(tree / "share" / "kept.txt", "kept\n")
    cid = await _add(api, tree / "share", pruneMaxFraction=1)
    assert (await run_sync(api, cid))["added"] == 1
    (tree / "share").rename(tree / "unmounted")
    run = await run_sync(api, cid, confirmPrune=True)
    assert run["state"] == "dead" and "not a directory" in run["failureReason"], run
    assert (await _item(api, cid, "kept.txt"))["state"] == "current"
    cid = await _add(api, tree)
    resp = await api.post(f"/v1/connectors/{cid}/runs", json={"confirmPrune": "yes"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "INVALID_REQUEST"
    resp = await api.post(f"/v1/connectors/{uuid.uuid4()}/runs")
    assert resp.status_code == 404
    resp = await api.get(f"/v1/connectors/{cid}/runs", params={"limit": "0"})
    assert resp.status_code == 400


def _without_dac_override() -> list[str]:
    """A command prefix that makes file permissions bite a root process too: it drops
    ``CAP_DAC_OVERRIDE`` and ``CAP_DAC_READ_SEARCH`` (util-linux ``setpriv``)."""
    if os.getuid() != 0:
        return []
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]


async def test_listing_cut_short_retires_nothing_remote_worker(
    engine: str, tmp_path: Path, tree: Path
) -> None:
    """The connector worker as its own process (without the capabilities that let root
    ignore file permissions): a folder it cannot list mid-tree retires nothing; an unchanged
    file it cannot read is still unchanged (its bytes are never read)."""
    config = write_config(
        tmp_path, engine, workers={"in_process": ["text_worker"]}, jobs=_JOBS,
        connectors={"allowed_roots": [tempfile.gettempdir()]},
    )  # fmt: skip
    with InProcessServer(config) as srv:
        scope = Scope(f"tenant-{uuid.uuid4()}", "org")
        key = srv.create_key(scope.tenant_id, scope.organization_id)
        worker = subprocess.Popen(  # noqa: ASYNC220 - started once, not awaited on
            [*_without_dac_override(), sys.executable, "-m", "workers_common.run", "connectors"],
            env=srv.worker_env(scope, TELHA_CONNECTORS__ALLOWED_ROOTS=json.dumps([str(tree)])),
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            async with httpx.AsyncClient(
                base_url=srv.base_url, headers={"x-api-key": key}, timeout=30
            ) as api:
                for d in ("a", "b", "c"):
                    for i in range(4):
                        _write(tree / d / f"{i}.txt", f"{d} {i}\n")
                for d in ("a", "b", "c"):
                    (tree / d).chmod(0o755)
                cid = await _add(api, tree, pruneMaxFraction=1)
                assert run_counts(await run_sync(api, cid)) == (12, 12, 0, 0, 0, 0)
                (tree / "b").chmod(0o000)  # b cannot be listed now
                (tree / "c" / "0.txt").unlink()
                (tree / "a" / "1.txt").chmod(0o000)  # unchanged, and unreadable
                cut = await run_sync(api, cid)
                assert cut["state"] == "completed" and cut["complete"] is False, cut
                assert "cannot list b" in cut["error"]
                assert cut["retired"] == 0 and cut["failed"] == 0
                assert (await _item(api, cid, "c/0.txt"))["state"] == "current"
                assert (await _item(api, cid, "b/2.txt"))["state"] == "current"
                (tree / "b").chmod(0o755)
                whole = await run_sync(api, cid)
                assert whole["complete"] is True
                assert run_counts(whole) == (11, 0, 0, 11, 1, 0)
                assert (await _item(api, cid, "c/0.txt"))["state"] == "retired"
                # A changed file that cannot be read: a failed item of a complete listing,
                # never retired for it (its last version stays current).
                _write(tree / "a" / "2.txt", "a 2 changed\n")
                (tree / "a" / "2.txt").chmod(0o000)
                failed = await run_sync(api, cid)
                assert failed["complete"] is True and failed["retired"] == 0, failed
                assert run_counts(failed) == (11, 0, 0, 10, 0, 1)
                assert failed["failedItems"][0]["externalId"] == "a/2.txt"
                assert (await _item(api, cid, "a/2.txt"))["state"] == "current"
        finally:
            worker.terminate()
            worker.wait(20)
        assert srv.stop() == 0, srv.log_text()


async def test_a_schedule_starts_runs(api: httpx.AsyncClient, tree: Path) -> None:
    """A connector with ``every`` runs without being asked (at once when new), and not again
    before ``every`` has passed."""
    _write(tree / "s.txt", "scheduled\n")
    cid = await _add(api, tree, every="1h")
    for _ in range(600):
        runs = (await api.get(f"/v1/connectors/{cid}/runs")).json()["runs"]
        if runs and runs[0]["state"] == "completed":
            break
        await anyio.sleep(0.05)
    else:
        raise AssertionError(f"no scheduled run: {runs}")
    assert len(runs) == 1 and runs[0]["added"] == 1
    await anyio.sleep(6)  # more than a scheduler pass
    assert len((await api.get(f"/v1/connectors/{cid}/runs")).json()["runs"]) == 1
    # A run by hand is still allowed in between.
    assert (await run_sync(api, cid))["unchanged"] == 1


async def test_an_item_that_failed_to_ingest_is_read_again(
    api: httpx.AsyncClient, tree: Path
) -> None:
    """A file whose ingest ended dead is not taken as unchanged by the next run (its bytes
    never made a version); once fixed it is ingested."""
    _write(tree / "good.txt", "good\n")
    (tree / "bad.txt").write_bytes(b"not utf-8 \xff\xfe\n")
    cid = await _add(api, tree)
    first = await run_sync(api, cid)
    assert first["added"] == 2 and first["children"] == {"completed": 1, "dead": 1}
    second = await run_sync(api, cid)
    assert (second["changed"], second["unchanged"]) == (1, 1), second
    assert second["children"] == {"dead": 1}
    (tree / "bad.txt").write_text("fixed now\n")
    third = await run_sync(api, cid)
    assert (third["changed"], third["unchanged"]) == (1, 1)
    assert third["children"] == {"completed": 1}
    assert (await _item(api, cid, "bad.txt"))["state"] == "current"
