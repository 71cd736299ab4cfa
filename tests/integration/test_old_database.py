"""A database written by an earlier release opens and serves under this code.

``tests/fixtures/round1/round1.db`` was written by the first release's ``telha serve``
(``make.py`` beside it, run from a checkout of that release): two JSON versions, two markdown
versions through ``text_worker`` and a CSV through ``tabular_worker``. ``round1_reads.json``
holds what that release answered to every read of it (sources, version texts and spans, node
listings, each node and its edges, each job). This code must answer the same — fields added
since may appear beside them — and then keep writing to the same file.

One answer changed on purpose: that release left a source's earlier versions' nodes current
beside the latest version's. The upgrade supersedes them at the latest version's tx
(docs/architecture.md, "Versions and node identity"), so they answer 404 now, leave the
listings, and read as recorded ``asOf`` their own time, closed at the latest version's tx.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.inproc import InProcessServer
from tests.support.server import settled_job, telha_check, write_config

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "round1"


@pytest.fixture
def old_server(tmp_path: Path) -> Iterator[InProcessServer]:
    shutil.copy(FIXTURE / "round1.db", tmp_path / "telha.db")
    config = write_config(
        tmp_path, workers={"in_process": ["text_worker", "tabular_worker"], "concurrency": 1}
    )
    srv = InProcessServer(config).start()
    yield srv
    srv.kill()


async def test_every_read_answers_as_the_release_that_wrote_it(
    old_server: InProcessServer,
) -> None:
    recorded = json.loads((FIXTURE / "round1_reads.json").read_text(encoding="utf-8"))
    assert len(recorded) > 40
    key = (FIXTURE / "round1_key.txt").read_text().strip()
    async with httpx.AsyncClient(
        base_url=old_server.base_url, headers={"x-api-key": key}, timeout=60
    ) as c:
        superseded = _superseded(recorded)
        assert len(superseded) == 6  # people.json's and notes.md's first versions
        for path, answer in recorded.items():
            node = path.removeprefix("/v1/nodes/").removesuffix("/edges")
            if node in superseded:
                r = await c.get(path)
                assert r.status_code == 404, path
                if path.endswith("/edges"):
                    continue
                then = answer["body"]["txTime"]["from"]
                r = await c.get(path, params={"asOf": then})
                closed = {**answer["body"], "txTime": {"from": then, "to": superseded[node]}}
                assert r.status_code == 200 and _subset(closed, r.json()), path
                continue
            expected = answer["body"]
            if path.startswith("/v1/nodes?"):
                nodes = [n for n in expected["nodes"] if n["nodeId"] not in superseded]
                expected = {**expected, "nodes": nodes}
            r = await c.get(path)
            body = r.json() if "json" in r.headers.get("content-type", "") else r.text
            if path.startswith("/v1/sources/") and path.count("/") == 3 and r.status_code == 200:
                body = _without_version_fields(body)
            assert r.status_code == answer["status"] and _subset(expected, body), path


def _superseded(recorded: dict[str, Any]) -> dict[str, int]:
    """Node id → the tx that supersedes it: a recorded node written before its source's
    latest version."""
    latest = {
        path.removeprefix("/v1/sources/"): max(v["sourceVersionTx"] for v in a["body"]["versions"])
        for path, a in recorded.items()
        if path.startswith("/v1/sources/") and path.count("/") == 3
    }
    out: dict[str, int] = {}
    for path, answer in recorded.items():
        if not path.startswith("/v1/nodes/") or path.endswith("/edges"):
            continue
        body = answer["body"]
        source = body["provenance"]["spans"][0]["sourceId"]
        if body["txTime"]["from"] < latest[source]:
            out[body["nodeId"]] = latest[source]
    return out


def _subset(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` answers ``expected``: equal, except that objects may carry more
    fields (added since the recording)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _subset(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def _without_version_fields(source: dict[str, object]) -> dict[str, object]:
    """``GET /v1/sources/{id}`` without the fields added since that release (docs/rest-api.md,
    "Versions and diffs"), after checking what they say of versions written before them:
    not retired, the latest current and the rest superseded, published at their own tx, no
    root node or changes recorded."""
    assert source.pop("retired") is None
    versions = source["versions"]
    assert isinstance(versions, list)
    for i, v in enumerate(versions):
        state = v.pop("state")
        assert state == ("current" if i == 0 else "superseded"), v
        assert v.pop("publishedTx") == v["sourceVersionTx"]
        assert v.pop("rootNodeId") is None and v.pop("changes") is None
    return source


async def test_the_old_file_takes_new_versions_and_checks_clean(
    old_server: InProcessServer,
) -> None:
    key = (FIXTURE / "round1_key.txt").read_text().strip()
    async with httpx.AsyncClient(
        base_url=old_server.base_url, headers={"x-api-key": key}, timeout=60
    ) as c:
        body = {"format": "markdown", "name": "notes.md", "content": "# Title\n\nDelta.\n"}
        job = await settled_job(c, body)
        assert job["state"] == "completed", job
        source = (await c.get(f"/v1/sources/{job['sourceId']}")).json()
        assert len(source["versions"]) == 3
        tx = source["versions"][0]["sourceVersionTx"]
        text = await c.get(f"/v1/sources/{job['sourceId']}/versions/{tx}/text")
        assert text.text == "# Title\n\nDelta.\n"
        again = await c.post("/v1/ingest", json=body)
        assert (again.status_code, again.json()["deduplicated"]) == (200, True)
    old_server.stop()
    checked = telha_check(old_server.config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
