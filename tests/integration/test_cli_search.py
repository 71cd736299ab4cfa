"""``telha search`` against a real ``telha serve`` on each engine, as a person sees it: on a
terminal (a pseudo-terminal) each hit is ``name [start,end) text`` with the matched words
highlighted; piped, the same line without colour; a bad query exits 1 naming the error."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import httpx

from tests.support.server import ServerProcess
from tests.support.tty import run_on_tty
from tests.support.wait import wait_job_blocking

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DOC = "# Zen\n\nBeautiful is better than ugly.\n\nFlat is better.\n"


def _env(server: ServerProcess, key: str) -> dict[str, str]:
    return {**os.environ, "TELHA_API_KEY": key, "TELHA_URL": server.base_url, "TERM": "xterm"}


def _ingest(server: ServerProcess, key: str) -> bytes:
    """The markdown document ingested (through the in-process text worker); its version's
    canonical text."""
    with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=60) as c:
        body = {"format": "markdown", "name": "zen.md", "content": _DOC}
        resp = c.post("/v1/ingest", json=body)
        assert resp.status_code == 202, resp.text
        job = wait_job_blocking(c, resp.json()["jobId"])
        assert job["state"] == "completed", job
        source = c.get(f"/v1/sources/{job['sourceId']}").json()
        tx = source["versions"][0]["sourceVersionTx"]
        return c.get(f"/v1/sources/{job['sourceId']}/versions/{tx}/text").content


def test_search_prints_hits_with_byte_ranges_and_highlights(
    server: ServerProcess, scope_key: str
) -> None:
    text = _ingest(server, scope_key)
    piped = subprocess.run(
        [sys.executable, "-m", "telha", "search", "ugly"], capture_output=True, text=True,
        env=_env(server, scope_key), timeout=120, check=False,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    lines = piped.stdout.splitlines()
    assert "\x1b" not in piped.stdout
    spans = [re.fullmatch(r"zen\.md \[(\d+),(\d+)\) (.*)", line) for line in lines]
    assert len(lines) >= 1 and all(spans), lines
    # Each line's range slices the version's text; one is the paragraph (the section that
    # holds it matches too; ranking may differ between engines).
    for found in spans:
        assert found is not None
        start, end = int(found[1]), int(found[2])
        assert found[3] == " ".join(text[start:end].decode().split("\n")).rstrip()
    assert "zen.md [7,37) Beautiful is better than ugly." in lines
    assert text[7:37] == b"Beautiful is better than ugly."
    code, shown = run_on_tty(
        [sys.executable, "-m", "telha", "search", "ugly"], _env(server, scope_key)
    )
    assert code == 0, shown
    assert _ANSI.sub("", shown).strip().splitlines() == lines
    # The matched word, and only it, is bold yellow.
    marked = re.findall(r"\x1b\[[0-9;]*m([^\x1b]+)\x1b\[0m", shown)
    assert "ugly" in marked and "Beautiful is better than " not in marked


def test_no_match_and_a_bad_query(server: ServerProcess, scope_key: str) -> None:
    _ingest(server, scope_key)
    none = subprocess.run(
        [sys.executable, "-m", "telha", "search", "elsewhere"], capture_output=True,
        text=True, env=_env(server, scope_key), timeout=120, check=False,
    )  # fmt: skip
    assert none.returncode == 0 and none.stdout == ""
    assert "telha: no match" in none.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "telha", "search", '"open'], capture_output=True, text=True,
        env=_env(server, scope_key), timeout=120, check=False,
    )  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.startswith("telha: INVALID_REQUEST:"), bad.stderr
