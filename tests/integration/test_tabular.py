"""The tabular worker inside ``telha serve``: multipart upload → streamed partials →
rows readable with their span text; real corpus files with their documented outcomes;
determinism; day-first/month-first ambiguities end to end."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from telha.domain.model import Scope
from tests.conftest import CORPUS
from tests.support.inproc import InProcessServer, Server
from tests.support.queue_env import Tenant, transitions
from tests.support.server import write_config
from tests.support.wait import wait_job, wait_job_blocking

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("tabular")
    config = write_config(folder, workers={"in_process": ["tabular_worker"], "concurrency": 1})
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _upload(
    tenant: Tenant, fmt: str, name: str, data: bytes, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    form = {"format": fmt, "name": name}
    if options is not None:
        form["options"] = json.dumps(options)
    resp = await tenant.client.post("/v1/ingest", data=form, files={"file": (name, data)})
    assert resp.status_code == 202, resp.text
    return dict(resp.json())


async def _all_nodes(tenant: Tenant, **params: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {**params, "limit": "1000", **({"cursor": cursor} if cursor else {})}
        page = (await tenant.client.get("/v1/nodes", params=query)).json()
        nodes += page["nodes"]
        cursor = page["nextCursor"]
        if cursor is None:
            return nodes


async def test_upload_streams_partials_and_rows_read_back_with_their_text(
    tenant: Tenant,
) -> None:
    lines = ["id,city,amount,when"] + [
        f"{i},São Paulo {i % 7},{i * 1.5},2026-01-{i % 28 + 1:02d}" for i in range(2_500)
    ]
    data = ("\r\n".join(lines) + "\r\n").encode()
    posted = await _upload(tenant, "csv", "sales.csv", data, {"rows_per_partial": 1_000})
    job = await wait_job(tenant.client, posted["jobId"], "completed", "dead", within_s=60)
    assert job["state"] == "completed", job
    partials = [e["detail"] for e in job["events"] if e["transition"] == "partial"]
    # 1,000 rows per partial: two partials and the final part (the last 500 rows).
    assert [(d.split()[0], d.split()[2]) for d in partials] == [
        ("seq=0", "nodes=1001"),  # the TABLE node and 1,000 rows
        ("seq=1", "nodes=1000"),
        ("seq=2", "nodes=500"),
    ]
    assert job["stats"]["rows"] == 2_500 and job["stats"]["delimiter"] == ","

    rows = await _all_nodes(tenant, label="TABLE_ROW", sourceId=posted["sourceId"])
    assert len(rows) == 2_500
    row = next(r for r in rows if r["properties"]["row"] == 1_235)
    assert row["properties"] == {
        "id": 1_234, "city": "São Paulo 2", "amount": 1_851.0, "when": "2026-01-03", "row": 1_235,
    }  # fmt: skip
    (span,) = row["provenance"]["spans"]
    assert span["text"] == "1234\tSão Paulo 2\t1851.0\t2026-01-03"
    # The stored text is the header line and one TAB-joined line per row.
    version = (await tenant.client.get(f"/v1/sources/{posted['sourceId']}")).json()["versions"]
    assert len(version) == 1 and version[0]["size"] == len(data)
    text = (
        await tenant.client.get(
            f"/v1/sources/{posted['sourceId']}/versions/{version[0]['sourceVersionTx']}/text"
        )
    ).text
    assert text.split("\n")[0] == "id\tcity\tamount\twhen" and text.count("\n") == 2_500
    (table,) = await _all_nodes(tenant, label="TABLE", sourceId=posted["sourceId"])
    assert table["properties"]["rows"] == 2_500
    edges = (await tenant.client.get(f"/v1/nodes/{table['nodeId']}/edges")).json()["edges"]
    assert len(edges) == 2_500 and {e["type"] for e in edges} == {"CONTAINS"}


# Expected outcome through the service, per corpus file (the worker's unit tests check every
# file in detail): (options, final state, TABLE_ROW nodes or the failure reason's start).
CASES: dict[str, tuple[dict[str, Any], str, int | str]] = {
    "csv/bom.csv": ({}, "completed", 2),
    "csv/countries.csv": ({}, "completed", 5),
    "csv/latin1.csv": ({}, "completed", 2),
    "csv/foods1_latin1.csv": ({"delimiter": "§"}, "completed", 27),
    "tsv/table.tsv": ({}, "completed", 3),
    "xlsx/example.xlsx": ({}, "completed", 0),  # checked below: rows over several sheets
    "xlsx/protectedFile.xlsx": ({}, "dead", "unsupported_feature: encrypted"),
}


@pytest.mark.parametrize("rel", sorted(CASES))
async def test_corpus_files_through_the_service(tenant: Tenant, rel: str) -> None:
    options, state, expected = CASES[rel]
    path = CORPUS / rel
    fmt = rel.split("/")[0]
    resp = await tenant.client.post(
        "/v1/ingest",
        json={
            "format": fmt,
            "name": path.name,
            "contentBase64": base64.b64encode(path.read_bytes()).decode(),
            "options": options,
        },
    )
    assert resp.status_code == 202, resp.text
    job = await wait_job(tenant.client, resp.json()["jobId"], "completed", "dead", within_s=30)
    assert job["state"] == state, job
    if state == "dead":
        assert str(job["failureReason"]).startswith(str(expected))
        assert transitions(job)[-1] == "dead"
        return
    rows = await _all_nodes(tenant, label="TABLE_ROW", sourceId=job["sourceId"])
    if rel == "xlsx/example.xlsx":
        assert len(rows) == job["stats"]["rows"] > 0
        assert await _all_nodes(tenant, label="WORKBOOK", sourceId=job["sourceId"])
    else:
        assert len(rows) == expected


async def test_same_file_under_two_names_gives_the_same_text_and_node_count(
    tenant: Tenant,
) -> None:
    data = (CORPUS / "csv/countries.csv").read_bytes()
    seen = []
    for name in ("a/countries.csv", "b/countries-copy.csv"):
        posted = await _upload(tenant, "csv", name, data)
        await wait_job(tenant.client, posted["jobId"], "completed", within_s=30)
        source = (await tenant.client.get(f"/v1/sources/{posted['sourceId']}")).json()
        nodes = await _all_nodes(tenant, sourceId=posted["sourceId"])
        seen.append((source["versions"][0]["canonicalTextHash"], len(nodes)))
    assert seen[0] == seen[1] and seen[0][1] == 6  # one TABLE, five rows


async def test_month_first_reading_applied_and_ambiguity_shown(tenant: Tenant) -> None:
    data = (
        b"paid_on,due_on,amount\n3/2/2026,3/2/2026,10\n1/1/2026,25/12/2026,20\n"
        b"4/5/2026,4/5/2026,30\n"
    )
    posted = await _upload(tenant, "csv", "paid.csv", data, {"clarify": True})
    job = await wait_job(tenant.client, posted["jobId"], "completed", "dead", within_s=30)
    assert job["state"] == "completed", job
    rows = {
        r["properties"]["row"]: r
        for r in await _all_nodes(tenant, label="TABLE_ROW", sourceId=posted["sourceId"])
    }
    # paid_on has no evidence in the whole column: month-first applied, ambiguity recorded.
    first = (await tenant.client.get(f"/v1/nodes/{rows[1]['nodeId']}")).json()
    assert first["properties"]["paid_on"] == "2026-03-02"
    assert first["validTime"]["from"] == 1_772_409_600_000_000
    (amb,) = first["ambiguities"]
    assert amb["kind"] == "day_first_month_first"
    assert [c["label"] for c in amb["candidates"]] == [
        "2026-03-02 (month-first)",
        "2026-02-03 (day-first)",
    ]
    assert first["provenance"]["spans"][0]["text"] == "3/2/2026\t3/2/2026\t10"
    # due_on's row 2 (25 > 12) is evidence for day-first: the whole column reads day-first,
    # row 1 above it too, unambiguously.
    assert first["properties"]["due_on"] == "2026-02-03"
    third = (await tenant.client.get(f"/v1/nodes/{rows[3]['nodeId']}")).json()
    assert third["properties"]["due_on"] == "2026-05-04"
    assert third["properties"]["paid_on"] == "2026-04-05"


def test_remote_tabular_worker_killed_mid_stream_then_rerun_completes_once(
    tmp_path: Path,
) -> None:
    """A real ``tabular_worker`` process reading an upload through FetchContent is SIGKILLed
    after its first partials; its job comes back at once (``worker_lost``), a second process
    fetches the content again and streams the table afresh: one finalized version, every row
    exactly once."""
    with InProcessServer(
        write_config(
            tmp_path, workers={"in_process": []}, jobs={"lease_secs": 2, "reap_interval_s": 0.1}
        )
    ) as server:
        scope = Scope("t", "o")

        def run_worker() -> subprocess.Popen[bytes]:
            return server.spawn_worker("tabular_worker", scope, TELHA_HEARTBEAT_INTERVAL_SECS="0.5")

        rows = 30_000
        data = ("n,label\n" + "".join(f"{i},row {i}\n" for i in range(rows))).encode()
        key = server.create_key(scope.tenant_id, scope.organization_id)
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=30) as c:
            posted = c.post(
                "/v1/ingest",
                data={"format": "csv", "name": "kill.csv", "options": '{"rows_per_partial": 500}'},
                files={"file": ("kill.csv", data)},
            ).json()
            status = f"/v1/ingest/{posted['jobId']}"
            first = run_worker()
            try:
                deadline = time.monotonic() + 30
                while transitions(c.get(status).json()).count("partial") < 2:
                    assert time.monotonic() < deadline
                    time.sleep(0.02)
            finally:
                first.send_signal(signal.SIGKILL)
                first.wait()
            second = run_worker()
            try:
                job = wait_job_blocking(c, posted["jobId"], within_s=60)
                assert job["state"] == "completed", job
            finally:
                second.terminate()
                second.wait()
            events = transitions(job)
            # The killed worker's stream closed: its job came back at once (fast failover).
            assert "worker_lost" in events and "stream_abandoned" in events
            assert events.count("leased") == 2
            versions = c.get(f"/v1/sources/{posted['sourceId']}").json()["versions"]
            assert len(versions) == 1 and versions[0]["canonicalTextHash"] is not None
            seen: list[int] = []
            cursor = None
            while True:
                params = {"label": "TABLE_ROW", "sourceId": posted["sourceId"], "limit": 1000}
                page = c.get(
                    "/v1/nodes", params={**params, **({"cursor": cursor} if cursor else {})}
                ).json()
                seen += [n["properties"]["row"] for n in page["nodes"]]
                if (cursor := page["nextCursor"]) is None:
                    break
            assert sorted(seen) == list(range(1, rows + 1))


async def test_empty_upload_is_one_empty_table(tenant: Tenant) -> None:
    posted = await _upload(tenant, "csv", "empty.csv", b"")
    job = await wait_job(tenant.client, posted["jobId"], "completed", "dead", within_s=30)
    assert job["state"] == "completed", job
    (table,) = await _all_nodes(tenant, label="TABLE", sourceId=posted["sourceId"])
    assert table["properties"]["rows"] == 0 and job["stats"]["rows"] == 0
    versions = (await tenant.client.get(f"/v1/sources/{posted['sourceId']}")).json()["versions"]
    assert versions[0]["size"] == 0
