"""Doubt made visible through a real ``telha serve`` and its in-process workers, on both
engines (docs/formats.md, "Warnings"): the Greek corpus CSV read as Greek with its
confidence, the malformed-script HTML read as a browser reads it, and ``telha ingest``'s
closing table saying ``completed (N warnings)``, piped and on a terminal."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import CORPUS
from tests.support.inproc import InProcessServer
from tests.support.server import child_environ, settled_job, write_config
from tests.support.tty import run_on_tty

pytestmark = pytest.mark.anyio

HEADER = "file\tsource id\tjob id\tstate\tnodes\tfailure"


@pytest.fixture(scope="module")
def srv(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp(f"doubt-{engine}")
    config = write_config(
        folder, engine,
        workers={"in_process": ["tabular_worker", "docling_worker"], "concurrency": 1,
                 "processes": 1},
    )  # fmt: skip
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
async def c(srv: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
    key = srv.create_key("acme", "doubt")
    async with httpx.AsyncClient(base_url=srv.base_url, headers={"x-api-key": key}) as client:
        yield client


async def _done(c: httpx.AsyncClient, fmt: str, name: str, raw: bytes) -> dict[str, Any]:
    body = {"format": fmt, "name": name, "contentBase64": base64.b64encode(raw).decode()}
    job = await settled_job(c, body, within_s=120)
    assert job["state"] == "completed", job
    return job


async def _nodes(c: httpx.AsyncClient, source: str, label: str) -> list[dict[str, Any]]:
    page = await c.get("/v1/nodes", params={"sourceId": source, "label": label, "limit": 100})
    return list(page.json()["nodes"])


async def test_greek_csv_is_read_as_greek_with_its_confidence(c: httpx.AsyncClient) -> None:
    raw = (CORPUS / "csv/table-infer-iso-8859-7.csv").read_bytes()
    job = await _done(c, "csv", "greek.csv", raw)
    stats = job["stats"]
    assert stats["encoding"] in ("cp1253", "iso8859-7")
    assert 0.5 <= stats["encoding_confidence"] < 1 and "warnings" not in stats
    rows = await _nodes(c, job["sourceId"], "TABLE_ROW")
    names = sorted(r["properties"]["name"] for r in rows)
    assert names == ["Αλεξανδρος", "Ευστοργιος", "Λεωνιδας", "Μυρων"]


async def test_doubtful_csv_carries_its_warnings(c: httpx.AsyncClient) -> None:
    text = "id,imię,miasto\n1,Zażółć gęślą jaźń,Łódź\n2,Wojciech Świątek,Gdańsk,x\n"
    job = await _done(c, "csv", "pl.csv", text.encode("cp1250"))
    kinds = {w["kind"]: w["count"] for w in job["stats"]["warnings"]}
    assert kinds == {"encoding_guessed": 1, "ragged_rows": 1}


async def test_bad_script_html_keeps_its_paragraph(c: httpx.AsyncClient) -> None:
    raw = (CORPUS / "html/testHTMLBadScript.html").read_bytes()
    job = await _done(c, "html", "bad.html", raw)
    (paragraph,) = await _nodes(c, job["sourceId"], "PARAGRAPH")
    assert paragraph["properties"]["text"] == "This is a test."
    assert "warnings" not in job["stats"]


def _env(srv: InProcessServer) -> dict[str, str]:
    key = srv.create_key("acme", "doubt-cli")
    return {**child_environ(), "TELHA_API_KEY": key, "TELHA_URL": srv.base_url, "COLUMNS": "200",
            "PYTHONUNBUFFERED": "1"}  # fmt: skip


def test_ingest_table_says_completed_with_warnings(srv: InProcessServer, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "ragged.csv").write_bytes(b"a,b\n1,2\n3,4,5\n6,7,8,9\n")
    (work / "fine.csv").write_bytes(b"a,b\n1,2\n")
    env = _env(srv)
    piped = subprocess.run(
        [sys.executable, "-m", "telha", "ingest", "."], capture_output=True, text=True,
        env=env, timeout=180, check=False, cwd=work,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    lines = piped.stdout.splitlines()
    rows = [dict(zip(HEADER.split("\t"), line.split("\t"), strict=True))
            for line in lines[lines.index(HEADER) + 1 :]]  # fmt: skip
    states = {r["file"]: r["state"] for r in rows}
    assert states == {"fine.csv": "completed", "ragged.csv": "completed (2 warnings)"}

    (work / "ragged2.csv").write_bytes(b"x,y\n1,2,3\n")
    code, out = run_on_tty(
        [sys.executable, "-m", "telha", "ingest", "--root", str(work), str(work / "ragged2.csv")],
        env,
    )
    assert code == 0, out
    assert "completed (1 warning)" in out, out  # the plural only past one
