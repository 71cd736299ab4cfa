"""GDPR erasure on both engines, through the service (in-process, :mod:`tests.support.inproc`;
a ``telha serve`` subprocess where it is SIGKILLed mid-way): JSON, a corpus
DOCX and an email carrying a unique marker are erased; their bytes are refused afterwards
(410); the marker is gone from the database (SQLite: the raw bytes of the db, -wal and -shm
files and the data folder, after the server stopped; PostgreSQL: every row of every table);
another scope's identical bytes are untouched."""

from __future__ import annotations

import base64
import io
import json
import uuid
import zipfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import httpx
import pytest
from grpclib import GRPCError, Status

from telha.auth import hash_key
from telha.config import load_config
from telha.domain.ids import source_id_for
from telha.domain.model import Scope
from telha.storage import open_store
from tests.conftest import CORPUS
from tests.support.inproc import InProcessServer, Server
from tests.support.server import ServerProcess, telha_check, write_config
from tests.support.wait import wait_job
from tests.support.worker import scripted_worker
from workers_common import IngestionResultBuilder

pytestmark = pytest.mark.anyio


def marker_forms(marker: bytes) -> list[bytes]:
    """``marker`` as it could sit in a file: plain, hex (PostgreSQL's bytea text) and base64 at
    each of the three alignments (a job payload's ``content_b64``)."""
    forms = [marker, marker.hex().encode()]
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + marker)
        start = 4 if pad else 0
        end = len(encoded) - (4 if (pad + len(marker)) % 3 else 0)
        forms.append(encoded[start:end])
    return forms


def files_holding(folder: Path, marker: bytes) -> list[str]:
    """Files under ``folder`` (the database, its -wal and -shm, uploads) holding a form of
    ``marker``."""
    forms = marker_forms(marker)
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix not in (".log", ".toml", ".key"):
            data = path.read_bytes()
            found += [f"{path.name}: {f!r}" for f in forms if f in data]
    return found


async def rows_holding(dsn: str, marker: bytes) -> list[str]:
    """Tables of the PostgreSQL database ``dsn`` with a row holding a form of ``marker``."""
    conn = await asyncpg.connect(dsn)
    try:
        tables = [
            r[0]
            for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ]
        found = []
        for table in tables:
            for form in marker_forms(marker):
                hit = await conn.fetchval(
                    f'SELECT count(*) FROM "{table}" t WHERE position($1 in t::text) > 0',
                    form.decode(),
                )
                if hit:
                    found.append(f"{table}: {form!r}")
        return found
    finally:
        await conn.close()


async def stop_and_find(proc: Server, marker: str) -> None:
    """Stop the server and assert ``marker`` is nowhere: PostgreSQL rows, or (SQLite) the raw
    bytes of the database, -wal, -shm and upload files once the server has stopped."""
    dsn = _dsn_of(proc)
    if dsn:
        assert await rows_holding(dsn, marker.encode()) == []
    assert proc.stop() == 0, proc.log_text()
    if not dsn:
        assert files_holding(proc.db.parent, marker.encode()) == []


def docx_with(marker: str) -> bytes:
    """The corpus ``word_sample.docx`` with ``marker`` as its first paragraph's text."""
    src = CORPUS / "docx" / "word_sample.docx"
    out = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "word/document.xml":
                data = data.replace(b">Summer activities<", f">{marker} activities<".encode(), 1)
                assert marker.encode() in data
            zout.writestr(item, data)
    return out.getvalue()


def email_with(marker: str) -> bytes:
    return (
        "From: Ana Lima <ana.lima@example.org>\r\n"
        "To: Rui Sousa <rui.sousa@example.org>\r\n"
        f"Subject: Appointment {marker}\r\n"
        "Date: Tue, 03 Mar 2026 10:00:00 +0000\r\n"
        f"Message-ID: <{uuid.uuid4()}@example.org>\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "\r\n"
        f"Hello Rui, the diagnosis code is {marker}. Regards, Ana\r\n"
    ).encode()


class Api:
    """One scope's REST client."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def ingest(
        self, fmt: str, name: str, raw: bytes, status: int = 0, *, wait: bool = True
    ) -> dict[str, Any]:
        body = {"format": fmt, "name": name, "contentBase64": base64.b64encode(raw).decode()}
        resp = await self.client.post("/v1/ingest", json=body)
        if status:
            assert resp.status_code == status, resp.text
        assert resp.status_code in (200, 201, 202, 410), resp.text
        out = dict(resp.json())
        if resp.status_code == 202 and wait:
            job = await wait_job(self.client, out["jobId"], within_s=120)
            assert job["state"] == "completed", job
        return out

    async def erase(self, source_id: str, **body: Any) -> httpx.Response:
        return await self.client.post(
            f"/v1/sources/{source_id}/erase", json={"reason": "GDPR art. 17 request", **body}
        )

    async def source(self, source_id: str) -> dict[str, Any]:
        resp = await self.client.get(f"/v1/sources/{source_id}")
        assert resp.status_code == 200, resp.text
        return dict(resp.json())


@pytest.fixture
async def api_pair(tmp_path: Path, engine: str) -> AsyncIterator[tuple[Server, Api, Api, str]]:
    """A server with the JSON, docling and email workers, and two scopes' clients; yields
    ``(server, scope A, scope B, dsn or "")``."""
    config = write_config(
        tmp_path,
        engine,
        workers={"in_process": ["docling_worker", "email_worker"], "concurrency": 1},
        docling={"timeout_s": 120},
    )
    with InProcessServer(config) as proc:
        dsn = _dsn_of(proc)
        keys = [proc.create_key(f"t-{uuid.uuid4()}", "org") for _ in range(2)]
        async with (
            httpx.AsyncClient(
                base_url=proc.base_url, headers={"x-api-key": keys[0]}, timeout=60
            ) as a,
            httpx.AsyncClient(
                base_url=proc.base_url, headers={"x-api-key": keys[1]}, timeout=60
            ) as b,
        ):
            yield proc, Api(a), Api(b), dsn


async def test_erase_json_docx_email(api_pair: tuple[Server, Api, Api, str]) -> None:
    proc, a, b, dsn = api_pair
    marker = f"MARK{uuid.uuid4().hex}"
    records = json.dumps([{"patient": f"Ana {marker}", "code": i} for i in range(3)]).encode()
    docs = {
        "json": ("patients.json", records),
        "docx": ("letter.docx", docx_with(marker)),
        "eml": ("note.eml", email_with(marker)),
    }
    for fmt, (name, raw) in docs.items():
        await a.ingest(fmt, name, raw)
    await b.ingest("json", "patients.json", records, status=201)  # another scope, same bytes
    sources = {fmt: str(source_id_for(name)) for fmt, (name, _) in docs.items()}
    before = {fmt: await a.source(s) for fmt, s in sources.items()}
    json_nodes = (await a.client.get("/v1/nodes", params={"sourceId": sources["json"]})).json()

    for fmt, source_id in sources.items():
        resp = await a.erase(source_id)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        tx = before[fmt]["versions"][0]["sourceVersionTx"]
        assert body["versions"] == [{"sourceId": source_id, "sourceVersionTx": tx}]
        assert body["nodes"] >= 1 and body["spanRows"] >= 1 and body["bytes"] > 0, body
        assert body["reason"] == "GDPR art. 17 request" and body["versionTx"] is None
        again = await a.erase(source_id)  # idempotent: the same answer
        assert again.status_code == 200 and again.json() == body
        job = (await a.client.get(f"/v1/ingest/{body['erasureId']}")).json()
        assert job["kind"] == "erase" and job["state"] == "completed"
        steps = [e["detail"].split()[0] for e in job["events"] if e["transition"] == "erase_step"]
        assert steps == ["mark", "jobs", "text", "nodes", "spans"]
        [version] = (await a.source(source_id))["versions"]
        assert version["erased"] and version["erasureReason"] == "GDPR art. 17 request"
        # The version is marked at the mark step; the result is dated when the job completes.
        events = {e["detail"].split()[0] if e["detail"] else "": e for e in job["events"]}
        assert version["erasedAt"] == events["mark"]["at"]
        assert body["erasedAt"] == job["events"][-1]["at"]
        assert job["events"][-1]["transition"] == "completed"
        for what in ("text", "spans"):
            read = await a.client.get(f"/v1/sources/{source_id}/versions/{tx}/{what}")
            assert read.status_code == 410 and read.json()["error"]["code"] == "CONTENT_ERASED"
        listed = await a.client.get("/v1/nodes", params={"sourceId": source_id})
        assert listed.json()["nodes"] == []
    assert body["nodes"] >= 1  # the email: MESSAGE and PERSON nodes
    for node in json_nodes["nodes"]:
        assert (await a.client.get(f"/v1/nodes/{node['nodeId']}")).status_code == 404

    for fmt, (name, raw) in docs.items():  # the same bytes again: refused for good
        refused = await a.ingest(fmt, name, raw, status=410)
        assert refused["error"]["code"] == "CONTENT_ERASED"
        await a.ingest(fmt, f"renamed-{name}", raw, status=410)  # under another name too
        uploaded = await a.client.post(  # and as a multipart upload (streamed to disk first)
            "/v1/ingest", data={"format": fmt, "name": name}, files={"file": (name, raw)}
        )
        assert uploaded.status_code == 410, uploaded.text
        assert uploaded.json()["error"]["code"] == "CONTENT_ERASED"

    # Scope B's identical bytes are untouched: readable, and deduplicated when sent again.
    b_source = await b.source(sources["json"])
    tx_b = b_source["versions"][0]["sourceVersionTx"]
    text = await b.client.get(f"/v1/sources/{sources['json']}/versions/{tx_b}/text")
    assert text.status_code == 200 and marker in text.text
    assert (await b.ingest("json", "patients.json", records))["deduplicated"] is True

    if dsn:
        # Scope B still holds the marker: only scope A's rows must be clean.
        assert await rows_holding(dsn, marker.encode()) != []
        await b.erase(sources["json"])
        assert await rows_holding(dsn, marker.encode()) == []
        assert proc.stop() == 0, proc.log_text()
    else:
        assert files_holding(proc.db.parent, marker.encode()) != []  # scope B's, still there
        await b.erase(sources["json"])
        assert proc.stop() == 0, proc.log_text()
        assert files_holding(proc.db.parent, marker.encode()) == []


async def test_shared_canonical_text_is_erased_for_every_source(
    api_pair: tuple[Server, Api, Api, str],
) -> None:
    proc, a, _, _ = api_pair
    marker = f"MARK{uuid.uuid4().hex}"
    compact = json.dumps([{"name": marker, "n": 1}], separators=(",", ":")).encode()
    spaced = json.dumps([{"name": marker, "n": 1}], indent=2).encode()  # other raw bytes
    first = await a.ingest("json", "first.json", compact, status=201)
    second = await a.ingest("json", "second.json", spaced, status=201)
    resp = await a.erase(first["sourceId"])
    assert resp.status_code == 200, resp.text
    erased = {(v["sourceId"], v["sourceVersionTx"]) for v in resp.json()["versions"]}
    assert erased == {
        (first["sourceId"], first["sourceVersionTx"]),
        (second["sourceId"], second["sourceVersionTx"]),
    }
    shared = f"/v1/sources/{second['sourceId']}/versions/{second['sourceVersionTx']}/text"
    assert (await a.client.get(shared)).status_code == 410
    assert (await a.client.get(f"/v1/nodes/{second['nodeIds'][0]}")).status_code == 404
    assert (await a.source(second["sourceId"]))["versions"][0]["erased"] is True
    await a.ingest("json", "second.json", spaced, status=410)
    await stop_and_find(proc, marker)


async def test_a_node_with_other_provenance_is_trimmed_and_the_store_checks_clean(
    api_pair: tuple[Server, Api, Api, str],
) -> None:
    """A PERSON seen in two messages (its second version names it differently) loses only the
    erased message's version: current again with the first message's spans (``[start, end,
    tx]`` provenance into that version), and ``telha check`` reads that as consistent."""
    proc, a, _, _ = api_pair

    def message(n: int, sender: str) -> bytes:
        msg = EmailMessage()
        msg["From"], msg["To"] = sender, "bob@example.org"
        msg["Subject"], msg["Message-ID"] = f"Note {n}", f"<trim-{n}-{uuid.uuid4()}@example.org>"
        msg["Date"] = "Tue, 01 Sep 2026 10:00:00 +0000"
        msg.set_content(f"Body of note {n}.\n")
        return bytes(msg)

    await a.ingest("eml", "one.eml", message(1, "Ann <ann@example.org>"), status=202)
    second = await a.ingest("eml", "two.eml", message(2, "Ann Example <ann@example.org>"))
    job = await wait_job(a.client, second["jobId"])
    resp = await a.erase(job["sourceId"])
    assert resp.status_code == 200, resp.text
    assert resp.json()["nodesTrimmed"] >= 1, resp.json()
    people = (await a.client.get("/v1/nodes", params={"label": "PERSON"})).json()["nodes"]
    ann = [n for n in people if n["properties"].get("address") == "ann@example.org"]
    assert len(ann) == 1 and ann[0]["properties"]["name"] == "Ann", ann
    assert proc.stop() == 0
    checked = await anyio.to_thread.run_sync(telha_check, proc.config)
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_bad_erase_requests(api_pair: tuple[Server, Api, Api, str]) -> None:
    _, a, _, _ = api_pair
    made = await a.ingest("json", "bad-inputs.json", b'[{"a": 1}]', status=201)
    source = made["sourceId"]
    assert (await a.erase(str(uuid.uuid4()))).status_code == 404  # unknown source
    assert (await a.erase("not-a-uuid")).status_code == 404
    assert (await a.erase(source, versionTx=made["sourceVersionTx"] + 1)).status_code == 404
    for bad in ({"versionTx": "abc"}, {"versionTx": -1}, {"versionTx": 1.5}):
        resp = await a.erase(source, **bad)
        assert resp.status_code == 400, resp.text
        assert resp.json()["error"]["code"] == "INVALID_REQUEST"
    url = f"/v1/sources/{source}/erase"
    for body in (b"{}", b'{"reason": "  "}', b"not json", b'{"reason": "x", "extra": 1}'):
        resp = await a.client.post(url, content=body)
        assert resp.status_code == 400, (body, resp.text)
    assert (
        await a.client.post(url, json={"reason": "x"}, headers={"x-api-key": ""})
    ).status_code == 401
    # One version only; the rest of the source stays.
    second = await a.ingest("json", "bad-inputs.json", b'[{"a": 2}]', status=201)
    resp = await a.erase(source, versionTx=made["sourceVersionTx"])
    assert resp.status_code == 200 and resp.json()["versionTx"] == made["sourceVersionTx"]
    versions = (await a.source(source))["versions"]
    assert [v["erased"] for v in versions] == [False, True]
    text = f"/v1/sources/{source}/versions/{second['sourceVersionTx']}/text"
    assert (await a.client.get(text)).text == '{"a":2}'
    again = await a.erase(source, versionTx=made["sourceVersionTx"])
    assert again.json() == resp.json()


@pytest.fixture
def stream_server(tmp_path: Path, engine: str) -> Iterator[Server]:
    config = write_config(tmp_path, engine, workers={"in_process": []}, jobs={"lease_secs": 30})
    with InProcessServer(config) as proc:
        yield proc


async def _client(proc: Server) -> httpx.AsyncClient:
    key = proc.create_key(f"t-{uuid.uuid4()}", "org")
    return httpx.AsyncClient(base_url=proc.base_url, headers={"x-api-key": key}, timeout=60)


def _dsn_of(proc: Server) -> str:
    for line in proc.config.read_text().splitlines():
        if line.startswith("dsn"):
            return str(json.loads(line.split("=", 1)[1]))
    return ""


async def test_erasure_during_an_in_flight_stream(stream_server: Server) -> None:
    marker = f"MARK{uuid.uuid4().hex}"
    async with await _client(stream_server) as c:
        api = Api(c)
        raw = f"name\n{marker}\n".encode()
        posted = await api.ingest("csv", "stream.csv", raw, status=202, wait=False)
        key = c.headers["x-api-key"]
        scope = await _scope_of(stream_server, key)
        token = stream_server.worker_token(scope)
        async with scripted_worker(stream_server.grpc_addr, token) as worker:
            job = await worker.next_job(["csv"])
            first, base = _part([f"row {marker}"], 0, 0)
            assert (await worker.submit(job, first)).accepted
            resp = await api.erase(posted["sourceId"])
            assert resp.status_code == 200, resp.text
            assert resp.json()["jobs"] == 1 and resp.json()["nodes"] == 1
            with pytest.raises(GRPCError) as err:  # the late submission writes nothing
                await worker.submit(job, _part(["more"], base, 1, partial=False)[0])
            assert err.value.status is Status.FAILED_PRECONDITION
        dead = await wait_job(api.client, posted["jobId"], "dead")
        assert str(dead["failureReason"]).startswith("erased:")
        assert (await c.get("/v1/nodes", params={"label": "ROW"})).json()["nodes"] == []
    await stop_and_find(stream_server, marker)


async def _scope_of(proc: Server, key: str) -> Scope:
    cfg, base_dir = load_config(proc.config, environ={})
    async with open_store(cfg, base_dir, readers=1, pool_size=2) as store:
        scope = await store.keys.scope_for(hash_key(key))
    assert scope is not None
    return scope


def _part(
    rows: list[str], base: int, seq: int, *, partial: bool = True
) -> tuple[dict[str, object], int]:
    b = IngestionResultBuilder(base_offset=base)
    for i, row in enumerate(rows):
        span = b.add_span_text(row + "\n", kind="cell")
        b.add_node(["ROW"], {"seq": seq, "i": i, "text": row}, spans=[span])
    out = b.build()
    out["seq"], out["partial"] = seq, partial
    return out, base + b.byte_length


async def test_erasure_killed_mid_way_finishes_after_restart(
    tmp_path: Path, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, engine, workers={"in_process": []}, jobs={"lease_secs": 1})
    marker = f"MARK{uuid.uuid4().hex}"
    monkeypatch.setenv("TELHA_FAILPOINT_ERASE_PAUSE_AFTER", "text")
    with ServerProcess(config) as proc:
        monkeypatch.delenv("TELHA_FAILPOINT_ERASE_PAUSE_AFTER")
        key = proc.create_key(f"t-{uuid.uuid4()}", "org")
        async with httpx.AsyncClient(
            base_url=proc.base_url, headers={"x-api-key": key}, timeout=60
        ) as c:
            api = Api(c)
            made = await api.ingest("json", "killed.json", json.dumps([{"v": marker}]).encode())
            async with anyio.create_task_group() as tg:
                tg.start_soon(api.erase, made["sourceId"])  # never answers: the server dies
                erasure = await _poll(lambda: _erasure_of(api, made["sourceId"]))
                await _poll(lambda: _after_step(api, erasure, "text"))
                proc.kill()  # SIGKILL, after the text step, before the nodes step
                tg.cancel_scope.cancel()
        # The check sees what the erasure has not done yet: nodes and span rows remain.
        assert await _violations(proc) == ["span_rows", "node_versions"]
        # Until the erasure finishes, the blocklist already refuses and the text is gone.
        proc.start()
        async with httpx.AsyncClient(
            base_url=proc.base_url, headers={"x-api-key": key}, timeout=60
        ) as c:
            api = Api(c)
            job = await wait_job(api.client, erasure, "completed", within_s=60)
            assert _steps(job) == ["mark", "jobs", "text", "nodes", "spans"]
            assert "lease_expired" in [e["transition"] for e in job["events"]]
            assert job["stats"]["nodes"] == 1 and job["stats"]["spanRows"] == 1
            assert (await c.get(f"/v1/nodes/{made['nodeIds'][0]}")).status_code == 404
            resp = await api.erase(made["sourceId"])
            assert resp.status_code == 200 and resp.json() == job["stats"]
        await stop_and_find(proc, marker)
        assert await _violations(proc) == []


async def _violations(proc: ServerProcess) -> list[str]:
    """The kinds of leftover ``telha check`` names under its ``erasure`` check on the
    (stopped) server's store; its exit code agrees (1 with any, 0 with none)."""
    result = await anyio.to_thread.run_sync(telha_check, proc.config)
    found = [
        line.split(": ")[1]
        for line in result.stdout.splitlines()
        if line.startswith("VIOLATION erasure: ")
    ]
    assert result.returncode == (1 if found else 0), result.stdout + result.stderr
    return found


async def _poll(probe: Callable[[], Awaitable[str | None]], within_s: float = 20) -> str:
    """The first non-``None`` answer of ``probe``, asked every 50 ms."""
    with anyio.fail_after(within_s):
        while True:
            found = await probe()
            if found is not None:
                return found
            await anyio.sleep(0.05)


async def _erasure_of(api: Api, source_id: str) -> str | None:
    version = (await api.source(source_id))["versions"][0]
    return str(version["erasureId"]) if version["erased"] else None


async def _after_step(api: Api, erasure: str, step: str) -> str | None:
    return step if step in _steps(await wait_job(api.client, erasure, "leased")) else None


def _steps(job: dict[str, Any]) -> list[str]:
    return [e["detail"].split()[0] for e in job["events"] if e["transition"] == "erase_step"]


async def test_blocklist_at_submit_time_and_for_child_jobs(stream_server: Server) -> None:
    async with await _client(stream_server) as c:
        api = Api(c)
        raw = json.dumps([{"who": "erased person"}]).encode()
        made = await api.ingest("json", "gone.json", raw, status=201)
        canonical = (
            await c.get(f"/v1/sources/{made['sourceId']}/versions/{made['sourceVersionTx']}/text")
        ).text
        assert (await api.erase(made["sourceId"])).status_code == 200
        scope = await _scope_of(stream_server, c.headers["x-api-key"])
        async with scripted_worker(stream_server.grpc_addr, stream_server.worker_token(scope)) as w:
            # Submit time: other raw bytes whose canonical text is the erased one.
            posted = await api.ingest("csv", "same-text.csv", b"x\n1\n", status=202, wait=False)
            job = await w.next_job(["csv"])
            sub = {"v": 1, "canonicalText": canonical, "spans": [], "nodes": [{"labels": ["DOC"],
                   "properties": {}, "spanRefs": []}], "relationships": []}  # fmt: skip
            assert not (await w.submit(job, sub)).accepted
            dead = await wait_job(api.client, posted["jobId"])
            assert dead["state"] == "dead" and dead["failureReason"].startswith("erased:")
            # It wrote no version: the source lists none, its only job dead.
            source = (await c.get(f"/v1/sources/{posted['sourceId']}")).json()
            assert (source["versions"], source["state"]) == ([], "pending")
            assert (source["lastJobId"], source["lastJobState"]) == (posted["jobId"], "dead")
            # A child job carrying erased bytes is refused; the parent completes.
            parent = await api.ingest("csv", "parent.csv", b"y\n2\n", status=202, wait=False)
            job = await w.next_job(["csv"])
            child = {"format": "csv", "name": "attached.csv",
                     "contentB64": base64.b64encode(raw).decode()}  # fmt: skip
            ok = {"v": 1, "canonicalText": "parent\n", "spans": [], "nodes": [],
                  "relationships": [], "childJobs": [child]}  # fmt: skip
            assert (await w.submit(job, ok)).accepted
            done = await wait_job(api.client, parent["jobId"])
            assert done["state"] == "completed"
            refused = [e for e in done["events"] if e["transition"] == "child_refused"]
            assert [e["detail"] for e in refused] == ["attached.csv: content erased"]
            assert (await c.get(f"/v1/sources/{source_id_for('attached.csv')}")).status_code == 404
