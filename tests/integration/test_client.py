"""``telha.client.AsyncTelha`` against a real ``telha serve``: every method round
trips, every error answer raises its own class, connection errors are retried until the server
is up, files over 4 MiB go through the multipart upload with progress."""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from telha.client import (
    MULTIPART_OVER_BYTES,
    AsyncTelha,
    ConnectionFailed,
    Deduplicated,
    IngestApplied,
    IngestEnqueued,
    InvalidContent,
    InvalidRequest,
    JobEventOut,
    NotFound,
    PayloadTooLarge,
    TelhaError,
    Unauthenticated,
)
from tests.support.inproc import InProcessServer, Server
from tests.support.server import ServerProcess, write_config

pytestmark = pytest.mark.anyio
MAX_UPLOAD = MULTIPART_OVER_BYTES + 2 * 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("client")
    config = write_config(
        folder,
        workers={"in_process": ["text_worker", "tabular_worker"], "concurrency": 1},
        ingest={"max_upload_bytes": MAX_UPLOAD},
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
async def telha(server: Server) -> AsyncIterator[AsyncTelha]:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    async with AsyncTelha(server.base_url, key, timeout=30) as client:
        yield client


async def test_json_round_trip_and_dedup(telha: AsyncTelha) -> None:
    content = '[{"title": "Supplier delay", "severity": 7}, {"title": "Audit", "severity": 2}]'
    applied = await telha.ingest("json", "risks.json", content=content)
    assert isinstance(applied, IngestApplied) and len(applied.node_ids) == 2
    again = await telha.ingest("json", "risks.json", content=content)
    assert isinstance(again, Deduplicated) and again.deduplicated and again.job_id is None
    node = await telha.node(applied.node_ids[0])
    assert node.properties["title"] == "Supplier delay"
    (span,) = node.provenance.spans
    assert span.text == '{"title":"Supplier delay","severity":7}'
    assert await telha.text(span.source_id, span.source_version_tx, span.start, span.end) == (
        span.text
    )
    source = await telha.source(applied.source_id)
    assert [v.source_version_tx for v in source.versions] == [applied.source_version_tx]
    spans = await telha.spans(applied.source_id, applied.source_version_tx)
    assert [s.linked_nodes for s in spans] == [[applied.node_ids[0]], [applied.node_ids[1]]]
    old = await telha.node(applied.node_ids[0], as_of=applied.source_version_tx)
    assert old.node_id == node.node_id


async def test_job_wait_reports_every_event_then_pages_and_edges(telha: AsyncTelha) -> None:
    rows = "".join(f"{i},item {i}\n" for i in range(7))
    job = await telha.ingest("csv", "items.csv", content="id,name\n" + rows)
    assert isinstance(job, IngestEnqueued)
    seen: list[str] = []

    async def on_event(event: JobEventOut) -> None:
        seen.append(event.transition)

    done = await telha.wait(job.job_id, timeout=30, on_event=on_event)
    assert done.state == "completed" and seen == [e.transition for e in done.events]
    assert seen[0] == "enqueued" and seen[-1] == "completed"
    assert (await telha.job(job.job_id)).events == done.events
    nodes = [n async for n in telha.nodes(label="TABLE_ROW", source_id=job.source_id,
                                          page_size=2)]  # fmt: skip
    assert sorted(n.properties["id"] for n in nodes) == list(range(7))
    (table,) = [n async for n in telha.nodes(label="TABLE", source_id=job.source_id)]
    out = await telha.edges(table.node_id, direction="out")
    assert len(out) == 7 and {e.from_ for e in out} == {table.node_id}
    assert await telha.edges(table.node_id, direction="in") == []


async def test_large_file_goes_multipart_with_progress(telha: AsyncTelha, tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    with path.open("w") as f:
        f.write("id,text\n")
        i = 0
        while f.tell() <= MULTIPART_OVER_BYTES:
            f.write(f"{i},{'x' * 90}\n")
            i += 1
    progress: list[int] = []
    job = await telha.ingest("csv", "big.csv", path=path, on_upload=progress.append)
    assert isinstance(job, IngestEnqueued)
    assert progress and progress[-1] == path.stat().st_size  # streamed in several reads
    assert len(progress) > 1
    done = await telha.wait(job.job_id, timeout=60)
    assert done.state == "completed" and done.stats is not None and done.stats["rows"] == i
    with path.open("a") as f:  # over max_upload_bytes now
        f.write("y" * (MAX_UPLOAD - path.stat().st_size + 1))
    with pytest.raises(PayloadTooLarge) as too_large:
        await telha.ingest("csv", "big.csv", path=path)
    assert too_large.value.status == 413 and too_large.value.code == "PAYLOAD_TOO_LARGE"


async def test_each_error_code_raises_its_class(telha: AsyncTelha, server: Server) -> None:
    with pytest.raises(NotFound) as missing:
        await telha.job(str(uuid.uuid4()))
    assert (missing.value.status, missing.value.code) == (404, "NOT_FOUND")
    with pytest.raises(InvalidContent) as bad:
        await telha.ingest("json", "bad.json", content="[{")
    assert bad.value.status == 400 and bad.value.message
    with pytest.raises(InvalidRequest):
        await telha.ingest("no-such-format", "x", content="x")
    applied = await telha.ingest("json", "one.json", content='[{"a": "é"}]')
    assert isinstance(applied, IngestApplied)
    with pytest.raises(InvalidRequest):  # the middle of "é": not a UTF-8 boundary
        await telha.text(applied.source_id, applied.source_version_tx, 0, 7)
    with pytest.raises(ValueError, match="no job to wait for"):  # a Deduplicated's job_id
        await telha.wait(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        await telha.ingest("text", "x.txt", content="x", path=Path(__file__))
    async with AsyncTelha(server.base_url, "not-a-key") as stranger:
        with pytest.raises(Unauthenticated) as denied:
            await stranger.source(applied.source_id)
    assert isinstance(denied.value, TelhaError) and denied.value.status == 401


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_connection_errors_retry_until_the_server_is_up(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    async with AsyncTelha(url, "k", retries=1, backoff_max_s=0.05) as client:
        with pytest.raises(ConnectionFailed) as down:
            await client.job(str(uuid.uuid4()))
    assert down.value.status == 0
    config = write_config(tmp_path, server={"rest_addr": f"127.0.0.1:{port}"})
    server = ServerProcess(config)
    key = server.create_key("t", "o")
    async with (
        AsyncTelha(url, key, retries=100, backoff_max_s=0.2) as client,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(anyio.to_thread.run_sync, server.start)
        with pytest.raises(NotFound):  # an answer: the retries outlasted the start-up
            await client.job(str(uuid.uuid4()))
    assert server.stop() == 0
