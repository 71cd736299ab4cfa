"""The listings against a real ``telha serve`` on each engine (docs/rest-api.md, "Listings"):
``GET /v1/sources`` newest change first with its states, filters and pages; a source whose
only job died answers ``GET /v1/sources/{id}``; ``GET /v1/ingest`` with its filters and the
parent/children walk; bad input (400 naming the field) and another scope's ids (404, never
listed). The test is the worker (a scripted one), so every job state is reached on purpose.
Then SQLite's query plans (index searches only, no scan of jobs, sources or source_versions),
and the migration's backfill of a store written by the first release."""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest

from telha.client import AsyncTelha, InvalidRequest
from telha.domain.ids import new_id, source_id_for
from telha.domain.listings import JobFilter, Page, SourceFilter
from telha.domain.model import NewJob, Scope
from telha.storage import StorageEngine
from telha.storage.listings.queries import (
    JOB_FAMILY_SQL,
    SOURCE_SUMMARY_SQL,
    jobs_query,
    name_range,
    prefix_count_query,
    sources_query,
)
from telha.storage.sqlite.dialect import SQLITE
from tests.support.inproc import InProcessServer
from tests.support.queue_env import Tenant, queue_server, text_submission
from tests.support.server import child_environ, write_config
from tests.support.wait import wait_job
from tests.support.worker import ScriptedWorker

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "round1"


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Iterator[InProcessServer]:
    with queue_server(
        tmp_path_factory, f"listings-{engine}", 30.0, engine, in_process=True
    ) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _get(client: httpx.AsyncClient, url: str, **params: Any) -> dict[str, Any]:
    resp = await client.get(url, params=params)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def _all(client: httpx.AsyncClient, url: str, key: str, **params: Any) -> list[Any]:
    """Every row of a listing, one page of ``limit`` after another (cursors followed)."""
    rows: list[Any] = []
    cursor = None
    while True:
        page = await _get(client, url, **params, **({"cursor": cursor} if cursor else {}))
        rows += page[key]
        cursor = page["nextCursor"]
        if cursor is None:
            return rows


async def _by_name(client: httpx.AsyncClient, **params: Any) -> list[str]:
    return [s["name"] for s in await _all(client, "/v1/sources", "sources", **params)]


async def test_sources_newest_change_first_with_states_filters_and_pages(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    c = tenant.client
    a = await tenant.post("text", "docs/a.txt", "alpha")
    b = await tenant.post("text", "docs/b.txt", "beta")
    pending = await tenant.post("markdown", "notes/c.md", "# gamma")
    applied = await c.post("/v1/ingest", json={"format": "json", "name": "d.json",
                                               "content": '[{"x": 1}]'})  # fmt: skip
    assert applied.status_code == 201, applied.text
    job_a = await worker.next_job(["text"])
    assert job_a.job_id == a["jobId"]
    assert (await worker.submit(job_a, text_submission("alpha"))).accepted
    job_b = await worker.next_job(["text"])
    assert (await worker.fail(job_b, "corrupt_input: not text", permanent=True)).accepted
    await wait_job(c, b["jobId"], "dead")

    # a's version (published last) changed last; b's job died without a version: still its
    # enqueue; the JSON version and c's enqueue between.
    listed = await _all(c, "/v1/sources", "sources", limit=100)
    assert [s["name"] for s in listed] == ["docs/a.txt", "d.json", "notes/c.md", "docs/b.txt"]
    assert [s["changedAt"] for s in listed] == sorted(
        (s["changedAt"] for s in listed), reverse=True
    )
    by = {s["name"]: s for s in listed}
    versions_a = (await _get(c, f"/v1/sources/{a['sourceId']}"))["versions"]
    assert by["docs/a.txt"] == {
        "sourceId": a["sourceId"], "name": "docs/a.txt", "format": "text",
        "latestVersionTx": versions_a[0]["sourceVersionTx"], "versionCount": 1,
        "state": "current", "lastJobId": a["jobId"], "lastJobState": "completed",
        "changedAt": versions_a[0]["publishedTx"],
    }  # fmt: skip
    assert by["docs/b.txt"] | {"changedAt": 0} == {
        "sourceId": b["sourceId"], "name": "docs/b.txt", "format": "text",
        "latestVersionTx": None, "versionCount": 0, "state": "pending",
        "lastJobId": b["jobId"], "lastJobState": "dead", "changedAt": 0,
    }  # fmt: skip
    assert (by["notes/c.md"]["state"], by["notes/c.md"]["lastJobState"]) == ("pending", "pending")
    assert by["notes/c.md"]["lastJobId"] == pending["jobId"]
    assert by["d.json"]["state"] == "current" and by["d.json"]["lastJobId"] is None
    assert by["d.json"]["latestVersionTx"] == applied.json()["sourceVersionTx"]

    # Pages of one follow each other with no gap and no repeat.
    assert await _by_name(c, limit=1) == [s["name"] for s in listed]
    first = await _get(c, "/v1/sources", limit=4)
    assert first["nextCursor"] is None  # exactly one page: no empty page after it
    # Filters.
    assert await _by_name(c, prefix="docs/") == ["docs/a.txt", "docs/b.txt"]
    assert await _by_name(c, prefix="docs/b") == ["docs/b.txt"]
    assert await _by_name(c, prefix="zzz") == []
    assert await _by_name(c, format="json") == ["d.json"]
    assert await _by_name(c, format="text", limit=1) == ["docs/a.txt", "docs/b.txt"]
    assert await _by_name(c, state="pending") == ["notes/c.md", "docs/b.txt"]
    assert await _by_name(c, state="current", prefix="docs/") == ["docs/a.txt"]
    assert await _by_name(c, state="erased") == []

    # A retire is a change: the source comes first, retired.
    assert (await c.delete(f"/v1/sources/{applied.json()['sourceId']}")).status_code == 200
    assert await _by_name(c, state="retired") == ["d.json"]
    assert (await _by_name(c))[0] == "d.json"
    # A new job for a source with a version keeps its state and format, and moves it up.
    again = await tenant.post("text", "docs/a.txt", "alpha two")
    top = (await _get(c, "/v1/sources", limit=1))["sources"][0]
    assert (top["name"], top["state"], top["lastJobId"]) == ("docs/a.txt", "current",
                                                             again["jobId"])  # fmt: skip
    assert (top["lastJobState"], top["versionCount"]) == ("pending", 1)
    # An erasure is a change too: its erase job becomes the source's last job.
    erased = await c.post(f"/v1/sources/{a['sourceId']}/erase", json={"reason": "asked"})
    assert erased.status_code == 200, erased.text
    top = (await _get(c, "/v1/sources", limit=1))["sources"][0]
    assert (top["name"], top["state"], top["lastJobState"]) == ("docs/a.txt", "erased",
                                                                "completed")  # fmt: skip
    erase_job = await tenant.job(top["lastJobId"])
    assert erase_job["kind"] == "erase"
    assert await _by_name(c, state="erased") == ["docs/a.txt"]
    [listed_erase] = await _all(c, "/v1/ingest", "jobs", kind="erase")
    assert (listed_erase["name"], listed_erase["sourceId"]) == ("docs/a.txt", a["sourceId"])
    assert (await tenant.job(again["jobId"]))["state"] == "dead"  # ended by the erasure


async def test_a_source_whose_only_job_died_answers_with_its_last_job(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    posted = await tenant.post("csv", "broken.csv", "a,b\n1,2\n")
    job = await worker.next_job(["csv"])
    assert (await worker.fail(job, "corrupt_input: bad quoting", permanent=True)).accepted
    await wait_job(tenant.client, posted["jobId"], "dead")
    source = await _get(tenant.client, f"/v1/sources/{posted['sourceId']}")
    assert source | {"changedAt": 0} == {
        "sourceId": posted["sourceId"], "name": "broken.csv", "format": "csv", "retired": None,
        "versions": [], "state": "pending", "latestVersionTx": None, "versionCount": 0,
        "lastJobId": posted["jobId"], "lastJobState": "dead", "changedAt": 0,
    }  # fmt: skip
    # A source with versions keeps its old fields and gains the same ones.
    json_src = await tenant.client.post(
        "/v1/ingest", json={"format": "json", "name": "ok.json", "content": '{"a": 1}'}
    )
    got = await _get(tenant.client, f"/v1/sources/{json_src.json()['sourceId']}")
    assert (got["state"], got["versionCount"], got["lastJobId"]) == ("current", 1, None)
    assert got["latestVersionTx"] == got["versions"][0]["sourceVersionTx"]
    # Never ingested: still 404.
    unknown = await tenant.client.get(f"/v1/sources/{source_id_for('never.txt')}")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "NOT_FOUND"


async def test_jobs_newest_first_with_filters_and_the_parent_children_walk(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    c = tenant.client
    parent = await tenant.post("eml", "mail/with-attachments.eml", "parent")
    held = await worker.next_job(["eml"])
    sub = text_submission("parent")
    sub["childJobs"] = [
        {
            "format": "text",
            "name": f"attachment:{n}",
            "contentB64": base64.b64encode(n.encode()).decode(),
        }
        for n in ("one", "two")
    ]
    assert (await worker.submit(held, sub)).accepted
    other = await tenant.post("csv", "t.csv", "a\n1\n")

    jobs = await _all(c, "/v1/ingest", "jobs", limit=1)
    assert [j["name"] for j in jobs] == ["t.csv", "attachment:two", "attachment:one",
                                         "mail/with-attachments.eml"]  # fmt: skip
    by = {j["name"]: j for j in jobs}
    mail = by["mail/with-attachments.eml"]
    assert mail | {"createdAt": 0, "updatedAt": 0} == {
        "jobId": parent["jobId"], "kind": "ingest:eml", "state": "completed",
        "sourceId": parent["sourceId"], "name": "mail/with-attachments.eml", "attempts": 1,
        "createdAt": 0, "updatedAt": 0, "failureReason": None, "parentJobId": None,
    }  # fmt: skip
    assert mail["createdAt"] < mail["updatedAt"]
    child = by["attachment:one"]
    assert (child["parentJobId"], child["state"], child["attempts"]) == (parent["jobId"],
                                                                         "pending", 0)  # fmt: skip
    assert child["createdAt"] == child["updatedAt"] == mail["updatedAt"]

    # The walk: the parent counts its children by state, each child names its parent.
    status = await tenant.job(parent["jobId"])
    assert (status["parentJobId"], status["children"]) == (None, {"pending": 2})
    children = await _all(c, "/v1/ingest", "jobs", parent=parent["jobId"])
    assert [j["name"] for j in children] == ["attachment:two", "attachment:one"]
    assert (await tenant.job(child["jobId"]))["parentJobId"] == parent["jobId"]
    assert (await tenant.job(child["jobId"]))["children"] == {}
    first = await worker.next_job(["text"])
    assert (await worker.fail(first, "corrupt_input: nope", permanent=True)).accepted
    counts = (await tenant.job(parent["jobId"]))["children"]
    assert counts == {"dead": 1, "pending": 1}

    names = lambda rows: [j["name"] for j in rows]  # noqa: E731
    assert names(await _all(c, "/v1/ingest", "jobs", state="completed")) == [
        "mail/with-attachments.eml"
    ]
    assert names(await _all(c, "/v1/ingest", "jobs", state="dead")) == ["attachment:one"]
    assert names(await _all(c, "/v1/ingest", "jobs", kind="ingest:text")) == [
        "attachment:two", "attachment:one"
    ]  # fmt: skip
    assert names(await _all(c, "/v1/ingest", "jobs", kind="ingest:text", state="pending")) == [
        "attachment:two"
    ]
    assert names(await _all(c, "/v1/ingest", "jobs", sourceId=other["sourceId"])) == ["t.csv"]
    assert await _all(c, "/v1/ingest", "jobs", state="cancelled") == []
    assert await _all(c, "/v1/ingest", "jobs", kind="erase") == []
    assert await _all(c, "/v1/ingest", "jobs", parent=str(uuid.uuid4())) == []


async def _telha(tenant: Tenant, key: str, *args: str) -> tuple[int, str, str]:
    """``telha ARGS`` piped: exit code, stdout, stderr."""
    env = {**child_environ(), "TELHA_API_KEY": key, "TELHA_URL": tenant.server.base_url}
    done = await anyio.run_process([sys.executable, "-m", "telha", *args], env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_client_and_cli_list_the_same(
    queue_srv: InProcessServer, tenant: Tenant, worker: ScriptedWorker
) -> None:
    parent = await tenant.post("eml", "inbox/m.eml", "mail")
    held = await worker.next_job(["eml"])
    sub = text_submission("mail")
    sub["childJobs"] = [{"format": "text", "name": "attachment:x", "contentB64": "eA=="}]
    assert (await worker.submit(held, sub)).accepted
    died = await tenant.post("csv", "inbox/d.csv", "a\n")
    job = await worker.next_job(["csv"])
    assert (await worker.fail(job, "corrupt_input: no", permanent=True)).accepted
    await wait_job(tenant.client, died["jobId"], "dead")
    rest_sources = await _all(tenant.client, "/v1/sources", "sources")
    rest_jobs = await _all(tenant.client, "/v1/ingest", "jobs")
    key = tenant.client.headers["x-api-key"]
    async with AsyncTelha(tenant.server.base_url, key) as client:
        listed = [s async for s in client.list_sources(page_size=1)]
        assert [msgspec.to_builtins(s) for s in listed] == rest_sources
        jobs = [j async for j in client.list_jobs(page_size=2)]
        assert [msgspec.to_builtins(j) for j in jobs] == rest_jobs
        children = [j.name async for j in client.list_jobs(parent=str(parent["jobId"]))]
        assert children == ["attachment:x"]
        page = await client.sources_page(state="pending", limit=1)
        assert [s.name for s in page.sources] == ["inbox/d.csv"] and page.next_cursor
        with pytest.raises(InvalidRequest, match="kind"):
            await client.jobs_page(kind="nope")
        found = await client.source(str(died["sourceId"]))
        assert (found.state, found.versions, found.last_job_state) == ("pending", [], "dead")
        status = await client.job(str(parent["jobId"]))
        assert (status.parent_job_id, status.children) == (None, {"pending": 1})

    code, out, err = await _telha(tenant, key, "sources", "--prefix", "inbox/")
    assert code == 0, err
    assert out.splitlines() == [
        "state\tformat\tversions\tlast job\tsource id\tname",
        f"pending\tcsv\t0\tdead\t{died['sourceId']}\tinbox/d.csv",
        f"current\teml\t1\tcompleted\t{parent['sourceId']}\tinbox/m.eml",
    ]
    code, out, err = await _telha(tenant, key, "jobs", "--parent", str(parent["jobId"]))
    assert code == 0 and out.splitlines()[1].startswith("pending\tingest:text\t0\t"), out
    code, out, err = await _telha(tenant, key, "jobs", "--limit", "1")
    assert code == 0 and len(out.splitlines()) == 2 and "more than 1" in err, (out, err)
    assert out.splitlines()[1].split("\t")[:2] == ["dead", "ingest:csv"]
    code, out, err = await _telha(tenant, key, "jobs", "--state", "bogus")
    assert code == 1 and err.startswith("telha: INVALID_REQUEST: state"), err
    code, out, err = await _telha(tenant, key, "job", str(parent["jobId"]))
    assert code == 0 and "children  1 pending" in out, out
    code, out, err = await _telha(tenant, key, "source", str(died["sourceId"]))
    assert code == 0 and "state   pending" in out and f"{died['jobId']}  dead" in out, out


BAD_SOURCES = [
    ({"cursor": "garbage"}, "cursor"),
    ({"cursor": ""}, "cursor"),
    ({"limit": "0"}, "limit"),
    ({"limit": "1001"}, "limit"),
    ({"limit": "ten"}, "limit"),
    ({"limit": "-1"}, "limit"),
    ({"state": "superseded"}, "state"),
    ({"state": "CURRENT"}, "state"),
    ({"format": "exe"}, "format"),
    ({"prefix": "a\x00b"}, "prefix"),
]
BAD_JOBS = [
    ({"cursor": "AAAA"}, "cursor"),
    ({"limit": "100000"}, "limit"),
    ({"state": "running"}, "state"),
    ({"kind": "ingest:exe"}, "kind"),
    ({"kind": "ingest:json"}, "kind"),
    ({"sourceId": "not-a-uuid"}, "sourceId"),
    ({"parent": "42"}, "parent"),
]


async def test_bad_input_is_400_naming_the_field(tenant: Tenant) -> None:
    await tenant.post("text", "x.txt", "x")
    await tenant.post("text", "y.txt", "y")
    cursors = {}
    for url, key in (("/v1/sources", "sources"), ("/v1/ingest", "jobs")):
        page = await _get(tenant.client, url, limit=1)
        assert len(page[key]) == 1 and page["nextCursor"]
        cursors[url] = page["nextCursor"]
    swapped = [
        ("/v1/sources", {"cursor": cursors["/v1/ingest"]}, "cursor"),  # another listing's
        ("/v1/ingest", {"cursor": cursors["/v1/sources"]}, "cursor"),
        ("/v1/ingest", {"cursor": cursors["/v1/ingest"][:-2]}, "cursor"),
    ]
    cases = [("/v1/sources", p, f) for p, f in BAD_SOURCES]
    cases += [("/v1/ingest", p, f) for p, f in BAD_JOBS] + swapped
    for url, params, field in cases:
        resp = await tenant.client.get(url, params=params)
        assert resp.status_code == 400, (url, params, resp.text)
        error = resp.json()["error"]
        assert error["code"] == "INVALID_REQUEST" and field in error["message"], (params, error)


async def test_another_scope_sees_nothing_and_gets_404(
    queue_srv: InProcessServer, tenant: Tenant, worker: ScriptedWorker
) -> None:
    posted = await tenant.post("eml", "private.eml", "secret")
    held = await worker.next_job(["eml"])
    sub = text_submission("secret")
    sub["childJobs"] = [{"format": "text", "name": "attachment:p", "contentB64": "cA=="}]
    assert (await worker.submit(held, sub)).accepted
    key = queue_srv.create_key(f"other-{uuid.uuid4()}", "org")
    async with httpx.AsyncClient(
        base_url=queue_srv.base_url, headers={"x-api-key": key}, timeout=30
    ) as other:
        assert (await _get(other, "/v1/sources")) == {"sources": [], "nextCursor": None}
        assert (await _get(other, "/v1/ingest")) == {"jobs": [], "nextCursor": None}
        assert (await _get(other, "/v1/ingest", parent=posted["jobId"]))["jobs"] == []
        assert (await _get(other, "/v1/ingest", sourceId=posted["sourceId"]))["jobs"] == []
        for url in (f"/v1/sources/{posted['sourceId']}", f"/v1/ingest/{posted['jobId']}"):
            resp = await other.get(url)
            assert resp.status_code == 404 and resp.json()["error"]["code"] == "NOT_FOUND"
        # The owner's cursor carries no scope: in another scope it lists nothing of it.
        page = await _get(tenant.client, "/v1/ingest", limit=1)
        assert (await _get(other, "/v1/ingest", cursor=page["nextCursor"]))["jobs"] == []


# -- storage: query plans and the backfill --------------------------------------------------


def test_name_range_covers_exactly_the_names_with_the_prefix() -> None:
    assert name_range("docs/") == ("docs/", "docs0")
    assert name_range("a\U0010ffff") == ("a\U0010ffff", "b")
    assert name_range("\U0010ffff") == ("\U0010ffff", None)
    assert name_range("\ud7ff") == ("\ud7ff", "\ue000")
    low, high = name_range("ab")
    names = ["a", "ab", "ab\x00", "abz", "ab\U0010ffff", "ac", "b"]
    assert [n for n in names if low <= n and (high is None or n < high)] == [
        "ab", "ab\x00", "abz", "ab\U0010ffff"
    ]  # fmt: skip


PLANS: list[tuple[str, str, Any, str]] = [
    ("sources", "no filter", SourceFilter(), "sources_by_change"),
    ("sources", "state", SourceFilter(state="pending"), "sources_by_state"),
    ("sources", "format", SourceFilter(format="text"), "sources_by_format"),
    ("sources", "by name", SourceFilter(prefix="docs/"), "sources_by_name"),
    ("sources", "prefix", SourceFilter(prefix="docs/"), "sources_by_change"),
    ("sources", "prefix", SourceFilter(prefix="docs/", state="current"), "sources_by_state"),
    ("jobs", "no filter", JobFilter(), "jobs_by_scope"),
    ("jobs", "state", JobFilter(state="dead"), "jobs_by_state"),
    ("jobs", "kind", JobFilter(kind="ingest:text"), "jobs_by_kind"),
    ("jobs", "source", JobFilter(source_id=b"s" * 16), "jobs_by_source"),
    ("jobs", "parent", JobFilter(parent=b"p" * 16), "jobs_by_parent"),
]


def _scans_a_table(plan: list[str]) -> bool:
    """Whether a step of ``plan`` reads a whole table (``SCAN jobs``, ``SCAN s``, …); the
    scan of a bounded subquery's rows (``SCAN p``) is none."""
    tables = {"jobs", "j", "sources", "s", "source_versions", "job_events"}
    return any(step.split(" ")[:1] == ["SCAN"] and step.split(" ")[1] in tables for step in plan)


async def test_sqlite_listing_plans_search_indexes_and_scan_nothing(tmp_path: Path) -> None:
    from tests.support.stores import fresh_store

    scope = Scope("plans", "org")
    async with fresh_store("sqlite", tmp_path) as store:
        for i in range(200):
            name = f"docs/{i}.txt"
            job = NewJob(new_id(), "ingest:text", "text", source_id_for(name).bytes,
                         new_id() * 2, b"{}", name=name)  # fmt: skip
            assert not (await store.jobs.enqueue(scope, job, now_us=1_000 + i, dedup=True)).erased
        listed = await store.listings.sources(scope, SourceFilter(prefix="docs/1"), Page(5))
        assert [s.name for s in listed] == [f"docs/{i}.txt" for i in (199, 198, 197, 196, 195)]
    conn = sqlite3.connect(tmp_path / "store.db")
    sid = conn.execute("SELECT scope_id FROM scopes").fetchone()[0]
    for listing, how, f, index in PLANS:
        for page in (Page(101), Page(101, (1_100, b"k" * 16))):
            if listing == "sources":
                sql, params = sources_query(sid, f, page, SQLITE, by_name=how == "by name")
            else:
                sql, params = jobs_query(sid, f, page, SQLITE)
            plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
            assert not _scans_a_table(plan), (listing, f, plan)
            assert plan[0].startswith("SEARCH") and f"INDEX {index} " in plan[0], (f, plan)
            # The joined row (the last job, the job's source) is a primary-key probe.
            assert "PRIMARY KEY" in plan[1] and "LEFT-JOIN" in plan[1], plan
            # Only a prefix read by name sorts (the rows of that prefix).
            sorts = any("TEMP B-TREE" in step for step in plan)
            assert sorts == (how == "by name"), plan
    others = [
        (SOURCE_SUMMARY_SQL, [sid, b"s" * 16]),
        (JOB_FAMILY_SQL, [b"p" * 16]),
        prefix_count_query(sid, SourceFilter(prefix="docs/")),
    ]
    for sql, params in others:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
        assert not _scans_a_table(plan), plan
        assert any(step.startswith("SEARCH") for step in plan), plan
    conn.close()


async def test_a_prefix_lists_the_same_read_by_name_or_by_walking(store: StorageEngine) -> None:
    """Both ways of reading a prefix (few names: by name and sorted; many: the listing's
    order walked) list the same rows, on both engines."""
    from telha.storage.listings import queries as listings

    scope = Scope("prefix", "org")
    for i in range(30):
        name = f"{'ab' if i % 3 else 'zz'}/{i}.txt"
        job = NewJob(new_id(), "ingest:text", "text", source_id_for(name).bytes,
                     new_id() * 2, b"{}", name=name)  # fmt: skip
        await store.jobs.enqueue(scope, job, now_us=5_000 + i, dedup=True)

    async def pages(prefix: str) -> list[str]:
        got: list[str] = []
        page = Page(4)
        while True:
            rows = await store.listings.sources(scope, SourceFilter(prefix=prefix), page)
            got += [r.name for r in rows]
            if len(rows) < page.limit:
                return got
            page = Page(4, (rows[-1].changed_at, rows[-1].source_id))

    expected = [f"ab/{i}.txt" for i in range(29, -1, -1) if i % 3]
    by_name = await pages("ab/")
    original = listings.PREFIX_SORTED_MAX
    listings.PREFIX_SORTED_MAX = 5  # 20 names have the prefix: walked
    try:
        walked = await pages("ab/")
    finally:
        listings.PREFIX_SORTED_MAX = original
    assert by_name == walked == expected
    assert await pages("zz/1") == ["zz/18.txt", "zz/15.txt", "zz/12.txt"]
    assert await pages("zz/2") == ["zz/27.txt", "zz/24.txt", "zz/21.txt"]
    assert await pages("a") == expected and await pages("y") == []


async def test_versions_jobs_and_retires_keep_the_sources_row(store: StorageEngine) -> None:
    """The row follows each write in its own transaction, on both engines: a version
    published without a job, a job enqueued, a second version, a retire."""
    from telha.domain.model import Dedup, NewVersion
    from telha.domain.projection import NodeOut, Projection, SpanOut

    scope = Scope("rows", "org")
    source = source_id_for("r.txt").bytes
    projection = Projection(b"hello", [SpanOut(0, 5, "body")], [NodeOut(("DOC",), b"{}", (0,))])
    version = NewVersion(source, "r.txt", "text", b"h" * 32, 5, "test")
    first = await store.versions.commit(scope, version, projection, dedup=Dedup.NONE)
    [row] = await store.listings.sources(scope, SourceFilter(), Page(10))
    assert (row.name, row.format, row.state, row.latest_tx, row.version_count) == (
        "r.txt", "text", "current", first.source_version_tx, 1
    )  # fmt: skip
    assert (row.last_job_id, row.changed_at) == (None, first.source_version_tx)
    assert first.source_version_tx is not None
    job = NewJob(new_id(), "ingest:text", "text", source, b"n" * 32, b"{}", name="r.txt")
    await store.jobs.enqueue(scope, job, now_us=first.source_version_tx + 1, dedup=True)
    row2 = await store.listings.source(scope, source)
    assert row2 is not None
    assert (row2.state, row2.version_count, row2.last_job_id, row2.last_job_state) == (
        "current", 1, job.job_id, "pending"
    )  # fmt: skip
    assert row2.changed_at == first.source_version_tx + 1
    other = NewVersion(source, "r.txt", "markdown", b"i" * 32, 5, "test")
    second = await store.versions.commit(scope, other, projection, dedup=Dedup.NONE)
    done = await store.versions.retire(scope, source, "gone")
    row3 = await store.listings.source(scope, source)
    assert row3 is not None
    assert (row3.state, row3.format, row3.latest_tx, row3.version_count) == (
        "retired", "markdown", second.source_version_tx, 2
    )  # fmt: skip
    assert (row3.last_job_id, row3.changed_at) == (job.job_id, done.tx)
    assert await store.listings.sources(Scope("nobody", "org"), SourceFilter(), Page(10)) == []
    assert await store.listings.job_family(Scope("nobody", "org"), job.job_id) is None


async def test_the_migration_lists_a_first_release_store(tmp_path: Path) -> None:
    shutil.copy(FIXTURE / "round1.db", tmp_path / "telha.db")
    recorded = json.loads((FIXTURE / "round1_reads.json").read_text(encoding="utf-8"))
    config = write_config(tmp_path, workers={"in_process": []})
    key = (FIXTURE / "round1_key.txt").read_text().strip()
    with InProcessServer(config) as srv:
        async with httpx.AsyncClient(
            base_url=srv.base_url, headers={"x-api-key": key}, timeout=60
        ) as c:
            sources = await _all(c, "/v1/sources", "sources")
            jobs = await _all(c, "/v1/ingest", "jobs")
        assert srv.stop() == 0, srv.log_text()
    old = {
        path.removeprefix("/v1/sources/"): answer["body"]
        for path, answer in recorded.items()
        if path.startswith("/v1/sources/") and path.count("/") == 3
    }
    old_jobs = {
        path.removeprefix("/v1/ingest/"): answer["body"]
        for path, answer in recorded.items()
        if path.startswith("/v1/ingest/")
    }
    assert {s["sourceId"] for s in sources} == set(old) and len(old) == 3
    for s in sources:
        before = old[s["sourceId"]]
        assert (s["name"], s["format"], s["state"]) == (before["name"], before["format"],
                                                        "current")  # fmt: skip
        assert s["versionCount"] == len(before["versions"])
        assert s["latestVersionTx"] == before["versions"][0]["sourceVersionTx"]
        mine = [j["jobId"] for j in jobs if j["sourceId"] == s["sourceId"]]
        assert s["lastJobId"] == (mine[0] if mine else None)
        if mine:
            assert s["lastJobState"] == "completed"
    assert {j["jobId"] for j in jobs} == set(old_jobs) and len(jobs) == 3
    names = {s["sourceId"]: s["name"] for s in sources}
    for j in jobs:
        assert j["name"] == names[j["sourceId"]] and j["parentJobId"] is None
        assert j["kind"] == old_jobs[j["jobId"]]["kind"]
    assert [j["createdAt"] for j in jobs] == sorted((j["createdAt"] for j in jobs), reverse=True)
    assert [s["changedAt"] for s in sources] == sorted(
        (s["changedAt"] for s in sources), reverse=True
    )
