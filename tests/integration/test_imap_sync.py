"""Sync runs of the ``imap`` connector (docs/connectors.md, "The imap kind") against a real
Dovecot on 127.0.0.1 (tests/support/dovecot.py) and the service in-process
(:mod:`tests.support.inproc`) on both engines, the connector worker and the email worker in
it: corpus messages appended over IMAP are
ingested as ``eml``, a second run fetches no body (Dovecot's own count), an expunged message
retires, TLS and STARTTLS with a certificate the test made, and the bad input — wrong
credentials, a closed port, a connection cut halfway through the listing, a UIDVALIDITY
reset — retiring nothing."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest

from telha.domain.model import Scope
from tests.conftest import CORPUS
from tests.support.cutting_proxy import CuttingProxy
from tests.support.dovecot import Dovecot, free_port, require_dovecot
from tests.support.inproc import InProcessServer
from tests.support.server import telha_check, write_config
from tests.support.sync_runs import run_counts, run_sync

pytestmark = pytest.mark.anyio

#: Runs retry an unreachable server quickly here (a transient failure).
_JOBS = {"max_attempts": 2, "backoff_base_ms": 50, "backoff_max_s": 1}
#: The connector worker reads the password from this variable (settings.passwordEnv).
_SECRET_ENV = "TELHA_SECRET_IMAP_TEST"
#: The one scope ``[connectors] secrets`` grants it to: the tests' connectors live here.
_SCOPE = Scope("tenant-imap", "org")


@pytest.fixture(scope="module")
def dovecot() -> Iterator[Dovecot]:
    require_dovecot()
    with Dovecot() as server:
        yield server


@pytest.fixture(scope="module")
def imap_server(
    engine: str, dovecot: Dovecot, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessServer]:
    """A server running the email worker and the connector worker in-process, with the
    mailbox password in its environment."""
    folder = tmp_path_factory.mktemp(f"imap-{engine}")
    config = write_config(
        folder, engine, workers={"in_process": ["email_worker", "connectors"]}, jobs=_JOBS,
        search={"enabled": True}, connectors={
            "allowed_hosts": ["127.0.0.1"],
            "secrets": [f"{_SECRET_ENV}={_SCOPE.tenant_id}/{_SCOPE.organization_id}"],
        },
    )  # fmt: skip
    os.environ[_SECRET_ENV] = dovecot.password
    try:
        with InProcessServer(config) as proc:
            yield proc
            assert proc.stop() == 0, proc.log_text()
    finally:
        del os.environ[_SECRET_ENV]


@pytest.fixture
async def api(imap_server: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
    key = imap_server.create_key(_SCOPE.tenant_id, _SCOPE.organization_id)
    async with httpx.AsyncClient(
        base_url=imap_server.base_url, headers={"x-api-key": key}, timeout=30
    ) as c:
        yield c


@pytest.fixture
def mailbox(dovecot: Dovecot) -> str:
    """A new mailbox of the test's own."""
    name = f"t{uuid.uuid4().hex[:12]}"
    dovecot.create(name)
    return name


def _corpus() -> list[bytes]:
    return [p.read_bytes() for p in sorted((CORPUS / "eml").glob("*.eml"))]


def _note(n: int, word: str) -> bytes:
    return (
        f"From: bob@example.com\r\nTo: alice@example.com\r\nSubject: note {n}\r\n"
        f"Message-ID: <{uuid.uuid4()}@example.com>\r\n\r\nnote {n} {word}\r\n"
    ).encode()


def _settings(dovecot: Dovecot, mailbox: str, **extra: Any) -> dict[str, Any]:
    return {
        "host": "127.0.0.1", "port": dovecot.port, "username": dovecot.user,
        "passwordEnv": _SECRET_ENV, "mailbox": mailbox, "tls": "none", **extra,
    }  # fmt: skip


async def _add(api: httpx.AsyncClient, settings: dict[str, Any], **extra: Any) -> str:
    resp = await api.post("/v1/connectors", json={"kind": "imap", "settings": settings, **extra})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["connectorId"])


async def _item(api: httpx.AsyncClient, cid: str, ext: str) -> dict[str, Any]:
    resp = await api.get("/v1/sources", params={"connector": cid, "externalId": ext})
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def _bodies(dovecot: Dovecot, since: int, sessions: int) -> int:
    """The bodies fetched by the IMAP sessions that logged out since ``since``, once
    ``sessions`` of them did (Dovecot writes the line as the session ends)."""
    for _ in range(100):
        done, bodies = dovecot.bodies_fetched(since)
        if done >= sessions:
            assert done == sessions, dovecot.logs()
            return bodies
        await anyio.sleep(0.05)
    raise AssertionError(f"no logout line:\n{dovecot.logs()}")


async def test_imap_sync_adds_skips_unchanged_and_retires_expunged(
    api: httpx.AsyncClient, dovecot: Dovecot, mailbox: str, imap_server: InProcessServer
) -> None:
    corpus = _corpus()
    assert len(corpus) >= 10
    uids = dovecot.append(corpus, mailbox)
    validity = dovecot.uidvalidity(mailbox)
    cid = await _add(api, _settings(dovecot, mailbox))
    mark = dovecot.log_mark()
    first = await run_sync(api, cid, within_s=120)
    n = len(corpus)
    assert first["state"] == "completed" and first["complete"] is True, first
    assert run_counts(first) == (n, n, 0, 0, 0, 0)
    assert first["children"] == {"completed": n}, first
    assert await _bodies(dovecot, mark, 1) == n
    jobs = (await api.get("/v1/ingest", params={"parent": first["runId"]})).json()["jobs"]
    assert {j["kind"] for j in jobs} == {"ingest:eml"}
    item = await _item(api, cid, f"{validity}:{uids[0]}")
    assert item["state"] == "current" and item["rootNodeId"] is not None
    assert item["acl"] is None and item["name"] == f"{mailbox}/{uids[0]}.eml"
    assert dovecot.seen_flags(mailbox) == 0  # examined read-only, bodies peeked
    # Nothing changed: listed, recognised by UIDVALIDITY and UID, no body fetched.
    mark = dovecot.log_mark()
    second = await run_sync(api, cid, within_s=120)
    assert run_counts(second) == (n, 0, 0, n, 0, 0)
    assert await _bodies(dovecot, mark, 1) == 0
    # One expunged at the server, one appended: retired 1, added 1, one body fetched.
    dovecot.expunge([uids[3]], mailbox)
    (new_uid,) = dovecot.append([_note(1, "wordappendedx")], mailbox)
    mark = dovecot.log_mark()
    third = await run_sync(api, cid, within_s=120)
    assert run_counts(third) == (n, 1, 0, n - 1, 1, 0), third
    assert third["warning"] is None and third["children"] == {"completed": 1}
    assert await _bodies(dovecot, mark, 1) == 1
    gone = await _item(api, cid, f"{validity}:{uids[3]}")
    assert gone["state"] == "retired" and gone["retired"] is True
    history = (await api.get(f"/v1/sources/{gone['sourceId']}")).json()
    assert history["versionCount"] == 1  # its history kept
    assert (await _item(api, cid, f"{validity}:{new_uid}"))["state"] == "current"
    checked = await anyio.to_thread.run_sync(telha_check, imap_server.config)
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_imap_tls_and_starttls(
    api: httpx.AsyncClient, dovecot: Dovecot, mailbox: str
) -> None:
    dovecot.append([_note(i, "wordtlsx") for i in range(2)], mailbox)
    ca = str(dovecot.ca_file)
    implicit = await _add(
        api, _settings(dovecot, mailbox, tls="implicit", port=dovecot.tls_port, caFile=ca)
    )
    assert run_counts(await run_sync(api, implicit, within_s=120)) == (2, 2, 0, 0, 0, 0)
    starttls = await _add(api, _settings(dovecot, mailbox, tls="starttls", caFile=ca))
    assert run_counts(await run_sync(api, starttls, within_s=120)) == (2, 2, 0, 0, 0, 0)
    # The system's CAs do not know the test's certificate: refused, retried, dead.
    untrusted = await _add(api, _settings(dovecot, mailbox, tls="implicit", port=dovecot.tls_port))
    run = await run_sync(api, untrusted, within_s=120)
    assert run["state"] == "dead" and "CERTIFICATE_VERIFY_FAILED" in run["failureReason"], run


async def test_imap_wrong_credentials_and_closed_port_retire_nothing(
    api: httpx.AsyncClient, dovecot: Dovecot, mailbox: str
) -> None:
    uids = dovecot.append([_note(i, "wordcredsx") for i in range(3)], mailbox)
    validity = dovecot.uidvalidity(mailbox)
    cid = await _add(api, _settings(dovecot, mailbox), pruneMaxFraction=1)
    assert run_counts(await run_sync(api, cid, within_s=120)) == (3, 3, 0, 0, 0, 0)
    dovecot.expunge([uids[0]], mailbox)
    # The password changed at the server: the run is dead at once (not retried), typed.
    passwd = dovecot.folder / "passwd"
    saved = passwd.read_text()
    passwd.write_text(saved.replace(dovecot.password, "another password"))
    await anyio.sleep(1.1)  # Dovecot re-reads a passwd-file whose mtime moved on
    try:
        refused = await run_sync(api, cid, within_s=120)
    finally:
        passwd.write_text(saved)
    assert refused["state"] == "dead" and refused["listed"] is None, refused
    assert refused["failureReason"].startswith("corrupt_input: imap: login refused")
    assert "AUTHENTICATIONFAILED" in refused["failureReason"]
    assert dovecot.password not in refused["failureReason"]
    job = (await api.get(f"/v1/ingest/{refused['runId']}")).json()
    assert job["attempts"] == 1, job  # permanent: not retried
    assert (await _item(api, cid, f"{validity}:{uids[0]}"))["state"] == "current"
    # Nothing listens on the port: a transient failure, retried, then dead; nothing retired.
    closed = dict(_settings(dovecot, mailbox), port=free_port())
    run = await run_sync(api, await _add(api, closed), within_s=120)
    assert run["state"] == "dead" and "imap: cannot connect to 127.0.0.1" in run["failureReason"]
    assert run["failureReason"].startswith("transient:")
    # Back to the right password: the expunged message retires now.
    await anyio.sleep(1.1)
    assert run_counts(await run_sync(api, cid, within_s=120)) == (2, 0, 0, 2, 1, 0)


async def test_imap_listing_cut_halfway_retires_nothing(
    api: httpx.AsyncClient, dovecot: Dovecot, mailbox: str
) -> None:
    """A connection cut at the second listing page (a server gone mid-run) ends the listing
    incomplete: nothing retired, the pages already listed still count; once the server
    answers again the run retires what was expunged. A server gone altogether fails the
    run, retiring nothing."""
    uids = dovecot.append([_note(i, "wordcutx") for i in range(6)], mailbox)
    validity = dovecot.uidvalidity(mailbox)
    proxy = CuttingProxy(dovecot.port, b"RFC822.SIZE")
    try:
        settings = dict(_settings(dovecot, mailbox), port=proxy.port, pageSize=2)
        cid = await _add(api, settings, pruneMaxFraction=1)
        assert run_counts(await run_sync(api, cid, within_s=120)) == (6, 6, 0, 0, 0, 0)
        dovecot.expunge([uids[4]], mailbox)
        proxy.cut_at = 2  # the second page's FETCH never reaches the server
        cut = await run_sync(api, cid, within_s=120)
        assert proxy.cuts == 1
        assert cut["state"] == "completed" and cut["complete"] is False, cut
        assert "listing UIDs" in cut["error"]
        assert (cut["retired"], cut["unchanged"], cut["added"]) == (0, 2, 0)
        assert (await _item(api, cid, f"{validity}:{uids[4]}"))["state"] == "current"
        proxy.cut_at = None
        whole = await run_sync(api, cid, within_s=120)
        assert whole["complete"] is True and run_counts(whole) == (5, 0, 0, 5, 1, 0)
        assert (await _item(api, cid, f"{validity}:{uids[4]}"))["state"] == "retired"
        dovecot.expunge([uids[5]], mailbox)
        proxy.close()  # the server is gone: connection refused
        gone = await run_sync(api, cid, within_s=120)
        assert gone["state"] == "dead" and "cannot connect" in gone["failureReason"], gone
        assert (await _item(api, cid, f"{validity}:{uids[5]}"))["state"] == "current"
    finally:
        proxy.close()


async def test_imap_uidvalidity_reset_is_held_by_the_prune_guard(
    api: httpx.AsyncClient, dovecot: Dovecot, mailbox: str
) -> None:
    """A mailbox recreated (a new UIDVALIDITY) lists every message as new: they are added,
    and the old ones retire only with --confirm-prune (the prune guard's warning)."""
    notes = [_note(i, "wordresetx") for i in range(3)]
    uids = dovecot.append(notes, mailbox)
    before = dovecot.uidvalidity(mailbox)
    cid = await _add(api, _settings(dovecot, mailbox))
    assert run_counts(await run_sync(api, cid, within_s=120)) == (3, 3, 0, 0, 0, 0)
    dovecot.delete(mailbox)
    dovecot.create(mailbox)
    dovecot.append(notes, mailbox)
    after = dovecot.uidvalidity(mailbox)
    assert after != before
    held = await run_sync(api, cid, within_s=120)
    assert run_counts(held) == (3, 3, 0, 0, 0, 0), held
    # The run's pages ingested the 3 new messages before its last page judged the retires;
    # the guard counts the 3 sources live before the run.
    assert held["warning"] is not None and "retire 3 of 3" in held["warning"]
    assert (await _item(api, cid, f"{before}:{uids[0]}"))["state"] == "current"
    confirmed = await run_sync(api, cid, within_s=120, confirmPrune=True)
    assert run_counts(confirmed) == (3, 0, 0, 3, 3, 0)
    assert (await _item(api, cid, f"{before}:{uids[0]}"))["state"] == "retired"
    assert (await _item(api, cid, f"{after}:{uids[0]}"))["state"] == "current"


async def test_imap_settings_are_checked(api: httpx.AsyncClient) -> None:
    good = {"host": "127.0.0.1", "username": "alice", "passwordEnv": _SECRET_ENV}
    bad = [
        ({**good, "password": "x"}, "settings.password"),
        ({k: v for k, v in good.items() if k != "passwordEnv"}, "settings.passwordEnv"),
        ({**good, "passwordEnv": "TELHA_WORKER_TOKEN"}, "settings.passwordEnv"),
        ({**good, "tls": "maybe"}, "settings.tls"),
        ({**good, "port": 70000}, "settings.port"),
        ({**good, "caFile": "relative.pem"}, "settings.caFile"),
        ({**good, "host": "a b"}, "settings.host"),
        ({**good, "root": "/"}, "unknown key"),
    ]
    for settings, field in bad:
        resp = await api.post("/v1/connectors", json={"kind": "imap", "settings": settings})
        assert resp.status_code == 400 and field in resp.json()["error"]["message"], resp.text
    made = await api.post("/v1/connectors", json={"kind": "imap", "settings": good})
    assert made.status_code == 201 and made.json()["settings"] == good, made.text


async def test_a_secret_granted_to_another_scope_is_refused_at_add(
    imap_server: InProcessServer, dovecot: Dovecot, mailbox: str
) -> None:
    key = imap_server.create_key(f"tenant-{uuid.uuid4()}", "org")
    async with httpx.AsyncClient(
        base_url=imap_server.base_url, headers={"x-api-key": key}, timeout=30
    ) as other:
        resp = await other.post(
            "/v1/connectors", json={"kind": "imap", "settings": _settings(dovecot, mailbox)}
        )
        assert resp.status_code == 400, resp.text
        error = resp.json()["error"]
        assert error["code"] == "INVALID_REQUEST"
        assert f"{_SECRET_ENV} is not granted" in error["message"]
        assert dovecot.password not in resp.text
        assert (await other.get("/v1/connectors")).json()["connectors"] == []
