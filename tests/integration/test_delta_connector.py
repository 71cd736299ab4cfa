"""The Graph-style delta connector of docs/connectors.md ("A delta connector: Microsoft
Graph"), the very code the page shows, run by the SDK's driver against a fake delta server
on 127.0.0.1 (a real socket): a first run enumerates, a delta run reads only what changed
and names removals, an expired token starts over as a full listing, a page that fails
leaves the listing incomplete. Core's side is played by its own rule
(:func:`telha.domain.sync_runs.wanted`) and the deletion rules of "Deletions"."""

from __future__ import annotations

import json
import re
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from connectors.sdk import Connector, run_pages
from telha.domain.sync_runs import KnownItem, ListedIn, wanted

_DOC = Path(__file__).resolve().parents[2] / "docs" / "connectors.md"
_TOKEN = "tok-123"


def _example() -> types.ModuleType:
    """The connector kind of the page's Graph example, as a module."""
    text = _DOC.read_text(encoding="utf-8")
    section = text[text.index("### A delta connector: Microsoft Graph") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    assert len(code.group(1).splitlines()) < 100  # what the page promises
    module = types.ModuleType("graph_drive_example")
    exec(compile(code.group(1), f"{_DOC}:graph", "exec"), module.__dict__)
    return module


@dataclass
class _Drive:
    """A drive's state and change log: each change bumps the version; a delta token is
    the version it was given at."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[tuple[int, str]] = field(default_factory=list)
    version: int = 0
    expired: set[int] = field(default_factory=set)
    fail_page: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    reads: list[str] = field(default_factory=list)

    def put(self, ident: str, name: str, content: bytes) -> None:
        with self.lock:
            self.version += 1
            self.files[ident] = {"name": name, "content": content, "cTag": f"c{self.version}"}
            self.log.append((self.version, ident))

    def delete(self, ident: str) -> None:
        with self.lock:
            self.version += 1
            del self.files[ident]
            self.log.append((self.version, ident))

    def entry(self, ident: str, graph_removed: bool) -> dict[str, Any]:
        f = self.files.get(ident)
        if f is None:  # both shapes Graph uses for a deletion
            return {"id": ident, "@removed": {"reason": "deleted"}} if graph_removed else {
                "id": ident, "deleted": {"state": "deleted"}}  # fmt: skip
        return {
            "id": ident, "name": f["name"], "cTag": f["cTag"], "eTag": f"e-{f['cTag']}",
            "size": len(f["content"]), "file": {"mimeType": "text/plain"},
            "parentReference": {"path": "/drive/root:/Shared"},
        }  # fmt: skip


def _handler(drive: _Drive) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.headers.get("authorization") != f"Bearer {_TOKEN}":
                self._send(401, b'{"error": {"code": "InvalidAuthenticationToken"}}')
                return
            url = urlsplit(self.path)
            base = f"http://127.0.0.1:{self.server.server_address[1]}/v1.0/drives/d1"
            if m := re.fullmatch(r"/v1.0/drives/d1/items/([^/]+)/content", url.path):
                with drive.lock:
                    f = drive.files.get(m.group(1))
                    drive.reads.append(m.group(1))
                if f is None:
                    self._send(404, b'{"error": {"code": "itemNotFound"}}')
                else:
                    self._send(200, f["content"], "application/octet-stream")
                return
            if url.path != "/v1.0/drives/d1/root/delta":
                self._send(404, b"{}")
                return
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            page = int(q.get("page", "0"))
            if drive.fail_page is not None and page == drive.fail_page:
                self._send(503, b'{"error": {"code": "serviceNotAvailable"}}')
                return
            with drive.lock:
                if "token" in q:
                    since = int(q["token"])
                    if since in drive.expired:
                        self._send(410, b'{"error": {"code": "resyncRequired"}}')
                        return
                    changed = sorted({i for v, i in drive.log if v > since})
                    entries = [drive.entry(i, n % 2 == 0) for n, i in enumerate(changed)]
                else:
                    entries = [drive.entry(i, False) for i in sorted(drive.files)]
                version = drive.version
            chunk = entries[page * 2 : page * 2 + 2]  # two entries a page: several pages
            body: dict[str, Any] = {"value": chunk}
            token = q.get("token")
            more = f"page={page + 1}" + (f"&token={token}" if token else "")
            if page * 2 + 2 < len(entries):
                body["@odata.nextLink"] = f"{base}/root/delta?{more}"
            else:
                body["@odata.deltaLink"] = f"{base}/root/delta?token={version}"
            self._send(200, json.dumps(body).encode())

    return Handler


@pytest.fixture
def drive() -> Iterator[tuple[_Drive, str]]:
    state = _Drive()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/v1.0"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class _Core:
    """Core's side of runs, by its rules: the markers it last ingested, what is live."""

    markers: dict[str, str | None] = field(default_factory=dict)
    checkpoint: str | None = None

    def run(self, connector: Connector) -> dict[str, Any]:
        """One run; the last page with the run's items, listed ids and retires gathered."""
        known = {e: KnownItem(m, False) for e, m in self.markers.items()}
        gen = run_pages(connector, self.checkpoint, list_page=3)
        pages = [next(gen)]
        while pages[-1]["partial"]:
            listed = [ListedIn(external_id=e["externalId"], marker=e["marker"])
                      for e in pages[-1].get("listed", [])]  # fmt: skip
            pages.append(gen.send(wanted(listed, known)))
        run = dict(pages[-1])
        run["items"] = [i for p in pages for i in p["items"]]
        run["listed"] = [e["externalId"] for p in pages for e in p.get("listed", [])]
        run["removed"] = [e for p in pages for e in p.get("removed", [])]
        gone: list[str] = []
        if run["complete"]:
            if run["fullListing"]:
                gone = [e for e in self.markers if e not in set(run["listed"])]
            else:
                gone = [e for e in run["removed"] if e in self.markers]
            self.checkpoint = run["checkpoint"]
        for item in run["items"]:
            self.markers[item["externalId"]] = item["marker"]
        for e in gone:
            del self.markers[e]
        run["gone"] = sorted(gone)
        return run


def test_the_graph_example_against_a_delta_server(drive: tuple[_Drive, str]) -> None:
    state, base = drive
    kind = _example().GraphDriveConnector
    settings = {"driveId": "d1", "token": _TOKEN, "baseUrl": base}
    for i in range(5):
        state.put(f"id{i}", f"note{i}.txt", f"note {i}\n".encode())
    state.put("img", "logo.bin", b"\x00")  # no known format: never listed
    core = _Core()

    first = core.run(kind(settings))
    assert first["complete"] is True and first["fullListing"] is True
    assert sorted(first["listed"]) == [f"id{i}" for i in range(5)]
    assert {i["name"] for i in first["items"]} == {f"Shared/note{i}.txt" for i in range(5)}
    assert sorted(state.reads) == [f"id{i}" for i in range(5)]
    assert core.checkpoint is not None and "token=" in core.checkpoint

    # A change, a new file, two deletions (one as `deleted`, one as `@removed`).
    state.reads.clear()
    state.put("id1", "note1.txt", b"note 1, changed\n")
    state.put("id9", "note9.txt", b"note 9\n")
    state.delete("id2")
    state.delete("id3")
    second = core.run(kind(settings))
    assert second["complete"] is True and second["fullListing"] is False
    assert sorted(state.reads) == ["id1", "id9"]  # unchanged files are never read
    assert second["gone"] == ["id2", "id3"]
    assert sorted(core.markers) == ["id0", "id1", "id4", "id9"]

    # Nothing changed: a delta with nothing in it reads nothing, retires nothing.
    state.reads.clear()
    third = core.run(kind(settings))
    assert (third["listed"], third["gone"], state.reads) == ([], [], [])

    # A page that fails mid-listing: incomplete, the checkpoint stays, nothing retired.
    kept = core.checkpoint
    state.delete("id4")
    state.put("id5", "note5.txt", b"5\n")
    state.put("id6", "note6.txt", b"6\n")
    state.fail_page = 1
    state.reads.clear()
    cut = core.run(kind(settings))
    assert cut["complete"] is False and "503" in cut["error"] and cut["gone"] == []
    assert state.reads == ["id5"]  # what the first page listed is still ingested
    assert core.checkpoint == kept and "id4" in core.markers
    state.fail_page = None

    # The token expired (410): the connector starts over, a full listing, which retires
    # what it does not list.
    state.expired.add(int(kept.rsplit("=", 1)[1]))
    state.reads.clear()
    again = core.run(kind(settings))
    assert again["complete"] is True and again["fullListing"] is True
    assert again["gone"] == ["id4"]
    assert state.reads == ["id6"]  # the rest is unchanged by its cTag
    assert sorted(core.markers) == ["id0", "id1", "id5", "id6", "id9"]


def test_a_wrong_token_is_an_incomplete_listing(drive: tuple[_Drive, str]) -> None:
    state, base = drive
    state.put("a", "a.txt", b"a\n")
    kind = _example().GraphDriveConnector
    run = _Core().run(kind({"driveId": "d1", "token": "wrong", "baseUrl": base}))
    assert run["complete"] is False and "401" in run["error"] and run["items"] == []
