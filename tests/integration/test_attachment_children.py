"""An e-mail's attachments are part of its answer, on both engines, through a real
``telha serve`` (docs/rest-api.md, "Child jobs"; docs/formats.md, "Email"; docs/cli-and-client.md):
the parent's status counts its children by state, each attachment source is named
``<message name>/<file name>`` and its version names the parent, and ``telha ingest``'s table
says ``completed, 1 of 4 attachments dead`` (piped and on a terminal) instead of a bare
``completed``. The dead attachment is a ``.msg`` that is not one (corrupt input: it dies at
its first attempt, every time)."""

from __future__ import annotations

import base64
import re
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from telha.storage.listings.queries import VERSION_PARENTS_SQL
from tests.conftest import CORPUS
from tests.support.inproc import InProcessServer
from tests.support.pg import ENGINES, require_engine
from tests.support.server import child_environ, telha_check, write_config
from tests.support.tty import run_on_tty
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

HEADER = "file\tsource id\tjob id\tstate\tnodes\tfailure"
#: An OLE compound file's magic and nothing readable after it: email_worker's ``msg`` job
#: ends ``corrupt_input`` (dead at once).
BAD_MSG = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600


@pytest.fixture(scope="module", params=ENGINES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessServer]:
    engine = require_engine(str(request.param))
    folder = tmp_path_factory.mktemp(f"children-{engine}")
    workers = ["email_worker", "tabular_worker", "text_worker"]
    config = write_config(folder, engine, workers={"in_process": workers, "concurrency": 2})
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _report() -> bytes:
    """A message with four attachments Telha ingests: a CSV, two different files both named
    ``n.txt``, and a broken ``.msg``; and one it does not (an ATTACHMENT node)."""
    msg = EmailMessage()
    msg["From"], msg["Subject"] = "a@example.test", "numbers"
    msg.set_content("Attached.")
    msg.add_attachment(b"id,v\n1,2\n", maintype="text", subtype="csv", filename="n.csv")
    msg.add_attachment(b"First notes.\n", maintype="text", subtype="plain", filename="n.txt")
    msg.add_attachment(b"Other notes.\n", maintype="text", subtype="plain", filename="n.txt")
    msg.add_attachment(BAD_MSG, maintype="application", subtype="vnd.ms-outlook",
                       filename="fwd.msg")  # fmt: skip
    msg.add_attachment(b"\x00\x01", maintype="application", subtype="x-blob", filename="b.bin")
    return bytes(msg)


async def _settled(c: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    """The parent's status once none of its children is pending or leased."""
    for _ in range(600):
        job = (await c.get(f"/v1/ingest/{job_id}")).json()
        if job["children"] and not {"pending", "leased"} & set(job["children"]):
            return dict(job)
        await anyio.sleep(0.1)
    raise AssertionError(f"children of {job_id} still running: {job}")


async def test_status_counts_children_and_versions_name_their_parent(
    server: InProcessServer,
) -> None:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": key}, timeout=30
    ) as c:
        body = {"format": "eml", "name": "inbox/report.eml",
                "contentBase64": base64.b64encode(_report()).decode()}  # fmt: skip
        resp = await c.post("/v1/ingest", json=body)
        assert resp.status_code == 202, resp.text
        parent_id = resp.json()["jobId"]
        parent = await wait_job(c, parent_id, within_s=60)
        assert parent["state"] == "completed", parent
        parent = await _settled(c, parent_id)
        assert parent["children"] == {"completed": 3, "dead": 1}
        assert parent["stats"]["child_jobs"] == 4
        kids = (await c.get("/v1/ingest", params={"parent": parent_id})).json()["jobs"]
        by_name = {k["name"]: k for k in kids}
        assert set(by_name) == {
            "inbox/report.eml/n.csv", "inbox/report.eml/n.txt", "inbox/report.eml/n (2).txt",
            "inbox/report.eml/fwd.msg",
        }  # fmt: skip
        dead = by_name["inbox/report.eml/fwd.msg"]
        assert dead["state"] == "dead" and dead["failureReason"].startswith("corrupt_input")
        assert all(k["parentJobId"] == parent_id for k in kids)
        # Each attachment's version names the message's source, version and job.
        source = (await c.get(f"/v1/sources/{parent['sourceId']}")).json()
        assert source["name"] == "inbox/report.eml"
        (message_version,) = source["versions"]
        assert message_version["parent"] is None  # a client sent it
        for name in ("inbox/report.eml/n.txt", "inbox/report.eml/n (2).txt"):
            child = (await c.get(f"/v1/sources/{by_name[name]['sourceId']}")).json()
            assert child["name"] == name
            (version,) = child["versions"]
            assert version["parent"] == {
                "jobId": parent_id, "sourceId": parent["sourceId"], "name": "inbox/report.eml",
                "sourceVersionTx": message_version["sourceVersionTx"],
            }  # fmt: skip
        texts = set()
        for name in ("inbox/report.eml/n.txt", "inbox/report.eml/n (2).txt"):
            child = (await c.get(f"/v1/sources/{by_name[name]['sourceId']}")).json()
            tx = child["versions"][0]["sourceVersionTx"]
            url = f"/v1/sources/{child['sourceId']}/versions/{tx}/text"
            texts.add((await c.get(url)).text.strip())
        assert texts == {"First notes.", "Other notes."}  # two files of one name: two sources
        # The dead one's source has no version: it answers pending, with its dead job.
        dead_source = (await c.get(f"/v1/sources/{dead['sourceId']}")).json()
        assert dead_source["versions"] == [] and dead_source["lastJobState"] == "dead"
        # The same bytes again: the message is deduplicated, no new attachment source.
        again = await c.post("/v1/ingest", json=body)
        assert again.status_code == 200 and again.json()["deduplicated"] is True, again.text
        listed = (await c.get("/v1/sources", params={"prefix": "inbox/report.eml/"})).json()
        assert len(listed["sources"]) == 4
    checked = telha_check(server.config)  # the store's invariants hold
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_version_s_parent_is_read_by_primary_keys(server: InProcessServer) -> None:
    """SQLite's plan of the parent read: every table by its primary key, never a scan."""
    if "postgres" in server.config.read_text():
        pytest.skip("SQLite's query plan")
    with sqlite3.connect(server.config.parent / "telha.db") as db:
        plan = db.execute(f"EXPLAIN QUERY PLAN {VERSION_PARENTS_SQL}", (1, bytes(16))).fetchall()
    steps = [row[3] for row in plan]
    assert len(steps) == 5 and all(" USING PRIMARY KEY " in s for s in steps), steps


def _env(server: InProcessServer) -> dict[str, str]:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    return {**child_environ(), "TELHA_API_KEY": key, "TELHA_URL": server.base_url,
            "COLUMNS": "250", "PYTHONUNBUFFERED": "1"}  # fmt: skip


def _table(stdout: str) -> dict[str, dict[str, str]]:
    lines = stdout.splitlines()
    start = lines.index(HEADER)
    header = lines[start].split("\t")
    rows = [dict(zip(header, line.split("\t"), strict=True)) for line in lines[start + 1 :]]
    return {r["file"]: r for r in rows}


def _nested() -> bytes:
    """A message whose one attachment is a message with a text and a broken ``.msg``."""
    inner = EmailMessage()
    inner["From"], inner["Subject"], inner["Message-ID"] = "b@example.test", "fwd", "<in@x>"
    inner.set_content("Inner.")
    inner.add_attachment(b"Inner notes.\n", maintype="text", subtype="plain", filename="i.txt")
    inner.add_attachment(BAD_MSG, maintype="application", subtype="vnd.ms-outlook",
                         filename="bad.msg")  # fmt: skip
    outer = EmailMessage()
    outer["From"], outer["Subject"] = "a@example.test", "forwarded"
    outer.set_content("See the forwarded message.")
    outer.add_attachment(bytes(inner), maintype="application", subtype="octet-stream",
                         filename="fwd.eml")  # fmt: skip
    return bytes(outer)


def _pdf_attached() -> bytes:
    """A message with a PDF attachment, a format no worker of this server polls."""
    msg = EmailMessage()
    msg["From"], msg["Subject"] = "a@example.test", "a pdf"
    msg.set_content("Attached.")
    msg.add_attachment(b"%PDF-1.4\n%%EOF\n", maintype="application", subtype="pdf",
                       filename="r.pdf")  # fmt: skip
    return bytes(msg)


def test_ingest_table_says_how_many_attachments_died_piped(
    server: InProcessServer, tmp_path: Path
) -> None:
    (tmp_path / "report.eml").write_bytes(_report())
    (tmp_path / "stuck.eml").write_bytes(_pdf_attached())
    (tmp_path / "nested.eml").write_bytes(_nested())
    (tmp_path / "plain.eml").write_bytes(
        b"From: a@example.test\nSubject: none\n\nNo attachments.\n"
    )
    env = _env(server)
    names = ["report.eml", "stuck.eml", "plain.eml", "nested.eml"]
    proc = subprocess.run(
        [sys.executable, "-m", "telha", "ingest", *names],
        capture_output=True, text=True, env=env, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the messages themselves made it
    rows = _table(proc.stdout)
    assert rows["report.eml"]["state"] == "completed, 1 of 4 attachments dead"
    # A child no worker takes: the command stops waiting and says why.
    assert rows["stuck.eml"]["state"] == (
        "completed, 1 of 1 attachments pending (no worker polls format pdf)"
    )
    assert rows["plain.eml"]["state"] == "completed"
    # An attached message's dead attachment is one of the file's: the tree is counted.
    assert rows["nested.eml"]["state"] == "completed, 1 of 3 attachments dead"
    assert "nested.eml: attachments: 2 completed, 1 dead" in proc.stdout.splitlines()
    assert "report.eml: attachments: 3 completed, 1 dead" in proc.stdout.splitlines()
    # telha source prints, under an attachment's version, the message it came from.
    headers = {"x-api-key": env["TELHA_API_KEY"]}
    prefix = {"prefix": "report.eml/n.csv"}
    listed = httpx.get(f"{server.base_url}/v1/sources", params=prefix, headers=headers).json()
    (child,) = listed["sources"]
    shown = subprocess.run(
        [sys.executable, "-m", "telha", "source", child["sourceId"]],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    ).stdout  # fmt: skip
    parent_line = f"    parent  report.eml  source {rows['report.eml']['source id']}  version "
    assert any(line.startswith(parent_line) for line in shown.splitlines()), shown
    assert f"job {rows['report.eml']['job id']}" in shown
    prefix = {"prefix": "nested.eml/"}
    listed = httpx.get(f"{server.base_url}/v1/sources", params=prefix, headers=headers).json()
    assert sorted(s["name"] for s in listed["sources"]) == [
        "nested.eml/fwd.eml", "nested.eml/fwd.eml/bad.msg", "nested.eml/fwd.eml/i.txt",
    ]  # fmt: skip


def test_ingest_table_says_how_many_attachments_died_on_a_terminal(
    server: InProcessServer, tmp_path: Path
) -> None:
    (tmp_path / "report.eml").write_bytes(_report())
    code, out = run_on_tty(
        [
            sys.executable,
            "-m",
            "telha",
            "ingest",
            "--root",
            str(tmp_path),
            str(tmp_path / "report.eml"),
        ],
        _env(server),
        timeout_s=180,
    )
    assert code == 0, out
    # The table's row (the plain line after the wait is "report.eml: attachments: …").
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)  # colours and cursor moves
    (row,) = [line for line in plain.splitlines() if line.startswith(" report.eml ")]
    assert "completed, 1 of 4 attachments dead" in row, out


def test_corpus_messages_complete_with_their_attachments(server: InProcessServer) -> None:
    """Every corpus e-mail completes with every attachment (none dead: no note) but the one
    whose forwarded message carries a PDF (no worker here reads PDF: the note says so), and
    an attachment is found under its message's name."""
    env = _env(server)
    proc = subprocess.run(
        [sys.executable, "-m", "telha", "ingest", "--root", str(CORPUS), str(CORPUS / "eml")],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _table(proc.stdout)
    assert len(rows) == len(list((CORPUS / "eml").iterdir()))
    states = {f: r["state"] for f, r in rows.items()}
    # Its forwarded message carries a PDF, and this server runs no PDF worker.
    assert states.pop("eml/attachment_message_rfc822.eml") == (
        "completed, 1 of 2 attachments pending (no worker polls format pdf)"
    )
    assert set(states.values()) == {"completed"}, states
    assert "eml/cpython_msg_02.eml: attachments: 7 completed" in proc.stdout.splitlines()
    headers = {"x-api-key": env["TELHA_API_KEY"]}
    prefix = {"prefix": "eml/cpython_msg_02.eml/"}
    listed = httpx.get(f"{server.base_url}/v1/sources", params=prefix, headers=headers).json()
    names = sorted(s["name"] for s in listed["sources"])
    assert names[:3] == [
        "eml/cpython_msg_02.eml/attachment", "eml/cpython_msg_02.eml/attachment (2)",
        "eml/cpython_msg_02.eml/message (2).eml",
    ]  # fmt: skip
    assert len(names) == 7
