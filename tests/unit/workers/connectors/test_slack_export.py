"""The ``slack-export`` connector's listing and the ``slack`` projection, run on export zips
built here (docs/connectors.md, "The slack-export kind"); the sync runs through a server
are in tests/integration/test_slack_export_sync.py."""

from __future__ import annotations

import base64
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from connectors import slack_message
from connectors.sdk import ListingIncomplete, run_listing
from connectors.slack_export import SlackExportConnector
from workers_common import CorruptInput, Job


def _zip(path: Path, entries: dict[str, Any]) -> str:
    with zipfile.ZipFile(path, "w") as z:
        for name, value in entries.items():
            z.writestr(name, value if isinstance(value, bytes) else json.dumps(value))
    return str(path)


def _project(item: dict[str, Any]) -> dict[str, Any]:
    raw = base64.b64decode(item["contentB64"])
    job = Job("j", "ingest:slack", "slack", item["name"], raw, None, {}, 1, "t", "o")
    return slack_message.handle(job)


def test_a_folder_around_the_export_dms_bots_and_markup(tmp_path: Path) -> None:
    path = _zip(tmp_path / "e.zip", {
        "Acme export/users.json": [{"id": "U1", "name": "ann", "real_name": "Ann"}],
        "Acme export/channels.json": [{"id": "C1", "name": "general"}],
        "Acme export/dms.json": [{"id": "D1", "members": ["U1", "U2"]}],
        "Acme export/general/2024-01-02.json": [
            {"ts": "1704200000.000001", "subtype": "bot_message", "username": "deploybot",
             "bot_id": "B1", "text": "<!here> built <#C1|general> &lt;ok&gt; <@U1>"},
        ],
        "Acme export/D1/2024-01-02.json": [{"ts": "1704200000.000002", "user": "U2",
                                            "text": "psst"}],
        "Acme export/general/notes.txt": b"not a day file",
    })  # fmt: skip
    report = run_listing(SlackExportConnector({"path": path}), {}, None)
    assert report["complete"] is True and report["seen"] == [
        "D1/1704200000.000002", "C1/1704200000.000001"
    ]  # fmt: skip
    dm, bot = report["items"]
    assert dm["acl"] == ["user:U1", "user:U2"] and bot["acl"] is None
    out = _project(bot)
    assert out["canonicalText"].startswith("#general · deploybot · 2024-01-02T12:53:20")
    assert out["canonicalText"].endswith("@here built #general <ok> @ann")
    message = out["nodes"][0]
    assert message["properties"]["subtype"] == "bot_message"
    assert "user_id" not in message["properties"]
    assert {r["type"] for r in out["relationships"]} == {"POSTED_IN", "MENTIONS"}
    # Unchanged markers: nothing read again.
    known = {i["externalId"]: i["marker"] for i in report["items"]}
    again = run_listing(SlackExportConnector({"path": path}), known, None)
    assert again["unchanged"] == 2 and again["items"] == []


def test_listing_failures(tmp_path: Path) -> None:
    base = {"channels.json": [{"id": "C1", "name": "general"}]}
    path = _zip(tmp_path / "a.zip", {**base, "general/2024-01-02.json": {"not": "a list"}})
    report = run_listing(SlackExportConnector({"path": path}), {}, None)
    assert report["complete"] is False
    assert report["error"] == "general/2024-01-02.json: not a JSON list of messages"
    lone = b'[{"ts": "1.1", "text": "\\ud800"}]'
    path = _zip(tmp_path / "b.zip", {**base, "general/2024-01-02.json": lone})
    report = run_listing(SlackExportConnector({"path": path}), {}, None)
    assert report["failed"] == [
        {"externalId": "C1/1.1", "reason": "C1/1.1: a text holds a lone surrogate"}
    ]
    path = _zip(tmp_path / "c.zip", {"channels.json": [{"name": "no id"}]})
    with pytest.raises(CorruptInput, match=r"channels\.json: a channel without a usable id"):
        run_listing(SlackExportConnector({"path": path}), {}, None)
    path = _zip(tmp_path / "d.zip", {**base, "C:/x.json": []})
    with pytest.raises(CorruptInput, match="escapes the archive"):
        run_listing(SlackExportConnector({"path": path}), {}, None)
    assert issubclass(ListingIncomplete, Exception)


def test_projection_refuses_what_is_not_the_shape() -> None:
    def job(raw: bytes) -> Job:
        return Job("j", "ingest:slack", "slack", "m", raw, None, {}, 1, "t", "o")

    for raw, problem in (
        (b"{", "not JSON"),
        (b'{"ts": "x", "channel": {"id": "C1"}}', "ts: 'x' is not a Slack timestamp"),
        (b'{"ts": "1.1", "channel": "C1"}', "channel: an object with a string id"),
        (b'{"ts": "1.1", "channel": {"id": "C1"}, "edited": {}}', "edited: an object with ts"),
    ):
        with pytest.raises(CorruptInput, match=re.escape(problem)):
            slack_message.handle(job(raw))
    empty = slack_message.handle(job(b"  \n"))
    assert empty["stats"]["empty"] is True and [n["labels"] for n in empty["nodes"]] == [
        ["MESSAGE"]
    ]


def test_a_day_file_failing_its_crc_cuts_the_listing_short(tmp_path: Path) -> None:
    path = tmp_path / "crc.zip"
    day = json.dumps([{"ts": "1.1", "text": "kept"}]).encode()
    bad = json.dumps([{"ts": "2.2", "text": "flipped"}]).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("channels.json", json.dumps([{"id": "C1", "name": "general"}]))
        z.writestr("general/2024-01-01.json", day)
        z.writestr("general/2024-01-02.json", bad)
    data = path.read_bytes()
    at = data.index(b"flipped")
    path.write_bytes(data[:at] + b"F" + data[at + 1 :])  # same size, another CRC
    report = run_listing(SlackExportConnector({"path": str(path)}), {}, None)
    assert report["complete"] is False and report["seen"] == ["C1/1.1"]
    assert [i["externalId"] for i in report["items"]] == ["C1/1.1"]
    assert "general/2024-01-02.json: unreadable: Bad CRC-32" in report["error"]
