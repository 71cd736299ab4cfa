"""Sync runs of the ``slack-export`` connector (docs/connectors.md, "The slack-export kind")
against a real server on both engines, the connector worker in-process: export zips built
here (channels, a private group, a thread, a file, join notices), then a later export with an
edited, a deleted and a new message; the Slack shape as stored (MESSAGE, CHANNEL, PERSON,
ATTACHMENT, thread and file edges); and bad exports — corrupt, path traversal, a zip bomb,
malformed JSON, a missing channels.json, a message of the wrong shape — each a typed failure
of the run or of an item that retires nothing."""

from __future__ import annotations

import io
import json
import uuid
import warnings
import zipfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from connectors.slack_message import message_node_id
from telha.domain.connectors import connector_source_id
from telha.domain.model import Scope
from tests.support.inproc import InProcessServer
from tests.support.server import write_config
from tests.support.sync_runs import run_counts, run_sync

pytestmark = pytest.mark.anyio

_JOBS = {"max_attempts": 2, "backoff_base_ms": 50, "backoff_max_s": 1}

T1, T2, T3, T4, T5, T6, T7, T8 = (f"17042000{i:02d}.0001{i:02d}" for i in range(1, 9))
USERS = [
    {"id": "U1", "name": "ann", "real_name": "Ann Lee", "profile": {"real_name": "Ann Lee"}},
    {"id": "U2", "name": "bob", "profile": {"real_name": "Bob Roe"}},
]
CHANNELS = [
    {"id": "C1", "name": "general", "members": ["U1", "U2"]},
    {"id": "C2", "name": "random", "members": ["U1", "U2"]},
]
GROUPS = [{"id": "G1", "name": "secret", "members": ["U1"]}]
FILE = {
    "id": "F1", "name": "plan.pdf", "title": "The plan", "mimetype": "application/pdf",
    "filetype": "pdf", "size": 2048, "url_private": "https://files.example.com/files-pri/T1-F1/plan.pdf",
    "permalink": "https://acme.example.com/files/U1/F1/plan.pdf", "thumb_64": "https://x.example.com/t",
}  # fmt: skip


def _msg(ts: str, user: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "ts": ts, "user": user, "text": text, **extra}


def _first_export() -> dict[str, Any]:
    """Entry name → JSON of the first export: 7 messages (a join notice is no item)."""
    return {
        "users.json": USERS,
        "channels.json": CHANNELS,
        "groups.json": GROUPS,
        "general/2024-01-02.json": [
            _msg(T1, "U1", "Kickoff wordkickoffx, <@U2> please review", thread_ts=T1,
                 reply_count=1, replies=[{"user": "U2", "ts": T2}]),
            _msg(T2, "U2", "On it wordreplyx", thread_ts=T1, parent_user_id="U1"),
            {"type": "message", "subtype": "channel_join", "ts": "1704200009.000000",
             "user": "U2", "text": "<@U2> has joined the channel"},
            _msg(T3, "U1", "The plan attached", files=[FILE]),
        ],
        "general/2024-01-03.json": [
            _msg(T4, "U2", "Draft wordoldx"),
            _msg(T5, "U1", "Doomed wordgonex"),
        ],
        "random/2024-01-02.json": [_msg(T6, "U2", "Lunch &amp; <https://example.com|menu>")],
        "secret/2024-01-02.json": [_msg(T7, "U1", "Private wordsecretx")],
    }  # fmt: skip


def _second_export() -> dict[str, Any]:
    """The first export later: T4 edited, T5 deleted, T8 a new reply in T1's thread (T1's
    own entry now counts two replies, which is no change of the message)."""
    entries = _first_export()
    day2, day3 = entries["general/2024-01-02.json"], entries["general/2024-01-03.json"]
    day2[0] = {**day2[0], "reply_count": 2, "replies": [{"user": "U2", "ts": T2},
                                                       {"user": "U1", "ts": T8}]}  # fmt: skip
    day3[0] = _msg(T4, "U2", "Final wordnewx", edited={"user": "U2", "ts": "1704290000.000000"})
    del day3[1]
    entries["general/2024-01-04.json"] = [_msg(T8, "U1", "Thanks wordthanksx", thread_ts=T1)]
    return entries


def _zip(path: Path, entries: dict[str, Any], raw: dict[str, bytes] | None = None) -> None:
    """Write an export zip (JSON entries, then raw ones) in place of ``path``."""
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        warnings.simplefilter("ignore")  # a repeated entry name, written on purpose
        for name, value in entries.items():
            z.writestr(name, json.dumps(value))
        for name, data in (raw or {}).items():
            z.writestr(name, data)
    path.write_bytes(buf.getvalue())
    path.chmod(0o644)


@pytest.fixture(scope="module")
def slack_server(
    engine: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessServer]:
    """A server running the connector worker in-process (it projects ``slack`` too)."""
    folder = tmp_path_factory.mktemp(f"slack-{engine}")
    config = write_config(
        folder, engine, workers={"in_process": ["connectors"]}, jobs=_JOBS,
        connectors={"allowed_roots": [str(tmp_path_factory.getbasetemp())]},
    )  # fmt: skip
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
def scope() -> Scope:
    return Scope(f"tenant-{uuid.uuid4()}", "org")


@pytest.fixture
def export(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)
    return tmp_path / "export.zip"


@pytest.fixture
async def api(slack_server: InProcessServer, scope: Scope) -> AsyncIterator[httpx.AsyncClient]:
    key = slack_server.create_key(scope.tenant_id, scope.organization_id)
    async with httpx.AsyncClient(
        base_url=slack_server.base_url, headers={"x-api-key": key}, timeout=30
    ) as c:
        yield c


async def _add(api: httpx.AsyncClient, path: Path, **settings: Any) -> str:
    body = {"kind": "slack-export", "settings": {"path": str(path), **settings}}
    resp = await api.post("/v1/connectors", json=body)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["connectorId"])


async def _get(api: httpx.AsyncClient, url: str, **params: Any) -> dict[str, Any]:
    resp = await api.get(url, params=params)
    assert resp.status_code == 200, (url, resp.text)
    return dict(resp.json())


async def _item(api: httpx.AsyncClient, cid: str, ext: str) -> dict[str, Any]:
    return await _get(api, "/v1/sources", connector=cid, externalId=ext)


async def _edges(api: httpx.AsyncClient, node: str) -> dict[str, list[dict[str, Any]]]:
    """A node's outgoing edges by type."""
    out: dict[str, list[dict[str, Any]]] = {}
    for e in (await _get(api, f"/v1/nodes/{node}/edges", direction="out"))["edges"]:
        out.setdefault(e["type"], []).append(e)
    return out


async def _versions(api: httpx.AsyncClient, cid: str, ext: str) -> tuple[str, int]:
    item = await _item(api, cid, ext)
    source = await _get(api, f"/v1/sources/{item['sourceId']}")
    return str(source["state"]), int(source["versionCount"])


async def test_two_exports_edit_delete_reply(
    api: httpx.AsyncClient, export: Path, scope: Scope
) -> None:
    _zip(export, _first_export())
    cid = await _add(api, export)
    first = await run_sync(api, cid)
    assert first["state"] == "completed" and first["complete"] is True, first
    assert run_counts(first) == (7, 7, 0, 0, 0, 0)
    assert first["children"] == {"completed": 7}
    # The Slack shape: the item's source, its MESSAGE root, the thread, people, channel, file.
    parent = await _item(api, cid, f"C1/{T1}")
    assert parent["sourceId"] == str(connector_source_id(cid, scope.tenant_id, f"C1/{T1}"))
    assert parent["name"] == f"#general/{T1}" and parent["acl"] is None
    assert parent["rootNodeId"] == message_node_id("C1", T1)
    node = await _get(api, f"/v1/nodes/{parent['rootNodeId']}")
    assert node["labels"] == ["MESSAGE"]
    assert node["properties"]["channel_name"] == "general"
    assert node["properties"]["thread_ts"] == T1
    assert node["properties"]["sent_at"] == 1704200001_000101
    edges = await _edges(api, parent["rootNodeId"])
    assert set(edges) == {"POSTED_IN", "FROM", "MENTIONS"}, edges
    person = await _get(api, f"/v1/nodes/{edges['FROM'][0]['to']}")
    assert person["labels"] == ["PERSON"]
    assert person["properties"] == {"slack_id": "U1", "name": "ann", "real_name": "Ann Lee"}
    mentioned = await _get(api, f"/v1/nodes/{edges['MENTIONS'][0]['to']}")
    assert mentioned["properties"]["slack_id"] == "U2"
    channel_id = edges["POSTED_IN"][0]["to"]
    channel = await _get(api, f"/v1/nodes/{channel_id}")
    assert channel["labels"] == ["CHANNEL"] and channel["properties"]["name"] == "general"
    spans = [s["text"] for s in node["provenance"]["spans"]]
    assert spans[0].startswith("#general · Ann Lee · 2024-01-02T12:53:21")
    assert spans[1] == "Kickoff wordkickoffx, @bob please review"
    reply = await _item(api, cid, f"C1/{T2}")
    reply_edges = await _edges(api, reply["rootNodeId"])
    assert [e["to"] for e in reply_edges["IN_REPLY_TO"]] == [message_node_id("C1", T1)]
    with_file = await _item(api, cid, f"C1/{T3}")
    (has,) = (await _edges(api, with_file["rootNodeId"]))["HAS_ATTACHMENT"]
    assert has["properties"] == {"name": "plan.pdf", "size": 2048, "media_type": "application/pdf"}
    attachment = await _get(api, f"/v1/nodes/{has['to']}")
    assert attachment["labels"] == ["ATTACHMENT"]
    assert attachment["properties"]["url_private"] == FILE["url_private"]  # recorded, not fetched
    assert "thumb_64" not in attachment["properties"]
    lunch = await _get(api, f"/v1/nodes/{(await _item(api, cid, f'C2/{T6}'))['rootNodeId']}")
    assert lunch["provenance"]["spans"][1]["text"] == "Lunch & menu (https://example.com)"
    assert (await _item(api, cid, f"G1/{T7}"))["acl"] == ["user:U1"]
    for missing in ("C1/1704200009.000000", f"C1/{T8}"):
        r = await api.get("/v1/sources", params={"connector": cid, "externalId": missing})
        assert r.status_code == 404, (missing, r.text)
    # The later export: one edited, one deleted, one new reply; the parent is unchanged.
    _zip(export, _second_export())
    second = await run_sync(api, cid)
    assert run_counts(second) == (7, 1, 1, 5, 1, 0), second
    assert second["complete"] is True and second["warning"] is None
    assert await _versions(api, cid, f"C1/{T4}") == ("current", 2)
    edited = await _get(api, f"/v1/nodes/{message_node_id('C1', T4)}")
    assert edited["properties"]["edited_at"] == 1704290000_000000
    assert edited["provenance"]["spans"][1]["text"] == "Final wordnewx"
    assert await _versions(api, cid, f"C1/{T5}") == ("retired", 1)  # history kept
    assert (await _item(api, cid, f"C1/{T5}"))["retired"] is True
    gone = await api.get(f"/v1/nodes/{message_node_id('C1', T5)}")
    assert gone.status_code == 404, gone.text
    assert await _versions(api, cid, f"C1/{T1}") == ("current", 1)
    new = await _item(api, cid, f"C1/{T8}")
    assert [e["to"] for e in (await _edges(api, new["rootNodeId"]))["IN_REPLY_TO"]] == [
        message_node_id("C1", T1)
    ]
    # The channel node other messages share outlives the deleted message.
    assert (await api.get(f"/v1/nodes/{channel_id}")).status_code == 200
    third = await run_sync(api, cid)
    assert run_counts(third) == (7, 0, 0, 7, 0, 0)


async def test_bad_exports_retire_nothing(
    api: httpx.AsyncClient, export: Path, tmp_path: Path
) -> None:
    _zip(export, _first_export())
    cid = await _add(api, export, maxEntryBytes=100_000, maxTotalBytes=1_000_000)
    assert run_counts(await run_sync(api, cid)) == (7, 7, 0, 0, 0, 0)
    good = _first_export()

    async def dead(reason: str) -> None:
        run = await run_sync(api, cid)
        assert run["state"] == "dead" and reason in run["failureReason"], run
        assert run["listed"] is None and run["children"] == {}, run

    await anyio.Path(export).write_bytes(b"PK\x03\x04 this is no zip at all")
    await dead("corrupt_input: export is not a zip")
    _zip(export, good, raw={"../evil.json": b"[]"})
    await dead("escapes the archive")
    _zip(export, good, raw={"/etc/cron.d/x": b""})
    await dead("escapes the archive")
    _zip(export, {k: v for k, v in good.items() if k != "channels.json"})
    await dead("no channels.json")
    _zip(export, good, raw={"channels.json": b"[{"})
    await dead("appears twice")  # a second channels.json entry
    _zip(export, {k: v for k, v in good.items() if k != "channels.json"},
         raw={"channels.json": b"[{"})  # fmt: skip
    await dead("channels.json: malformed JSON")
    _zip(export, good, raw={"general/2024-02-01.json": b"\0" * 5_000_000})  # compresses to kB
    await dead("zip bomb")
    await anyio.Path(export).unlink()
    await dead("is not a file")  # transient, retried, then dead
    # A day file that cannot be read: the listing is incomplete, the rest still seen.
    _zip(export, {k: v for k, v in good.items() if k != "general/2024-01-03.json"},
         raw={"general/2024-01-03.json": b'[{"ts": "1704200004.000104", "te'})  # fmt: skip
    cut = await run_sync(api, cid)
    assert cut["state"] == "completed" and cut["complete"] is False, cut
    assert "general/2024-01-03.json: malformed JSON" in cut["error"]
    assert run_counts(cut) == (5, 0, 0, 5, 0, 0)  # T4 and T5 not listed, and not retired
    big = [_msg(T4, "U2", "Draft wordoldx " + "x" * 120_000), _msg(T5, "U1", "Doomed wordgonex")]
    _zip(export, {**good, "general/2024-01-03.json": big})
    cut = await run_sync(api, cid)
    assert cut["complete"] is False and "over maxEntryBytes" in cut["error"], cut
    assert cut["retired"] == 0
    no_ts = [{"user": "U2", "text": "no ts"}, _msg(T5, "U1", "Doomed wordgonex")]
    _zip(export, {**good, "general/2024-01-03.json": no_ts})
    cut = await run_sync(api, cid)
    assert cut["complete"] is False and "message 0 has no usable ts" in cut["error"], cut
    assert run_counts(cut) == (6, 0, 0, 6, 0, 0)
    # A message of the wrong shape: a failed item, the stored one unchanged.
    wrong = [_msg(T4, "U2", "Draft", files="not a list"), _msg(T5, "U1", "Doomed wordgonex")]
    _zip(export, {**good, "general/2024-01-03.json": wrong})
    failed = await run_sync(api, cid)
    assert failed["complete"] is True and run_counts(failed) == (7, 0, 0, 6, 0, 1), failed
    assert failed["failedItems"] == [
        {"externalId": f"C1/{T4}", "reason": f"C1/{T4}: files: a list is required"}
    ]
    # Nothing was retired or changed by any of it.
    for ts in (T1, T2, T3, T4, T5):
        assert await _versions(api, cid, f"C1/{ts}") == ("current", 1), ts
    _zip(export, good)
    assert run_counts(await run_sync(api, cid)) == (7, 0, 0, 7, 0, 0)


async def test_settings_are_checked(api: httpx.AsyncClient) -> None:
    for settings, problem in (
        ({"path": "export.zip"}, "settings.path: an absolute path"),
        ({}, "settings.path"),
        ({"path": "/x.zip", "channels": "general"}, "settings.channels"),
        ({"path": "/x.zip", "maxEntryBytes": 0}, "settings.maxEntryBytes"),
        ({"path": "/x.zip", "root": "/"}, "unknown key(s) root"),
    ):
        resp = await api.post("/v1/connectors", json={"kind": "slack-export", "settings": settings})
        assert resp.status_code == 400, resp.text
        assert problem in resp.json()["error"]["message"], (settings, resp.text)


async def test_channels_setting_and_by_hand_ingest(api: httpx.AsyncClient, export: Path) -> None:
    """``channels`` limits the run; a ``slack`` message can be ingested by hand like any
    format, and a message that is not the shape fails its job ``corrupt_input``."""
    _zip(export, _first_export())
    cid = await _add(api, export, channels=["random"])
    assert run_counts(await run_sync(api, cid)) == (1, 1, 0, 0, 0, 0)
    body = {"ts": T1, "channel": {"id": "C9", "name": "ops"}, "user": "U5", "text": "by hand",
            "user_profile": {"name": "eve", "real_name": "Eve Poe"}}  # fmt: skip
    for content, state in ((body, "completed"), ({"ts": T1}, "dead"), ("[1]", "dead")):
        text = content if isinstance(content, str) else json.dumps(content)
        resp = await api.post("/v1/ingest", json={"format": "slack", "name": f"m{state}{len(text)}",
                                                  "content": text})  # fmt: skip
        assert resp.status_code == 202, resp.text
        for _ in range(600):
            job = await _get(api, f"/v1/ingest/{resp.json()['jobId']}")
            if job["state"] not in ("pending", "leased"):
                break
            await anyio.sleep(0.05)
        assert job["state"] == state, job
        if state == "dead":
            assert job["failureReason"].startswith("corrupt_input: slack message"), job
    node = await _get(api, f"/v1/nodes/{message_node_id('C9', T1)}")
    assert node["provenance"]["spans"][0]["text"].startswith("#ops · Eve Poe · ")
