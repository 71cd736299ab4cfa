"""A sync run's report in pages over the real gRPC ``WorkerService`` (docs/connectors.md,
"The report"), the test playing the connector worker: core answers each page with the
items to read, applies every page in its own transaction (item jobs start while the run
still runs), shows the counts so far in ``GET /v1/connectors/{id}/runs`` and in ``telha
sync`` on a terminal, answers a repeated page again, refuses one out of sequence or too
large — and a failed or refused run retires nothing."""

from __future__ import annotations

import base64
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from grpclib import GRPCError, Status

from telha.domain.model import Scope
from tests.support.inproc import InProcessServer
from tests.support.server import child_environ, write_config
from tests.support.sync_runs import run_counts
from tests.support.tty import TtyProcess
from tests.support.worker import ScriptedWorker, scripted_worker

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    """A server with the text worker in-process and no connector worker: the test is it."""
    folder = tmp_path_factory.mktemp(f"pages-{engine}")
    config = write_config(
        folder, engine, workers={"in_process": ["text_worker"]},
        connectors={"allowed_roots": [str(tmp_path_factory.getbasetemp())]},
    )  # fmt: skip
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _item(ext: str, text: str, marker: str) -> dict[str, Any]:
    raw = text.encode()
    return {"externalId": ext, "name": ext, "format": "text", "marker": marker,
            "contentB64": base64.b64encode(raw).decode(), "size": len(raw)}  # fmt: skip


def _listed(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"externalId": e, "marker": m} for e, m in pairs]


async def _run_row(api: httpx.AsyncClient, cid: str) -> dict[str, Any]:
    return dict((await api.get(f"/v1/connectors/{cid}/runs")).json()["runs"][0])


async def _settled(api: httpx.AsyncClient, cid: str) -> dict[str, Any]:
    for _ in range(600):
        run = await _run_row(api, cid)
        if run["state"] != "leased" and not {"pending", "leased"} & set(run["children"]):
            return run
        await anyio.sleep(0.05)
    raise AssertionError(f"run unsettled: {run}")


async def _lease(worker: ScriptedWorker) -> Any:
    return await worker.next_job(["sync:folder"], within_s=20)


async def test_pages_progress_replay_and_order(server: InProcessServer, tmp_path: Path) -> None:
    scope = Scope(f"tenant-{uuid.uuid4()}", "org")
    key = server.create_key(scope.tenant_id, scope.organization_id)
    async with (
        httpx.AsyncClient(base_url=server.base_url, headers={"x-api-key": key}) as api,
        scripted_worker(server.grpc_addr, server.worker_token(scope)) as worker,
    ):
        made = await api.post(
            "/v1/connectors", json={"kind": "folder", "settings": {"root": str(tmp_path)}}
        )
        cid = made.json()["connectorId"]
        env = {**child_environ(), "TELHA_URL": server.base_url, "TELHA_API_KEY": key,
               "COLUMNS": "120"}  # fmt: skip
        # `telha sync` on a terminal starts the run and shows its progress as it goes.
        with TtyProcess([sys.executable, "-m", "telha", "sync", cid], env) as cli:
            job = await _lease(worker)
            # The run's spec carries no item markers.
            assert b"known" not in job.payload_json
            page0 = {"seq": 0, "listed": _listed(("a.txt", "m1"), ("b.txt", "m1"),
                                                 ("c.txt", "m1"))}  # fmt: skip
            answer = await worker.submit(job, page0)
            assert answer.accepted and list(answer.node_ids) == ["a.txt", "b.txt", "c.txt"]
            running = await _run_row(api, cid)
            assert running["state"] == "leased" and running["complete"] is None
            assert run_counts(running) == (3, 0, 0, 0, 0, 0)
            await anyio.to_thread.run_sync(cli.read_until, "running  listed 3  added 0")
            # A lost answer: the same page again is answered again, nothing counted twice.
            again = await worker.submit(job, page0)
            assert again.replay and list(again.node_ids) == ["a.txt", "b.txt", "c.txt"]
            assert run_counts(await _run_row(api, cid)) == (3, 0, 0, 0, 0, 0)
            with pytest.raises(GRPCError) as skipped:
                await worker.submit(job, {"seq": 2, "listed": []})
            assert skipped.value.status is Status.ABORTED
            # The items read go in with the next page: their jobs start before the run ends.
            page1 = {"seq": 1, "items": [_item("a.txt", "alpha wordpagea\n", "m1"),
                                         _item("b.txt", "beta\n", "m1")],
                     "failed": [{"externalId": "c.txt", "reason": "EACCES"}],
                     "listed": _listed(("d.txt", "m1"))}  # fmt: skip
            answer = await worker.submit(job, page1)
            assert list(answer.node_ids) == ["d.txt"] and answer.lease_deadline > 0
            mid = await _run_row(api, cid)
            assert run_counts(mid) == (4, 2, 0, 0, 0, 1) and mid["state"] == "leased"
            assert sum(mid["children"].values()) == 2
            assert mid["failedItems"] == [{"externalId": "c.txt", "reason": "EACCES"}]
            await anyio.to_thread.run_sync(cli.read_until, "running  listed 4  added 2")
            last = {"seq": 2, "partial": False, "complete": True, "fullListing": True,
                    "items": [_item("d.txt", "delta\n", "m1")]}  # fmt: skip
            assert (await worker.submit(job, last)).accepted
            code, shown = await anyio.to_thread.run_sync(cli.finish)
        assert code == 0, shown
        final = "completed  listed 4  added 3  changed 0  unchanged 0  retired 0  failed 1"
        assert final in shown.splitlines()[-1], shown
        run = await _settled(api, cid)
        assert run_counts(run) == (4, 3, 0, 0, 0, 1) and run["complete"] is True
        assert run["children"] == {"completed": 3}

        # Second run: core compares; b changed, a unchanged, c (failed before) is read now;
        # d is not listed by this complete listing and goes (confirmed past the guard).
        start = await api.post(f"/v1/connectors/{cid}/runs", json={"confirmPrune": True})
        job = await _lease(worker)
        listed = _listed(("a.txt", "m1"), ("b.txt", "m2"), ("c.txt", "m1"))
        answer = await worker.submit(job, {"seq": 0, "listed": listed})
        assert list(answer.node_ids) == ["b.txt", "c.txt"]
        last = {
            "seq": 1,
            "partial": False,
            "complete": True,
            "fullListing": True,
            "items": [_item("b.txt", "beta two\n", "m2"), _item("c.txt", "gamma\n", "m1")],
        }
        assert (await worker.submit(job, last)).accepted
        run = await _settled(api, cid)
        assert run["runId"] == start.json()["runId"]
        assert run_counts(run) == (3, 1, 1, 1, 1, 0), run
        gone = await api.get("/v1/sources", params={"connector": cid, "externalId": "d.txt"})
        assert gone.json()["retired"] is True

        # A run whose page is refused, and one whose worker fails it: nothing retired, the
        # earlier page's items stay.
        await api.post(f"/v1/connectors/{cid}/runs", json={"confirmPrune": True})
        job = await _lease(worker)
        answer = await worker.submit(job, {"seq": 0, "listed": _listed(("a.txt", "m1"))})
        assert list(answer.node_ids) == []
        huge = {"seq": 1, "listed": _listed(*((f"x{i}", "m") for i in range(10_001)))}
        refused = await worker.submit(job, huge)
        assert not refused.accepted
        run = await _settled(api, cid)
        assert run["state"] == "dead" and "10001 entries" in run["failureReason"], run
        for ext in ("a.txt", "b.txt", "c.txt"):
            item = await api.get("/v1/sources", params={"connector": cid, "externalId": ext})
            assert item.json()["retired"] is False, ext
        await api.post(f"/v1/connectors/{cid}/runs", json={"confirmPrune": True})
        job = await _lease(worker)
        await worker.submit(job, {"seq": 0, "listed": _listed(("a.txt", "m1"))})
        await worker.fail(job, "corrupt_input: the source went away", permanent=True)
        run = await _settled(api, cid)
        assert run["state"] == "dead" and run["listed"] == 1  # as far as it got
        for ext in ("b.txt", "c.txt"):
            item = await api.get("/v1/sources", params={"connector": cid, "externalId": ext})
            assert item.json()["retired"] is False, ext
