"""A JSON record keeps its node id across versions of its source by its id key
(docs/formats.md, "JSON records"), against a real ``telha serve`` on each engine: a person
ingests a file with ``telha ingest``, edits one record, ingests again, and ``telha diff``
(on a pseudo-terminal and piped) and the REST diff show the edited record as changed. Bad
ids are typed refusals; a change of the id rule is a new version, never ``deduplicated``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.inproc import InProcessServer
from tests.support.server import child_environ, write_config
from tests.support.tty import run_on_tty

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

RISKS = [
    {"id": "R-1", "title": "supplier delay", "level": 2},
    {"id": "R-2", "title": "currency", "level": 1},
    {"id": "R-3", "title": "strike", "level": 3},
]


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("json-ids")
    with InProcessServer(write_config(folder, engine)) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _env(server: InProcessServer, key: str) -> dict[str, str]:
    return {**child_environ(), "TELHA_API_KEY": key, "TELHA_URL": server.base_url, "TERM": "xterm"}


def _piped(server: InProcessServer, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "telha", *args], capture_output=True, text=True,
        env=_env(server, key), timeout=120, check=False,
    )  # fmt: skip


def _client(server: InProcessServer, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=60)


def _post(c: httpx.Client, content: Any, options: dict[str, Any] | None = None) -> httpx.Response:
    body: dict[str, Any] = {"format": "json", "name": "risks.json", "content": json.dumps(content)}
    if options is not None:
        body["options"] = options
    return c.post("/v1/ingest", json=body)


def test_an_edited_record_is_changed_in_telha_diff(server: InProcessServer, tmp_path: Path) -> None:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    path = tmp_path / "risks.json"
    path.write_text(json.dumps(RISKS), encoding="utf-8")
    named = ("--options", '{"id_key": "id"}')
    first = _piped(server, key, "ingest", str(path), "--root", str(tmp_path), *named)
    assert first.returncode == 0, first.stdout + first.stderr
    edited = [RISKS[2], {**RISKS[0], "level": 3}, {"id": "R-4", "title": "flood", "level": 1}]
    path.write_text(json.dumps(edited), encoding="utf-8")  # R-2 gone, R-3 moved, R-1 edited
    second = _piped(server, key, "ingest", str(path), "--root", str(tmp_path), *named)
    assert second.returncode == 0, second.stdout + second.stderr
    with _client(server, key) as c:
        [src] = [s["sourceId"] for s in c.get("/v1/sources").json()["sources"]]
        tx2, tx1 = [v["sourceVersionTx"] for v in c.get(f"/v1/sources/{src}").json()["versions"]]
        diff = c.get(f"/v1/sources/{src}/diff").json()
    [change] = diff["changed"]
    assert change["before"]["nodeId"] == change["after"]["nodeId"]
    assert (change["before"]["properties"], change["after"]["properties"]) == (RISKS[0], edited[1])
    assert [n["properties"]["id"] for n in diff["added"]] == ["R-4"]
    assert [n["properties"]["id"] for n in diff["removed"]] == ["R-2"]
    assert diff["unchanged"] == 1  # R-3, moved
    code, shown = run_on_tty([sys.executable, "-m", "telha", "diff", src], _env(server, key))
    assert code == 0, shown
    plain = _ANSI.sub("", shown).splitlines()
    assert plain[0] == f"from {tx1} to {tx2}: 1 added, 1 removed, 1 changed, 1 unchanged"
    [tilde] = [line for line in plain if line.startswith("~ ")]
    assert tilde.startswith(f"~ {change['after']['nodeId']}  RISKS  ")
    assert tilde.endswith("  [level]")
    assert "\x1b[33m~ " in shown
    assert sorted(line[:2] for line in plain[1:]) == ["+ ", "- ", "~ "]
    piped = _piped(server, key, "diff", src)
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout
    assert piped.stdout.splitlines() == plain


def test_rules_and_refusals(server: InProcessServer) -> None:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    with _client(server, key) as c:
        v1 = _post(c, RISKS)  # without id_key: every record matched by content, as before
        assert v1.status_code == 201, v1.text
        # The same bytes with the id key named: other options, a new version (not a dedup).
        named = _post(c, RISKS, {"id_key": "id"})
        assert named.status_code == 201, named.text
        assert set(named.json()["nodeIds"]).isdisjoint(v1.json()["nodeIds"])
        again = _post(c, RISKS, {"id_key": "id"})
        assert again.status_code == 200 and again.json()["deduplicated"] is True
        # true: id, else _id: here the same ids as the key named.
        auto = _post(c, RISKS, {"id_key": True})
        assert auto.status_code == 201 and auto.json()["nodeIds"] == named.json()["nodeIds"]
        off = _post(c, RISKS, {"id_key": False})
        assert off.status_code == 201 and set(off.json()["nodeIds"]).isdisjoint(
            named.json()["nodeIds"]
        )
        src = v1.json()["sourceId"]
        versions = c.get(f"/v1/sources/{src}").json()["versions"]
        assert [v["reason"] for v in versions] == ["options", "options", "options", None]
        assert versions[2]["projection"]["options"] == {
            "id_key": "id", "label": "RISKS", "nested": "flatten"
        }  # fmt: skip
        assert versions[3]["projection"]["projection"] == 1
        # Under true, a shared id is matched by content; named, it is refused.
        shared = [{"id": 1, "a": 1}, {"id": 1, "a": 2}, {"id": 2}]
        assert _post(c, shared, {"id_key": True}).status_code == 201
        refusals = {
            "records 0 and 1 share the id 'id' = 1": (shared, {"id_key": "id"}),
            "record 0 has {\"x\":1} as its id key 'id'": ([{"id": {"x": 1}}], {"id_key": "id"}),
            "record 1 has no id key 'sku'": ([{"sku": "a"}, {"id": 1}], {"id_key": "sku"}),
            "record 0 has true as its id key 'sku'": ([{"sku": True}], {"id_key": "sku"}),
        }
        for message, (content, options) in refusals.items():
            resp = _post(c, content, options)
            assert resp.status_code == 400, resp.text
            error = resp.json()["error"]
            assert error["code"] == "INVALID_CONTENT" and message in error["message"], error
        for bad in ("", 5, 1.5, ["id"]):
            resp = _post(c, RISKS, {"id_key": bad})
            assert resp.status_code == 400, resp.text
            error = resp.json()["error"]
            assert error["code"] == "INVALID_REQUEST" and "options.id_key" in error["message"]
