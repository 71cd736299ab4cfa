"""``telha ingest``, ``telha job`` and ``telha source`` against a real ``telha serve``:
a folder of corpus files of mixed formats, one of them encrypted and one of no format Telha
knows, ends with the expected table and exit code 1; plain output when not on a terminal."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from telha.domain.model import Scope
from tests.conftest import CORPUS
from tests.support.metrics import scrape, value
from tests.support.server import ServerProcess, write_config
from tests.support.worker import scripted_worker

FILES = {
    "countries.csv": "csv/countries.csv",
    "protected.xlsx": "xlsx/protectedFile.xlsx",
    "hello.eml": "eml/utf8_headers.eml",
    "tabs.py": "code/python/mixed-spaces-tabs.py",
    "unclosed.json": "json/n_structure_unclosed_object.json",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("cli")
    workers = ["text_worker", "tabular_worker", "email_worker", "code_worker"]
    config = write_config(folder, workers={"in_process": workers, "concurrency": 1})
    with ServerProcess(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _telha(
    server: ServerProcess, key: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TELHA_API_KEY": key, "TELHA_URL": server.base_url}
    return subprocess.run(
        [sys.executable, "-m", "telha", *args], capture_output=True, text=True, env=env,
        timeout=120, check=False, cwd=cwd,
    )  # fmt: skip


def _table(stdout: str) -> dict[str, dict[str, str]]:
    """The closing TSV table: file → its row (the lines after the ``file`` header)."""
    lines = stdout.splitlines()
    start = lines.index("file\tsource id\tjob id\tstate\tnodes\tfailure")
    header = lines[start].split("\t")
    rows = [dict(zip(header, line.split("\t"), strict=True)) for line in lines[start + 1 :]]
    return {r["file"]: r for r in rows}


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "inbox"
    folder.mkdir()
    for name, rel in FILES.items():
        shutil.copy(CORPUS / rel, folder / name)
    (folder / "notes").write_text("# Notes\n\nNo extension: sniffed as text.\n")
    (folder / "data.json").write_text('[{"a": 1}, {"a": 2}]')
    (folder / "blob.bin").write_bytes(b"\x00\xff\xfe\x80" * 64)  # no format: refused
    (folder / ".hidden").write_text("skipped")
    return folder


def _key(server: ServerProcess) -> str:
    return server.create_key(f"t-{uuid.uuid4()}", "org")


def test_ingest_a_mixed_folder_then_job_and_source(server: ServerProcess, tmp_path: Path) -> None:
    key = _key(server)
    out = _telha(server, key, "ingest", str(_folder(tmp_path)), cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    table = _table(out.stdout)
    assert set(table) == {f"inbox/{n}" for n in [*FILES, "notes", "data.json", "blob.bin"]}
    states = {name.removeprefix("inbox/"): row["state"] for name, row in table.items()}
    assert states == {
        "countries.csv": "completed (1 warning)", "protected.xlsx": "dead",
        "hello.eml": "completed",
        "tabs.py": "completed", "notes": "completed", "data.json": "completed",
        "blob.bin": "refused", "unclosed.json": "refused",
    }  # fmt: skip
    assert table["inbox/protected.xlsx"]["failure"].startswith("unsupported_feature: encrypted")
    assert table["inbox/blob.bin"]["failure"].startswith("cannot tell the format")
    assert table["inbox/unclosed.json"]["failure"].startswith("INVALID_CONTENT: ")
    assert table["inbox/data.json"]["nodes"] == "2"
    assert table["inbox/countries.csv"]["nodes"] == "6"  # TABLE + 5 rows
    # Plain progress lines, one a step: the state changes of each job in order.
    steps = [line for line in out.stdout.splitlines() if line.startswith("inbox/tabs.py: ")]
    assert [s.split(": ")[1].split(" ")[0] for s in steps] == [
        "uploading",
        "uploaded",
        "enqueued",
        "leased",
        "completed",
    ]

    csv = table["inbox/countries.csv"]
    source = _telha(server, key, "source", csv["source id"])
    assert source.returncode == 0 and "name    inbox/countries.csv" in source.stdout
    assert "core:" not in source.stdout and "in-process:tabular_worker" in source.stdout
    uploaded = next(
        s for s in out.stdout.splitlines() if s.startswith("inbox/countries.csv: uploaded")
    )
    job_id = uploaded.split("job ")[1].rstrip(")")
    assert csv["job id"] == job_id  # the table names each file's job
    job = _telha(server, key, "job", job_id)
    assert job.returncode == 0, job.stderr
    assert "state     completed" in job.stdout and "  completed  version=" in job.stdout
    other = _telha(server, _key(server), "job", job_id)
    assert other.returncode == 1 and "NOT_FOUND" in other.stderr  # another scope's key: 404


def test_no_wait_and_format_override(server: ServerProcess, tmp_path: Path) -> None:
    path = tmp_path / "page.dat"
    path.write_text("First paragraph.\n\nSecond paragraph.\n")
    key = _key(server)
    out = _telha(
        server, key, "ingest", "--no-wait", "--format", "markdown", str(path), cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    (row,) = _table(out.stdout).values()
    assert row["file"] == "page.dat" and row["state"] == "pending" and row["job id"]
    bad = _telha(server, key, "ingest", "--options", "[1]", str(path))
    assert bad.returncode == 2 and "must be a JSON object" in bad.stderr


@pytest.mark.anyio
async def test_wait_prints_each_event_as_it_arrives(server: ServerProcess, tmp_path: Path) -> None:
    """``telha ingest`` (waiting, the default) follows the job's event stream: each step a
    scripted worker takes (this server runs no html worker) is printed before the next one
    is taken, and the events route is what it read."""
    tenant = f"t-{uuid.uuid4()}"
    key = server.create_key(tenant, "org")
    path = tmp_path / "page.html"
    path.write_text("<html><body><p>Live.</p></body></html>")
    before = await scrape(server.base_url)
    env = {**os.environ, "TELHA_API_KEY": key, "TELHA_URL": server.base_url,
           "PYTHONUNBUFFERED": "1"}  # fmt: skip
    cmd = [sys.executable, "-m", "telha", "ingest", "--format", "html", str(path)]
    submission = {"v": 1, "canonicalText": "Live.\n", "spans": [], "nodes": [],
                  "relationships": []}  # fmt: skip
    token = server.worker_token(Scope(tenant, "org"))
    async with (
        await anyio.open_process(cmd, env=env, stderr=subprocess.STDOUT, cwd=tmp_path) as proc,
        scripted_worker(server.grpc_addr, token) as worker,
    ):
        assert proc.stdout is not None
        lines = BufferedByteReceiveStream(proc.stdout)

        async def step(prefix: str) -> str:
            """The CLI's next progress line; it must start with ``prefix``."""
            with anyio.fail_after(10):
                line = (await lines.receive_until(b"\n", 4096)).decode()
            assert line.startswith(f"page.html: {prefix}"), line
            return line

        await step("uploading")
        await step("uploaded")
        await step("enqueued")
        job = await worker.next_job(["html"])
        assert await step("leased") == "page.html: leased (worker=scripted)"
        await worker.fail(job, "transient: the parser was busy")
        assert await step("retried") == "page.html: retried (transient: the parser was busy)"
        job = await worker.next_job(["html"])
        await step("leased")
        assert (await worker.submit(job, submission)).accepted
        await step("completed")
        with anyio.fail_after(10):
            assert await proc.wait() == 0
            rest = b""
            with suppress(anyio.EndOfStream):
                while True:
                    rest += await lines.receive()
    assert "page.html\t" in rest.decode() and "\tcompleted\t" in rest.decode()  # the table
    after = await scrape(server.base_url)
    route = {"method": "GET", "route": "/v1/ingest/{job_id}/events", "status": "200"}
    assert (
        value(after, "telha_http_requests_total", **route)
        - value(before, "telha_http_requests_total", **route)
        == 1
    )
