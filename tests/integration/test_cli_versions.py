"""``telha diff``, ``telha retire`` and the states ``telha source`` prints, against a real
``telha serve`` on each engine: run under a real terminal (a pseudo-terminal, so the
output is what a person sees, colours included) and piped (the same lines, no colour);
error answers exit 1 with ``telha: CODE: message`` on stderr, bad arguments exit 2."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.support.inproc import InProcessServer
from tests.support.server import child_environ, write_config
from tests.support.tty import run_on_tty
from tests.support.wait import wait_job_blocking

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("cli-versions")
    config = write_config(folder, engine, workers={"in_process": ["tabular_worker"]})
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _env(server: InProcessServer, key: str) -> dict[str, str]:
    return {**child_environ(), "TELHA_API_KEY": key, "TELHA_URL": server.base_url, "TERM": "xterm"}


def _piped(server: InProcessServer, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "telha", *args], capture_output=True, text=True,
        env=_env(server, key), timeout=120, check=False,
    )  # fmt: skip


def _tty(server: InProcessServer, key: str, *args: str) -> tuple[int, str]:
    """``telha ARGS`` on a pseudo-terminal: its exit code and what it wrote there."""
    return run_on_tty([sys.executable, "-m", "telha", *args], _env(server, key))


def _ingest(server: InProcessServer, key: str, content: str) -> tuple[str, int]:
    """Ingest ``content`` as ``t.csv``; ``(source id, its version tx)``."""
    with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=60) as c:
        resp = c.post("/v1/ingest", json={"format": "csv", "name": "t.csv", "content": content})
        assert resp.status_code == 202, resp.text
        job = wait_job_blocking(c, resp.json()["jobId"])
        assert job["state"] == "completed", job
        source = c.get(f"/v1/sources/{job['sourceId']}").json()
        return str(job["sourceId"]), int(source["versions"][0]["sourceVersionTx"])


def test_diff_on_a_terminal_and_piped(server: InProcessServer) -> None:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    src, tx1 = _ingest(server, key, "k,v\na,1\nb,2\n")
    _, tx2 = _ingest(server, key, "k,v\na,1\nb,3\nc,4\n")
    code, shown = _tty(server, key, "diff", src)
    assert code == 0, shown
    summary = f"from {tx1} to {tx2}: 2 added, 1 removed, 1 changed, 1 unchanged"
    plain = _ANSI.sub("", shown).splitlines()
    assert plain[0] == summary
    assert sorted(line[:2] for line in plain[1:]) == ["+ ", "+ ", "- ", "~ "]
    changed = next(line for line in plain if line.startswith("~ "))
    assert "  TABLE  " in changed and changed.endswith("  [rows]")
    assert "\x1b[32m+ " in shown and "\x1b[31m- " in shown and "\x1b[33m~ " in shown
    piped = _piped(server, key, "diff", src, "--from", str(tx1), "--to", str(tx2))
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout
    assert piped.stdout.splitlines() == plain
    first = _piped(server, key, "diff", src, "--to", str(tx1))
    assert (
        first.stdout.splitlines()[0]
        == f"from - to {tx1}: 3 added, 0 removed, 0 changed, 0 unchanged"
    )

    wrong = _piped(server, key, "diff", src, "--from", str(tx2), "--to", str(tx1))
    assert wrong.returncode == 1 and wrong.stderr.startswith("telha: INVALID_REQUEST: ")
    missing = _piped(server, key, "diff", src, "--from", "5")
    assert missing.returncode == 1 and missing.stderr.startswith("telha: NOT_FOUND: ")
    usage = _piped(server, key, "diff", src, "--from", "abc")
    assert usage.returncode == 2 and "--from" in usage.stderr


def test_retire_on_a_terminal(server: InProcessServer) -> None:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    src, tx1 = _ingest(server, key, "k,v\na,1\n")
    code, shown = _tty(server, key, "retire", src, "--reason", "replaced")
    assert code == 0, shown
    lines = shown.splitlines()
    assert lines[0] == f"source   {src}"
    assert re.fullmatch(r"retired  \d+  \(replaced\)", lines[1]), lines
    assert lines[2:] == [f"version  {tx1}", "closed   2 nodes"]
    code, again = _tty(server, key, "retire", src)  # again: the first retire
    assert code == 0 and again == shown
    code, source = _tty(server, key, "source", src)
    assert code == 0, source
    assert lines[1].replace("retired  ", "retired ", 1) in source.splitlines()
    assert f"  {tx1}  retired  " in source
    code, unknown = _tty(server, key, "retire", str(uuid.uuid4()))
    assert code == 1 and unknown.startswith("telha: NOT_FOUND: ")
    code, empty = _tty(server, key, "retire", src, "--reason", "")
    assert code == 1 and empty.startswith("telha: INVALID_REQUEST: reason must not be empty")
