"""``telha ingest`` as a new user meets it, through real subprocesses against a real
``telha serve`` (docs/cli-and-client.md): source names relative to ``--root``, whatever way
the file was named; one ``cannot reach`` line and exit 2 when no server answers, one
``refuses the API key`` line and exit 2 (no upload) for a key the server refuses; Ctrl-C
prints the table so far and exits 130; the server's hint for a job no worker takes.

Output on a terminal differs (bars, a rich table): those cases run on a pseudo-terminal too.
This server runs the text worker only, so a CSV job stays pending."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from telha.auth import hash_key, mint_api_key
from telha.config import load_config
from telha.domain.model import Scope
from telha.storage import open_store
from tests.support.inproc import InProcessServer
from tests.support.server import child_environ, write_config
from tests.support.tty import TtyProcess, run_on_tty

HEADER = "file\tsource id\tjob id\tstate\tnodes\tfailure"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("cli-manners")
    config = write_config(folder, workers={"in_process": ["text_worker"], "concurrency": 1})
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _env(url: str, key: str) -> dict[str, str]:
    return {**child_environ(), "TELHA_API_KEY": key, "TELHA_URL": url, "COLUMNS": "200",
            "PYTHONUNBUFFERED": "1"}  # fmt: skip


def _telha(url: str, key: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "telha", *args], capture_output=True, text=True,
        env=_env(url, key), timeout=120, check=False, cwd=cwd,
    )  # fmt: skip


def _table(stdout: str) -> dict[str, dict[str, str]]:
    """The closing TSV table: file → its row."""
    lines = stdout.splitlines()
    start = lines.index(HEADER)
    header = lines[start].split("\t")
    rows = [dict(zip(header, line.split("\t"), strict=True)) for line in lines[start + 1 :]]
    return {r["file"]: r for r in rows}


def _key(server: InProcessServer) -> str:
    return server.create_key(f"t-{uuid.uuid4()}", "org")


def _work(tmp_path: Path) -> Path:
    """``work/a/notes.md``, ``work/a/sub/x.md`` and ``work/b/notes.md`` (the same file name
    in two folders, different content)."""
    work = tmp_path / "work"
    (work / "a" / "sub").mkdir(parents=True)
    (work / "b").mkdir()
    (work / "a" / "notes.md").write_text("# A\n\nNotes of a.\n")
    (work / "a" / "sub" / "x.md").write_text("# X\n\nA deeper file.\n")
    (work / "b" / "notes.md").write_text("# B\n\nNotes of b.\n")
    return work


def test_a_file_has_one_source_name_however_it_is_named(
    server: InProcessServer, tmp_path: Path
) -> None:
    key, url = _key(server), server.base_url
    work = _work(tmp_path)
    alone = _telha(url, key, "ingest", "a/notes.md", cwd=work)
    assert alone.returncode == 0, alone.stderr
    assert f"root: {work}" in alone.stdout  # the summary says what names are relative to
    (row,) = _table(alone.stdout).values()
    assert row["file"] == "a/notes.md" and row["state"] == "completed"

    # The folder holding it: the same name, so the same source (these bytes deduplicate).
    folder = _table(_telha(url, key, "ingest", "a", cwd=work).stdout)
    assert set(folder) == {"a/notes.md", "a/sub/x.md"}
    assert folder["a/notes.md"]["source id"] == row["source id"]
    assert folder["a/notes.md"]["state"] == "deduplicated"

    # Another folder's file of the same file name is another source.
    other = _table(_telha(url, key, "ingest", "b/notes.md", cwd=work).stdout)
    assert other["b/notes.md"]["source id"] != row["source id"]

    # From elsewhere, --root names the same folder: the same name again.
    rooted = _telha(url, key, "ingest", "--root", "work", "work/a/notes.md", cwd=tmp_path)
    assert _table(rooted.stdout)["a/notes.md"]["source id"] == row["source id"], rooted.stdout

    # A file outside the root keeps its normalised ../ segments.
    outside = _telha(url, key, "ingest", "--root", "a/sub", "a/./sub/../../b/notes.md", cwd=work)
    assert set(_table(outside.stdout)) == {"../../b/notes.md"}, outside.stdout

    # --name names a single file; never a folder.
    named = _telha(url, key, "ingest", "--name", "renamed.md", "a/notes.md", cwd=work)
    assert set(_table(named.stdout)) == {"renamed.md"}
    assert _table(named.stdout)["renamed.md"]["source id"] != row["source id"]
    bad = _telha(url, key, "ingest", "--name", "x", "a", cwd=work)
    assert bad.returncode == 2 and "--name" in bad.stderr

    # On a terminal: the table's caption gives the root.
    code, out = run_on_tty(
        [sys.executable, "-m", "telha", "ingest", "--root", str(work), str(work / "a" / "sub")],
        _env(url, key),
    )
    assert code == 0, out
    assert f"root: {work}" in out and "a/sub/x.md" in out and "deduplicated" in out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_server_is_said_once_before_uploading(tmp_path: Path) -> None:
    work = _work(tmp_path)
    url = f"http://127.0.0.1:{_free_port()}"
    out = _telha(url, "telha_nokey", "ingest", ".", cwd=work)
    assert out.returncode == 2, out.stderr
    said = f"telha: cannot reach {url} (set --url or TELHA_URL)"
    assert out.stderr.strip() == said
    assert "refused" not in out.stdout and "uploading" not in out.stdout
    job = _telha(url, "telha_nokey", "job", str(uuid.uuid4()), cwd=work)
    assert job.returncode == 2 and job.stderr.strip() == said

    code, tty = run_on_tty(
        [sys.executable, "-m", "telha", "ingest", str(work)], _env(url, "telha_nokey")
    )
    assert code == 2 and tty.count("cannot reach") == 1 and "refused" not in tty, tty


def _csv_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "csvs"
    folder.mkdir(parents=True)
    for n in (1, 2):
        (folder / f"t{n}.csv").write_text(f"a,b\n{n},{uuid.uuid4()}\n")
    return folder


def test_ctrl_c_prints_the_table_so_far_and_exits_130(
    server: InProcessServer, tmp_path: Path
) -> None:
    """CSV jobs stay pending here (no tabular worker): Ctrl-C while waiting for them."""
    key = _key(server)
    _csv_folder(tmp_path)
    cmd = [sys.executable, "-m", "telha", "ingest", "csvs"]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=_env(server.base_url, key), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        enqueued = 0
        deadline = time.monotonic() + 30
        while enqueued < 2 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            enqueued += ": enqueued" in line
        assert enqueued == 2
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "Aborted" not in stderr and "Traceback" not in stderr
    assert "2 jobs already queued keep running on the server" in stderr
    table = _table(stdout)
    assert set(table) == {"csvs/t1.csv", "csvs/t2.csv"}
    for row in table.values():
        assert row["state"] == "enqueued" and row["job id"] and row["source id"]
    job = _telha(server.base_url, key, "job", table["csvs/t1.csv"]["job id"], cwd=tmp_path)
    assert "state     pending" in job.stdout  # it goes on without the CLI

    # On a terminal: the same, as a table, once the jobs are on the server.
    key = _key(server)
    _csv_folder(tmp_path / "tty")
    with TtyProcess(cmd, _env(server.base_url, key), cwd=str(tmp_path / "tty")) as p:
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}) as c:
            deadline = time.monotonic() + 30
            while len(c.get("/v1/ingest", params={"state": "pending"}).json()["jobs"]) < 2:
                assert time.monotonic() < deadline, p.output
                time.sleep(0.2)
        time.sleep(1)  # the CLI reads the enqueued events
        p.proc.send_signal(signal.SIGINT)
        code, out = p.finish()
    assert code == 130, out
    assert "job id" in out and "csvs/t1.csv" in out and "keep running on the server" in out


def test_a_job_no_worker_takes_shows_the_server_hint(
    server: InProcessServer, tmp_path: Path
) -> None:
    key = _key(server)
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "t.csv").write_text(f"a\n{uuid.uuid4()}\n")
    with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}) as c:
        probe = c.post(
            "/v1/ingest", json={"format": "csv", "name": "probe.csv", "content": "a\n1\n"}
        )
        if "hint" not in c.get(f"/v1/ingest/{probe.json()['jobId']}").json():
            pytest.skip("this server's job status has no hint field (docs/rest-api.md)")
    proc = subprocess.Popen(
        [sys.executable, "-m", "telha", "ingest", "one/t.csv"], cwd=tmp_path,
        env=_env(server.base_url, key), text=True, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 30
        while not any("hint" in x for x in lines) and time.monotonic() < deadline:
            lines.append(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert "one/t.csv: hint (no worker polls format csv)\n" in lines, lines


def _ingest_posts(server: InProcessServer) -> int:
    """``POST /v1/ingest`` requests in the server's access log so far."""
    count = 0
    for line in server.log_text().splitlines():
        if '"request"' in line and '"/v1/ingest"' in line:
            event = json.loads(line)
            count += event.get("method") == "POST" and event.get("route") == "/v1/ingest"
    return count


def test_a_refused_key_stops_at_once_with_one_line(server: InProcessServer, tmp_path: Path) -> None:
    """A key the server refuses (``UNAUTHENTICATED``): one line on stderr and exit 2 before
    any upload, not a refusal per file; piped and on a terminal."""
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(8):
        (folder / f"f{n}.txt").write_text(f"file {n}\n")
    posts = _ingest_posts(server)
    said = (
        f"telha: {server.base_url} refuses the API key (UNAUTHENTICATED: unknown or revoked"
        " API key; set --api-key or TELHA_API_KEY); 8 files not sent"
    )

    out = _telha(server.base_url, "telha_not_a_key", "ingest", "many", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [said]
    assert out.stdout == ""

    code, tty = run_on_tty(
        [sys.executable, "-m", "telha", "ingest", str(folder)],
        _env(server.base_url, "telha_not_a_key"),
    )
    assert code == 2, tty
    assert tty.strip() == said
    assert _ingest_posts(server) == posts  # no file was sent

    # A key the server knows goes on as before.
    good = _telha(server.base_url, _key(server), "ingest", "--no-wait", "many", cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert len(_table(good.stdout)) == 8 and _ingest_posts(server) == posts + 8


def _minted_key(server: InProcessServer) -> tuple[str, str]:
    """``(key id, key)`` of a new key in the server's store (what ``api-key create`` does)."""
    key_id, key = mint_api_key()
    cfg, base_dir = load_config(server.config, environ={})

    async def insert() -> None:
        async with open_store(cfg, base_dir, readers=1, pool_size=2) as store:
            await store.keys.add(Scope(f"t-{uuid.uuid4()}", "org"), key_id, hash_key(key))

    anyio.run(insert)
    return key_id, key


def test_a_key_revoked_midway_stops_every_other_file(
    server: InProcessServer, tmp_path: Path
) -> None:
    """The key is good when ``telha ingest`` starts and revoked while it runs: the first
    refusal stops it — the table of what the server took, one line, exit 2 — and the files
    after it are never sent. The second file is a FIFO, so the CLI stands still on it until
    the server refuses the key."""
    key_id, key = _minted_key(server)
    for name in ("a.txt", "c.txt", "d.txt"):
        (tmp_path / name).write_text(f"{name} {uuid.uuid4()}\n")
    os.mkfifo(tmp_path / "b.txt")
    posts = _ingest_posts(server)
    proc = subprocess.Popen(
        [sys.executable, "-m", "telha", "ingest", "--format", "text", "--concurrency", "1",
         "--no-wait", "a.txt", "b.txt", "c.txt", "d.txt"],
        cwd=tmp_path, env=_env(server.base_url, key), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while not any(x.startswith("a.txt: uploaded") for x in lines):
            assert time.monotonic() < deadline, lines
            lines.append(proc.stdout.readline())
        revoked = _telha(server.base_url, key, "api-key", "revoke", key_id, "--config",
                         str(server.config), cwd=tmp_path)  # fmt: skip
        assert revoked.returncode == 0, revoked.stderr
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}) as c:
            while c.get("/v1/usage").status_code != 401:  # the server forgets the key (≤ 10 s)
                assert time.monotonic() < deadline + 60
                time.sleep(0.2)
        (tmp_path / "b.txt").write_text("b, sent once the key is refused\n")
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, stderr
    out = "".join(lines) + stdout
    assert "c.txt" not in out and "d.txt" not in out, out
    assert set(_table(out)) == {"a.txt"}
    # The table's summary line (a.txt, taken before), then the refusal, once.
    summary, refusal = stderr.splitlines()
    assert summary.startswith("1 pending in ") or summary.startswith("1 completed in "), stderr
    assert refusal == (
        f"telha: {server.base_url} refuses the API key (UNAUTHENTICATED: unknown or revoked"
        " API key; set --api-key or TELHA_API_KEY); 3 files not sent"
    )
    assert _ingest_posts(server) == posts + 2  # a.txt, then b.txt refused; c and d never
