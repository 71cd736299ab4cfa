"""Streaming multi-submit over real gRPC:
pinning, global offsets, chunking across 1 MiB, replay, OutOfSync, finalize, crash recovery."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import blake3
import httpx
import pytest
from grpclib import GRPCError, Status

from telha.domain.model import Scope
from telha_proto.telha.worker.v1 import JobPayload
from tests.support.inproc import InProcessServer, Server
from tests.support.queue_env import Tenant, queue_server, transitions
from tests.support.server import write_config
from tests.support.wait import wait_job, wait_job_blocking
from tests.support.worker import ScriptedWorker
from workers_common import IngestionResultBuilder

pytestmark = pytest.mark.anyio
LEASE_S = 1.0


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Iterator[Server]:
    with queue_server(
        tmp_path_factory, f"stream-{engine}", LEASE_S, engine, in_process=True
    ) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def part(
    rows: list[str], base: int, seq: int, *, partial: bool = True
) -> tuple[dict[str, object], int]:
    """A partial with one ROW node per line; returns it and the next base offset."""
    b = IngestionResultBuilder(base_offset=base)
    for i, row in enumerate(rows):
        span = b.add_span_text(row + "\n", kind="cell")
        b.add_node(["ROW"], {"seq": seq, "i": i}, spans=[span])
    out = b.build()
    out["seq"], out["partial"] = seq, partial
    return out, base + b.byte_length


async def start(
    tenant: Tenant, worker: ScriptedWorker, name: str = "big.csv"
) -> tuple[dict[str, object], JobPayload]:
    posted = await tenant.post("csv", name, "a,b\n1,2\n")
    return posted, await worker.next_job(["csv"])


async def test_stream_pins_one_version_and_finalizes(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    posted, job = await start(tenant, worker)
    base, text, ids = 0, b"", []
    for seq in range(3):
        sub, nxt = part([f"row {seq}-{i} é" for i in range(4)], base, seq)
        resp = await worker.submit(job, sub)
        assert resp.accepted and len(resp.node_ids) == 4 and resp.lease_deadline > 0
        text += str(sub["canonicalText"]).encode()
        ids += resp.node_ids
        base = nxt
        # Not a version until finalized: the source has no readable version yet.
        source = (await tenant.client.get(f"/v1/sources/{posted['sourceId']}")).json()
        assert (source["versions"], source["state"]) == ([], "pending")
    final, _ = part(["last"], base, 3, partial=False)
    resp = await worker.submit(job, final)
    assert resp.accepted
    text += b"last\n"
    done = await tenant.job(job.job_id)
    assert done["state"] == "completed"
    partials = [e["detail"] for e in done["events"] if e["transition"] == "partial"]  # type: ignore[attr-defined, index]
    assert partials == [*(f"seq={i} bytes=44 nodes=4" for i in range(3)), "seq=3 bytes=5 nodes=1"]
    [version] = (await tenant.client.get(f"/v1/sources/{posted['sourceId']}")).json()["versions"]
    assert version["canonicalTextHash"] == blake3.blake3(text).hexdigest()
    tx = version["sourceVersionTx"]
    assert (
        await tenant.client.get(f"/v1/sources/{posted['sourceId']}/versions/{tx}/text")
    ).content == text
    node = (await tenant.client.get(f"/v1/nodes/{ids[5]}")).json()
    assert node["provenance"]["spans"][0]["text"] == "row 1-1 é\n"
    assert node["txTime"]["from"] == tx  # every partial's rows sit at the pinned tx
    spans = (
        await tenant.client.get(f"/v1/sources/{posted['sourceId']}/versions/{tx}/spans")
    ).json()["spans"]
    assert len(spans) == 13 and [s["start"] for s in spans] == sorted(s["start"] for s in spans)


async def test_replay_and_out_of_sync(tenant: Tenant, worker: ScriptedWorker) -> None:
    posted, job = await start(tenant, worker, "replay.csv")
    with pytest.raises(GRPCError) as err:  # a stream must start at seq 0
        await worker.submit(job, part(["x"], 0, 1)[0])
    assert err.value.status is Status.ABORTED
    first, base = part(["a", "b"], 0, 0)
    ids0 = (await worker.submit(job, first)).node_ids
    second, base2 = part(["c"], base, 1)
    ids1 = (await worker.submit(job, second)).node_ids
    again = await worker.submit(job, second)  # the ack was "lost": same seq again
    assert again.accepted and again.replay and again.node_ids == ids1
    rows = (await tenant.client.get("/v1/nodes", params={"label": "ROW"})).json()["nodes"]
    assert rows == []  # invisible until the finalize publishes the version
    for bad in (part(["d"], base2, 3)[0], part(["d"], base2, 0)[0]):
        with pytest.raises(GRPCError) as err:  # a skipped seq; a restart inside the stream
            await worker.submit(job, bad)
        assert err.value.status is Status.ABORTED
    assert (await worker.submit(job, part(["d"], base2, 2, partial=False)[0])).accepted
    assert len(ids0) == 2
    assert (await tenant.job(posted["jobId"]))["state"] == "completed"
    rows = (await tenant.client.get("/v1/nodes", params={"label": "ROW"})).json()["nodes"]
    assert len(rows) == 4  # a, b, c, d: the replay wrote nothing


async def test_chunks_cross_1_mib(tenant: Tenant, worker: ScriptedWorker) -> None:
    posted, job = await start(tenant, worker, "wide.csv")
    rows = ["x" * 1000 + "é" * 100 for _ in range(600)]  # ~720 KB a partial
    base, text = 0, b""
    for seq in range(3):
        sub, base = part(rows, base, seq, partial=seq < 2)
        assert (await worker.submit(job, sub)).accepted
        text += str(sub["canonicalText"]).encode()
    [version] = (await tenant.client.get(f"/v1/sources/{posted['sourceId']}")).json()["versions"]
    assert version["canonicalTextHash"] == blake3.blake3(text).hexdigest() and len(text) > 2 * 2**20
    url = f"/v1/sources/{posted['sourceId']}/versions/{version['sourceVersionTx']}/text"
    edge = 2**20 - 50
    start_at = text.rfind(b"\n", 0, edge) + 1
    assert (
        await tenant.client.get(url, params={"start": start_at, "end": start_at + 1300})
    ).content == text[start_at : start_at + 1300]


async def test_span_into_earlier_text_is_checked(tenant: Tenant, worker: ScriptedWorker) -> None:
    posted, job = await start(tenant, worker, "earlier.csv")
    first, base = part(["ééé"], 0, 0)
    await worker.submit(job, first)
    final = {
        "v": 1,
        "canonicalText": "",
        "spans": [{"start": 1, "end": base, "kind": "body"}],
        "seq": 1,
        "partial": False,
    }
    resp = await worker.submit(job, final)
    assert resp.accepted is False
    dead = await tenant.job(posted["jobId"])
    assert dead["state"] == "dead" and "UTF-8" in str(dead["failureReason"])
    assert (await tenant.client.get("/v1/nodes", params={"label": "ROW"})).json()["nodes"] == []


async def test_lost_lease_restarts_a_clean_stream(tenant: Tenant, worker: ScriptedWorker) -> None:
    posted, job = await start(tenant, worker, "crash.csv")
    first, base = part(["old 1", "old 2"], 0, 0)
    await worker.submit(job, first)
    await wait_job(tenant.client, posted["jobId"], "pending", within_s=LEASE_S + 5)
    retry = await worker.next_job(["csv"])
    assert retry.lease_generation == job.lease_generation + 1
    with pytest.raises(GRPCError) as err:  # the old lease cannot continue its stream
        await worker.submit(job, part(["old 3"], base, 1)[0])
    assert err.value.status is Status.FAILED_PRECONDITION
    sub, base = part(["new 1"], 0, 0)
    await worker.submit(retry, sub)
    await worker.submit(retry, part(["new 2"], base, 1, partial=False)[0])
    done = await tenant.job(posted["jobId"])
    assert done["state"] == "completed" and "stream_abandoned" in transitions(done)
    versions = (await tenant.client.get(f"/v1/sources/{posted['sourceId']}")).json()["versions"]
    assert (
        len(versions) == 1
        and versions[0]["canonicalTextHash"] == blake3.blake3(b"new 1\nnew 2\n").hexdigest()
    )
    rows = (await tenant.client.get("/v1/nodes", params={"label": "ROW"})).json()["nodes"]
    assert sorted(n["provenance"]["spans"][0]["text"] for n in rows) == ["new 1\n", "new 2\n"]


def test_worker_killed_mid_stream_then_rerun_completes_once(tmp_path: Path, engine: str) -> None:
    """A real streaming worker process, SIGKILLed after its first partial; after the lease
    expires a second process re-runs the job: one finalized version, no duplicate rows."""
    with InProcessServer(
        write_config(
            tmp_path,
            engine,
            workers={"in_process": []},
            jobs={"lease_secs": LEASE_S, "reap_interval_s": 0.1},
        )
    ) as server:
        scope = Scope("t", "o")

        def run_worker(pause_s: str) -> subprocess.Popen[bytes]:
            return server.spawn_worker(
                "tests.support.stream_worker",
                scope,
                STREAM_WORKER_PAUSE_S=pause_s,
                TELHA_HEARTBEAT_INTERVAL_SECS="0.3",
            )

        key = server.create_key(scope.tenant_id, scope.organization_id)
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}) as c:
            posted = c.post(
                "/v1/ingest",
                json={
                    "format": "tsv",
                    "name": "t.tsv",
                    "content": "\n".join(f"r{i}" for i in range(30)),
                },
            ).json()
            first = run_worker("30")
            try:
                deadline = time.monotonic() + 20
                while "partial" not in [
                    e["transition"] for e in c.get(f"/v1/ingest/{posted['jobId']}").json()["events"]
                ]:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            finally:
                first.send_signal(signal.SIGKILL)
                first.wait()
            second = run_worker("0")
            try:
                job = wait_job_blocking(c, posted["jobId"], within_s=30)
                assert job["state"] == "completed", job
            finally:
                second.terminate()
                second.wait()
            assert "stream_abandoned" in [e["transition"] for e in job["events"]]
            versions = c.get(f"/v1/sources/{posted['sourceId']}").json()["versions"]
            assert len(versions) == 1
            rows = c.get("/v1/nodes", params={"label": "ROW", "limit": 1000}).json()["nodes"]
            assert sorted(json.dumps(n["properties"]) for n in rows) == sorted(
                json.dumps({"i": i}) for i in range(30)
            )


async def test_same_span_in_two_partials_links_both_nodes(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    posted, job = await start(tenant, worker, "shared-span.csv")
    first, base = part(["\u00ff\u00fe shared"], 0, 0)  # ids with any byte values must survive
    [a] = (await worker.submit(job, first)).node_ids
    final = {
        "v": 1,
        "canonicalText": "",
        "spans": [{"start": 0, "end": base, "kind": "cell"}],
        "nodes": [{"labels": ["ROW"], "properties": {"again": True}, "spanRefs": [0]}],
        "seq": 1,
        "partial": False,
    }
    [b] = (await worker.submit(job, final)).node_ids
    [version] = (await tenant.client.get(f"/v1/sources/{posted['sourceId']}")).json()["versions"]
    url = f"/v1/sources/{posted['sourceId']}/versions/{version['sourceVersionTx']}/spans"
    [span] = (await tenant.client.get(url)).json()["spans"]
    assert span["linkedNodes"] == [a, b]


def node_sub(
    node_id: str, props: dict[str, object], seq: int | None = None, base: int = 0
) -> dict[str, object]:
    """One node with a deterministic id and a span over its own line."""
    text = f"{props}\n"
    sub: dict[str, object] = {
        "v": 1,
        "canonicalText": text,
        "spans": [{"start": base, "end": base + len(text.encode()), "kind": "body"}],
        "nodes": [{"labels": ["Y"], "properties": props, "spanRefs": [0], "id": node_id}],
    }
    if seq is not None:
        sub["seq"], sub["partial"] = seq, True
    return sub


async def test_stream_and_later_writes_of_one_node_id(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    """A stream pinned before a later write of the same id leaves the later one current, and
    abandoning the stream restores exactly the history the other writers left."""
    y = str(uuid.uuid5(uuid.NAMESPACE_URL, f"y:{tenant.scope.tenant_id}"))
    await tenant.post("text", "a.txt", "a")
    job_a = await worker.next_job(["text"])
    await worker.submit(job_a, node_sub(y, {"v": "a"}))  # Y@T0
    posted_b, job_b = await start(tenant, worker, "b.csv")
    await worker.submit(job_b, node_sub(y, {"v": "stream"}, seq=0))  # Y@T1 (pinned)
    await tenant.post("text", "c.txt", "c")
    job_c = await worker.next_job(["text"])
    await worker.submit(job_c, node_sub(y, {"v": "c"}))  # Y@T2 closes Y@T1
    b_text = f"{ {'v': 'late'} }\n"
    late = node_sub(y, {"v": "late"}, seq=1, base=len("{'v': 'stream'}\n"))
    late["canonicalText"] = b_text
    assert (await worker.submit(job_b, late)).accepted  # pinned before Y@T2: T2 stands
    now = (await tenant.client.get(f"/v1/nodes/{y}")).json()
    assert now["properties"] == {"v": "c"}
    # The stream loses its lease: its rows are closed, Y@T0 ends where it ended before.
    await wait_job(tenant.client, posted_b["jobId"], "pending", within_s=LEASE_S + 5)
    retry = await worker.next_job(["csv"])
    await worker.submit(retry, {**part(["x"], 0, 0, partial=False)[0]})
    listed = (await tenant.client.get("/v1/nodes", params={"label": "Y"})).json()["nodes"]
    assert [n["properties"] for n in listed] == [{"v": "c"}]
    t1 = json.loads((await tenant.client.get(f"/v1/ingest/{posted_b['jobId']}")).text)["events"]
    assert any(e["transition"] == "stream_abandoned" for e in t1)
    history = [
        (await tenant.client.get(f"/v1/nodes/{y}", params={"asOf": t})).json()
        for t in (now["txTime"]["from"] - 1,)
    ]
    assert history[0]["properties"] == {"v": "a"}  # just before T2: A's version, never the stream's


async def test_stream_rules_refused(tenant: Tenant, worker: ScriptedWorker) -> None:
    # The same id changed by two parts of one stream: invalid, the job dead, nothing visible.
    z = str(uuid.uuid4())
    posted, job = await start(tenant, worker, "twice.csv")
    first = node_sub(z, {"n": 1}, seq=0)
    await worker.submit(job, first)
    second = node_sub(z, {"n": 2}, seq=1, base=len("{'n': 1}\n"))
    assert (await worker.submit(job, second)).accepted is False
    dead = await tenant.job(posted["jobId"])
    assert dead["state"] == "dead" and "earlier part of this stream" in str(dead["failureReason"])
    assert (await tenant.client.get(f"/v1/nodes/{z}")).status_code == 404
    # A single shot while this lease's stream is open is out of sequence.
    _, job = await start(tenant, worker, "single.csv")
    await worker.submit(job, part(["a"], 0, 0)[0])
    with pytest.raises(GRPCError) as err:
        await worker.submit(job, part(["b"], 0, 0, partial=False)[0])
    assert err.value.status is Status.ABORTED
    # Children only with the final part; no part may start with a combining mark.
    sub, _ = part(["c"], 2, 1)
    sub["childJobs"] = [{"format": "text", "name": "kid.txt", "contentB64": "eA=="}]
    assert (await worker.submit(job, sub)).accepted is False
    _, job = await start(tenant, worker, "nfc.csv")
    await worker.submit(job, part(["e"], 0, 0)[0])
    mark = {"v": 1, "canonicalText": "\u0301x", "seq": 1, "partial": False}
    assert (await worker.submit(job, mark)).accepted is False


async def test_consumer_resends_a_part_whose_ack_was_lost(tenant: Tenant) -> None:
    """A real consumer over real gRPC; the transport loses the answer to part 1 once (after
    core applied it). The resend is a replay: the stream completes with no duplicate rows."""
    from telha_proto.telha.worker.v1 import IngestionResult, SubmitResponse
    from workers_common import Job, WorkerConsumer
    from workers_common.transport import GrpcTransport

    class LosesOneAck(GrpcTransport):
        lost = 0

        async def submit(self, result: IngestionResult) -> SubmitResponse:
            resp = await super().submit(result)
            if b'"seq":1' in result.result_json and not self.lost:
                self.lost += 1
                raise ConnectionResetError("answer lost on the way back")
            return resp

    def handler(job: Job) -> object:
        def stream() -> object:
            base = 0
            for seq in range(3):
                sub, base = part([f"{job.name} {seq}"], base, seq, partial=seq < 2)
                del sub["seq"]
                yield sub

        return stream()

    transport = LosesOneAck(tenant.server.grpc_addr, tenant.token)
    consumer = WorkerConsumer(transport, handler, ["csv"], worker_id="resender")
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(consumer.run)
            posted = await tenant.post("csv", "lossy.csv", "a\n")
            done = await wait_job(tenant.client, posted["jobId"], "completed", "dead")
            tg.cancel_scope.cancel()
    finally:
        transport.close()
    assert transport.lost == 1 and done["state"] == "completed"
    rows = (await tenant.client.get("/v1/nodes", params={"label": "ROW"})).json()["nodes"]
    assert sorted(n["provenance"]["spans"][0]["text"] for n in rows) == [
        f"lossy.csv {i}\n" for i in range(3)
    ]
    partials = [e["detail"] for e in done["events"] if e["transition"] == "partial"]  # type: ignore[attr-defined, index]
    assert len(partials) == 3  # the resent part 1 wrote nothing


def test_refused_stream_closes_the_handler_generator(tmp_path: Path, engine: str) -> None:
    """Core refuses a part as invalid: the job is dead, and the worker closes the handler's
    generator (its cleanup runs) instead of leaving it suspended."""
    with InProcessServer(write_config(tmp_path, engine, workers={"in_process": []})) as server:
        scope = Scope("t", "o")
        mark = tmp_path / "closed"
        proc = server.spawn_worker(
            "tests.support.closing_worker", scope, CLOSING_WORKER_MARK=str(mark)
        )
        try:
            key = server.create_key(scope.tenant_id, scope.organization_id)
            with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}) as c:
                posted = c.post(
                    "/v1/ingest", json={"format": "tsv", "name": "bad.tsv", "content": "x"}
                ).json()
                job = wait_job_blocking(c, posted["jobId"], within_s=20)
                assert job["state"] == "dead", job
                assert str(job["failureReason"]).startswith("invalid_submission")
                deadline = time.monotonic() + 20
                while not mark.exists():
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                assert mark.read_text() == "closed"
        finally:
            proc.terminate()
            proc.wait(10)
