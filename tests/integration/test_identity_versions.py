"""A version's identity is its bytes and how they were read, on each engine against real
``telha serve`` processes (docs/architecture.md, "Dedup, identity and versions";
docs/rest-api.md, "Re-projection"): the same bytes with other effective options make a new
version (``reason: "options"``) that supersedes with its diff, the same options spelled with
their defaults deduplicate; a worker whose projection version was bumped makes the same bytes
a new version (``"projection"``); ``telha reproject --dry-run`` lists exactly the outdated
current versions (never retired ones; those whose raw bytes are gone as ``raw-gone``) and a
re-projection reads them again from their stored bytes; a retired ``format=json`` source
comes back when its bytes come back."""

from __future__ import annotations

import base64
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio.lowlevel
import httpx
import pytest

from telha.config import load_config
from telha.storage import open_store
from telha.storage.core.tx import Tx
from tests.support.inproc import InProcessServer, Server
from tests.support.server import ServerProcess, child_environ, write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

VERSION_ENV = "TELHA_TEST_PROJECTION_VERSION"
GREEK = "name,city\nΛεωνιδας,Αθηνα\nΣοφια,Πατρα\n".encode("iso-8859-7")


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("identity")
    config = write_config(folder, engine, workers={"in_process": ["tabular_worker"]})
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
async def client(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": key}, timeout=60
    ) as c:
        yield c


async def _post(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    if isinstance(body.get("content"), bytes):
        body["contentBase64"] = base64.b64encode(body.pop("content")).decode()
    return await client.post("/v1/ingest", json=body)


async def _done(client: httpx.AsyncClient, resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 202, resp.text
    job = await wait_job(client, resp.json()["jobId"])
    assert job["state"] == "completed", job
    return job


async def _versions(client: httpx.AsyncClient, source_id: str) -> list[dict[str, Any]]:
    resp = await client.get(f"/v1/sources/{source_id}")
    assert resp.status_code == 200, resp.text
    return list(resp.json()["versions"])


async def test_other_options_make_a_new_version_defaults_do_not(client: httpx.AsyncClient) -> None:
    name = "people.csv"
    first = await _post(client, format="csv", name=name, content=GREEK,
                        options={"encoding": "cp1251"})  # fmt: skip
    await _done(client, first)
    source_id = first.json()["sourceId"]
    # The same bytes and options: deduplicated; the same with a default spelled out too.
    spelled = {"encoding": "cp1251", "header": "auto", "clarify": None}
    again = await _post(client, format="csv", name=name, content=GREEK, options=spelled)
    assert again.status_code == 200 and again.json()["deduplicated"] is True, again.text
    # The documented remedy: the right encoding is a new version, not "deduplicated".
    fixed = await _post(client, format="csv", name=name, content=GREEK,
                        options={"encoding": "iso-8859-7"})  # fmt: skip
    await _done(client, fixed)
    new, old = await _versions(client, source_id)
    assert (new["state"], old["state"]) == ("current", "superseded")
    assert new["contentHash"] == old["contentHash"]
    assert (new["reason"], old["reason"]) == ("options", None)
    assert new["fingerprint"] != old["fingerprint"] and len(new["fingerprint"]) == 64
    assert new["projection"]["worker"] == "tabular_worker"
    assert new["projection"]["options"] == {"clarify": False, "encoding": "iso-8859-7",
                                            "header": "auto"}  # fmt: skip
    assert old["projection"]["options"]["encoding"] == "cp1251"
    assert new["changes"]["nodesChanged"] + new["changes"]["nodesAdded"] > 0
    diff = await client.get(f"/v1/sources/{source_id}/diff")
    assert diff.status_code == 200, diff.text
    got = diff.json()
    assert (got["from"], got["to"]) == (old["sourceVersionTx"], new["sourceVersionTx"])
    assert got["added"] or got["changed"], got
    text = await client.get(f"/v1/sources/{source_id}/versions/{new['sourceVersionTx']}/text")
    assert "Λεωνιδας" in text.text
    # And the new identity deduplicates in its turn.
    last = await _post(client, format="csv", name=name, content=GREEK,
                       options={"encoding": "iso-8859-7"})  # fmt: skip
    assert last.status_code == 200 and last.json()["deduplicated"] is True


async def test_retired_json_source_comes_back(client: httpx.AsyncClient) -> None:
    body = {"format": "json", "name": "risk.json", "content": '{"title": "delay"}'}
    first = await client.post("/v1/ingest", json=body)
    assert first.status_code == 201, first.text
    source_id = first.json()["sourceId"]
    assert (await client.delete(f"/v1/sources/{source_id}")).status_code == 200
    back = await client.post("/v1/ingest", json=body)
    assert back.status_code == 201, back.text  # not "deduplicated": the source is retired
    versions = await _versions(client, source_id)
    assert [v["state"] for v in versions] == ["current", "retired"]
    assert versions[0]["reason"] == "restored"
    assert versions[0]["projection"]["worker"] == "core:json-bypass"
    source = (await client.get(f"/v1/sources/{source_id}")).json()
    assert source["retired"] is None and source["state"] == "current"
    again = await client.post("/v1/ingest", json=body)
    assert again.status_code == 200 and again.json()["deduplicated"] is True


async def test_retired_worker_source_comes_back(client: httpx.AsyncClient) -> None:
    """The same rule on the worker path."""
    first = await _post(client, format="csv", name="back.csv", content=b"a,b\n1,2\n")
    await _done(client, first)
    source_id = first.json()["sourceId"]
    assert (await client.delete(f"/v1/sources/{source_id}")).status_code == 200
    await _done(client, await _post(client, format="csv", name="back.csv", content=b"a,b\n1,2\n"))
    assert [v["state"] for v in await _versions(client, source_id)] == ["current", "retired"]


def _reproject_cli(server: Server, key: str, *args: str) -> tuple[list[list[str]], str]:
    done = subprocess.run(
        [sys.executable, "-m", "telha", "reproject", "--url", server.base_url,
         "--api-key", key, *args],
        capture_output=True, text=True, timeout=120, check=False, env=child_environ(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [line.split("\t") for line in done.stdout.splitlines()], done.stderr


async def _forget_raw(config: Path, digest_hex: str) -> None:
    """The raw upload of ``digest`` removed, as if an operator had deleted it."""
    cfg, base_dir = load_config(config, environ={})
    digest = bytes.fromhex(digest_hex)

    async def drop(tx: Tx) -> None:
        await tx.execute("DELETE FROM raw_chunks WHERE content_hash = ?", digest)
        await tx.execute("DELETE FROM raw_blobs WHERE content_hash = ?", digest)

    async with open_store(cfg, base_dir, readers=1, pool_size=2) as store:
        await store.transaction("test: forget raw", drop)  # type: ignore[attr-defined]


async def test_projection_bump_and_reproject(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(
        tmp_path, engine, workers={"in_process": ["tests.support.projected_worker"]}
    )
    monkeypatch.setenv(VERSION_ENV, "1")
    srv = ServerProcess(config)
    with srv:
        key = srv.create_key("t-reproject", "org")
        async with httpx.AsyncClient(base_url=srv.base_url, headers={"x-api-key": key},
                                     timeout=60) as c:  # fmt: skip
            ids = {}
            for name, fmt in (("a.md", "markdown"), ("c.md", "markdown"), ("e.txt", "text")):
                resp = await _post(c, format=fmt, name=name, content=f"# {name}\n\nbody\n")
                await _done(c, resp)
                ids[name] = resp.json()["sourceId"]
            for name in ("b.md", "d.md"):  # uploads: their raw bytes are stored
                files = {"file": (name, f"{name} text\n".encode())}
                resp = await c.post("/v1/ingest", data={"format": "markdown", "name": name},
                                    files=files)  # fmt: skip
                await _done(c, resp)
                ids[name] = resp.json()["sourceId"]
            assert (await c.delete(f"/v1/sources/{ids['c.md']}")).status_code == 200
            [d_version] = await _versions(c, ids["d.md"])
            assert d_version["projection"]["projection"] == 1
        assert srv.stop() == 0, srv.log_text()
    await _forget_raw(config, d_version["contentHash"])

    monkeypatch.setenv(VERSION_ENV, "2")  # the worker's projection was improved
    with srv:
        lines, _ = _reproject_cli(srv, key, "--dry-run")
        outdated = {row[2]: row for row in lines if row[0] != "raw-gone"}
        gone = {row[3]: row for row in lines if row[0] == "raw-gone"}
        assert set(outdated) == {ids["a.md"], ids["b.md"], ids["e.txt"]}
        assert all(row[0] == "projection" and row[4] == "-" for row in outdated.values())
        assert set(gone) == {ids["d.md"]}  # listed, not failed; the retired c.md untouched
        lines, _ = _reproject_cli(srv, key, "--dry-run", "--format", "text")
        assert [row[2] for row in lines] == [ids["e.txt"]]
        # One source through the CLI, followed to its end.
        lines, err = _reproject_cli(srv, key, "--source", ids["e.txt"], "--wait")
        [(reason, _, source, _, job_id)] = lines
        assert (reason, source) == ("projection", ids["e.txt"]) and job_id != "-"
        assert "reproject: 1 of 1 done" in err, err

        async with httpx.AsyncClient(base_url=srv.base_url, headers={"x-api-key": key},
                                     timeout=60) as c:  # fmt: skip
            bad = await c.post("/v1/reproject", json={"format": "nope"})
            assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_REQUEST"
            bad = await c.post("/v1/reproject", json={"sourceId": "x"})
            assert bad.status_code == 400, bad.text
            bad = await c.post("/v1/reproject", json={"dryRun": "yes"})
            assert bad.status_code == 400, bad.text
            run = await c.post("/v1/reproject", json={})
            assert run.status_code == 202, run.text
            body = run.json()
            assert {o["sourceId"] for o in body["outdated"]} == set(outdated) - {ids["e.txt"]}
            for o in body["outdated"]:
                job = await wait_job(c, o["jobId"])
                assert job["state"] == "completed", job
            for name in ("a.md", "b.md", "e.txt"):
                new, old = await _versions(c, ids[name])
                assert new["reason"] == "projection" and new["contentHash"] == old["contentHash"]
                assert (new["projection"]["projection"], old["projection"]["projection"]) == (2, 1)
            retired = await _versions(c, ids["c.md"])
            assert [v["state"] for v in retired] == ["retired"]
            assert len(await _versions(c, ids["d.md"])) == 1
            # Nothing outdated is left but the version whose bytes are gone; the same bytes
            # read by the same projection deduplicate.
            again = (await c.post("/v1/reproject", json={"dryRun": True})).json()
            assert again["outdated"] == [] and again["upToDate"] == 3
            assert [o["sourceId"] for o in again["rawGone"]] == [ids["d.md"]]
            same = await _post(c, format="markdown", name="a.md", content="# a.md\n\nbody\n")
            assert same.status_code == 200 and same.json()["deduplicated"] is True
            # The same bytes a third time after a bump: a new version again (no reproject).
        assert srv.stop() == 0, srv.log_text()
    await anyio.lowlevel.checkpoint()
