"""web_worker inside ``telha serve``: pages served on 127.0.0.1 by the test itself
(never any other address: the server's ``[web] allowed_hosts`` lists 127.0.0.1 only),
fetched by the real browser, projected, stored; recrawl dedup, crawl fan-out with
robots.txt, the failure map."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tests.conftest import CORPUS
from tests.support.inproc import InProcessServer
from tests.support.queue_env import Tenant, transitions
from tests.support.server import write_config
from tests.support.site import Site, serve_site
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

NO_DELAY = {"crawl": {"delay_s": 0}}


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("web")
    config = write_config(
        folder,
        workers={"in_process": ["web_worker", "tabular_worker"], "concurrency": 2},
        jobs={"max_attempts": 3, "backoff_base_ms": 10, "backoff_max_s": 5, "reap_interval_s": 1},
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve_site() as s:
        yield s


async def _post(tenant: Tenant, url: str, **options: Any) -> dict[str, Any]:
    resp = await tenant.client.post(
        "/v1/ingest", json={"format": "web", "name": url, "options": options or NO_DELAY}
    )
    assert resp.status_code == 202, resp.text
    return dict(resp.json())


async def _crawl_page(tenant: Tenant, url: str, **options: Any) -> dict[str, Any]:
    posted = await _post(tenant, url, **options)
    job = await wait_job(tenant.client, posted["jobId"], "completed", "dead", within_s=60)
    assert job["state"] == "completed", job
    return job


async def _nodes(tenant: Tenant, source_id: str, label: str) -> list[dict[str, Any]]:
    resp = await tenant.client.get(
        "/v1/nodes", params={"sourceId": source_id, "label": label, "limit": 1000}
    )
    return list(resp.json()["nodes"])


async def _text(tenant: Tenant, source_id: str) -> str:
    source = (await tenant.client.get(f"/v1/sources/{source_id}")).json()
    tx = source["versions"][0]["sourceVersionTx"]
    return str((await tenant.client.get(f"/v1/sources/{source_id}/versions/{tx}/text")).text)


async def _versions(tenant: Tenant, source_id: str) -> list[dict[str, Any]]:
    return list((await tenant.client.get(f"/v1/sources/{source_id}")).json()["versions"])


@pytest.mark.parametrize(
    "rel",
    [
        "html/hyperlink_03.html",
        "html/table_06.html",
        "html/wiki_duck.html",
        "html/testHTML_charset_utf16le.html",
        "html/testArabicMisleadingCharset.html",
        "html/testHTMLBadScript.html",
    ],
)
async def test_corpus_pages(tenant: Tenant, site: Site, rel: str) -> None:
    url = site.page(f"/corpus/{rel}", (CORPUS / rel).read_bytes(), content_type="text/html")
    job = await _crawl_page(tenant, url)
    sid = str(job["sourceId"])
    (doc,) = await _nodes(tenant, sid, "DOCUMENT")
    props = doc["properties"]
    assert (props["format"], props["url"], props["final_url"], props["status"]) == (
        "web", url, url, 200,
    )  # fmt: skip
    assert "fetched_at" not in props
    text = await _text(tenant, sid)
    if rel == "html/table_06.html":
        assert await _nodes(tenant, sid, "TABLE_ROW")
    if rel == "html/wiki_duck.html":  # its many relative links are absolute URL_REFs
        refs = await _nodes(tenant, sid, "URL_REF")
        assert len(refs) > 50
        assert all(r["properties"]["url"].startswith("http") for r in refs)
        assert all("#" not in r["properties"]["url"] for r in refs)
        assert "duck" in text.lower()
    if rel == "html/testHTMLBadScript.html":
        assert "alert" not in text  # script text does not leak


async def test_links_base_href_and_js_rendered_text(tenant: Tenant, site: Site) -> None:
    site.page("/docs/base/target.html", "<p>target</p>")
    url = site.page(
        "/docs/page.html",
        "<html><head><title>Links</title><base href='/docs/base/'></head><body>"
        "<h1>Links</h1><p>Go to <a href='target.html#section'>the target</a>.</p>"
        "<p>Again <a href='target.html'>target</a>, then <a href='/root.html'>root</a>"
        " and <a href='mailto:x@127.0.0.1'>mail</a>.</p>"
        "<script>document.body.insertAdjacentHTML('beforeend',"
        " '<p>Rendered only by script: <a href=\"../js.html\">js link</a></p>')</script>"
        "</body></html>",
    )
    job = await _crawl_page(tenant, url)
    sid = str(job["sourceId"])
    text = await _text(tenant, sid)
    assert "Rendered only by script:" in text
    (doc,) = await _nodes(tenant, sid, "DOCUMENT")
    assert doc["properties"]["title"] == "Links"
    refs = {r["properties"]["url"]: r for r in await _nodes(tenant, sid, "URL_REF")}
    assert sorted(refs) == sorted(
        site.url(p) for p in ("/docs/base/target.html", "/root.html", "/docs/js.html")
    )  # resolved against <base href>, fragment stripped, one node per URL, no mailto
    target = refs[site.url("/docs/base/target.html")]
    incoming = (
        await tenant.client.get(f"/v1/nodes/{target['nodeId']}/edges", params={"direction": "in"})
    ).json()["edges"]
    assert len(incoming) == 2 and {e["type"] for e in incoming} == {"LINKS_TO"}
    assert sorted(e["properties"]["anchor"] for e in incoming) == ["target", "the target"]
    for edge in incoming:  # from the paragraphs holding the link
        holder = (await tenant.client.get(f"/v1/nodes/{edge['from']}")).json()
        assert holder["labels"] == ["PARAGRAPH"]
        assert "target" in holder["properties"]["text"]
        assert holder["provenance"]["spans"][0]["text"] == holder["properties"]["text"]


async def test_wait_for_text_a_script_adds_later(tenant: Tenant, site: Site) -> None:
    url = site.page(
        "/late.html",
        "<h1>Late</h1><script>setTimeout(() => document.body.insertAdjacentHTML('beforeend',"
        " '<p id=\"late\">Arrived after load.</p>'), 300)</script>",
    )
    job = await _crawl_page(tenant, url, wait_for="#late", crawl={"delay_s": 0})
    assert "Arrived after load." in await _text(tenant, str(job["sourceId"]))


async def test_redirect_and_relative_links(tenant: Tenant, site: Site) -> None:
    site.page("/new/place.html", "<p>Moved here, see <a href='next.html'>next</a>.</p>")
    old = site.redirect("/old.html", "/new/place.html")
    job = await _crawl_page(tenant, old)
    sid = str(job["sourceId"])
    (doc,) = await _nodes(tenant, sid, "DOCUMENT")
    assert doc["properties"]["url"] == old
    assert doc["properties"]["final_url"] == site.url("/new/place.html")
    (ref,) = await _nodes(tenant, sid, "URL_REF")
    assert ref["properties"]["url"] == site.url("/new/next.html")  # against the final URL


async def test_recrawl_unchanged_then_changed(tenant: Tenant, site: Site) -> None:
    url = site.page("/news.html", "<h1>News</h1><p>First edition.</p>")
    first = await _crawl_page(tenant, url)
    sid = str(first["sourceId"])
    again = await _crawl_page(tenant, url)
    assert again["jobId"] != first["jobId"]  # a fetch format is never deduplicated on request
    assert again["events"][-1] == {**again["events"][-1], "detail": "deduplicated"}
    assert len(await _versions(tenant, sid)) == 1
    site.page("/news.html", "<h1>News</h1><p>Second edition.</p>")
    await _crawl_page(tenant, url)
    versions = await _versions(tenant, sid)
    assert len(versions) == 2
    assert "Second edition." in await _text(tenant, sid)


async def test_depth_one_crawl_honours_robots(tenant: Tenant, site: Site) -> None:
    links = "".join(f"<li><a href='/site/p{i}.html'>page {i}</a></li>" for i in range(1, 5))
    root = site.page("/site/index.html", f"<h1>Site</h1><ul>{links}</ul>")
    for i in range(1, 5):  # every page links back and on: depth 1 stops there
        site.page(f"/site/p{i}.html", f"<p>Page {i}: <a href='/site/deeper{i}.html'>on</a></p>")
    site.page("/robots.txt", "User-agent: *\nDisallow: /site/p4.html\n", content_type="text/plain")
    job = await _crawl_page(tenant, root, crawl={"max_depth": 1, "delay_s": 0})
    assert job["stats"]["children"] == 3
    for i in range(1, 4):
        url = site.url(f"/site/p{i}.html")
        with anyio.fail_after(60):
            while True:
                if await _page_docs(tenant, url):
                    break
                await anyio.sleep(0.1)
    assert site.hit_count("/site/p4.html") == 0  # disallowed by robots.txt
    assert all(site.hit_count(f"/site/deeper{i}.html") == 0 for i in range(1, 5))


async def _page_docs(tenant: Tenant, url: str) -> list[dict[str, Any]]:
    docs = (
        await tenant.client.get("/v1/nodes", params={"label": "DOCUMENT", "limit": 1000})
    ).json()["nodes"]
    return [d for d in docs if d["properties"].get("url") == url]


async def test_csv_response_becomes_a_csv_child_job(tenant: Tenant, site: Site) -> None:
    site.page("/data/n.csv", "id,v\n1,2\n3,4\n", content_type="text/csv")
    url = site.redirect("/data/moved.csv", "/data/n.csv")  # followed by the download path
    job = await _crawl_page(tenant, url)
    assert job["stats"]["routed_to"] == "csv"
    (stub,) = await _nodes(tenant, str(job["sourceId"]), "DOCUMENT")
    assert stub["properties"]["final_url"] == site.url("/data/n.csv")
    assert stub["properties"]["routed_to"] == "csv"
    rows: list[dict[str, Any]] = []
    with anyio.fail_after(30):
        while len(rows) < 2:
            rows = (await tenant.client.get("/v1/nodes", params={"label": "TABLE_ROW"})).json()[
                "nodes"
            ]
            await anyio.sleep(0.1)
    assert sorted(r["properties"]["id"] for r in rows) == [1, 3]


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (404, "corrupt_input: http_status 404"),
        (410, "corrupt_input: http_status 410"),
        (401, "unsupported_feature: auth_required: http_status 401"),
        (403, "unsupported_feature: auth_required: http_status 403"),
    ],
)
async def test_permanent_statuses(tenant: Tenant, site: Site, status: int, reason: str) -> None:
    url = site.page(f"/status/{status}", "<p>no</p>", status=status)
    posted = await _post(tenant, url)
    job = await wait_job(tenant.client, posted["jobId"], "dead", "completed", within_s=30)
    assert job["state"] == "dead" and job["attempts"] == 1
    assert str(job["failureReason"]).startswith(reason)


@pytest.mark.parametrize("status", [429, 503])
async def test_retryable_statuses_honour_retry_after(
    tenant: Tenant, site: Site, status: int
) -> None:
    path = f"/busy/{status}"
    url = site.page(path, "<p>busy</p>", status=status, headers={"Retry-After": "1"})
    posted = await _post(tenant, url)
    with anyio.fail_after(30):
        while True:
            job = await tenant.job(posted["jobId"])
            if "retried" in transitions(job):
                break
            await anyio.sleep(0.05)
    (retried,) = [e for e in job["events"] if e["transition"] == "retried"]  # type: ignore[union-attr]
    assert f"transient: http_status {status}" in retried["detail"]
    assert retried["detail"].endswith("(retry_after_s=1)")
    site.page(path, "<p>back</p>")
    done = await wait_job(tenant.client, posted["jobId"], "completed", "dead", within_s=30)
    assert done["state"] == "completed"
    leased = [e["at"] for e in done["events"] if e["transition"] == "leased"]  # type: ignore[union-attr]
    assert leased[1] - retried["at"] >= 1_000_000  # not before Retry-After (backoff: 10 ms)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_connection_refused_and_timeout_are_transient(tenant: Tenant, site: Site) -> None:
    slow = site.page("/slow.html", "<p>late</p>", delay_s=3)
    refused = await _post(tenant, f"http://127.0.0.1:{_closed_port()}/x.html")
    late = await _post(tenant, slow, timeout_s=0.5, crawl={"delay_s": 0})
    for posted, what in ((refused, "ERR_CONNECTION_REFUSED"), (late, "imeout")):
        job = await wait_job(tenant.client, posted["jobId"], "dead", "completed", within_s=60)
        assert job["state"] == "dead" and job["attempts"] == 3  # retried to max_attempts
        assert str(job["failureReason"]).startswith("transient:")
        assert what in str(job["failureReason"])


async def test_over_max_bytes_is_a_resource_limit(tenant: Tenant, site: Site) -> None:
    url = site.page("/big.html", "<p>" + "word " * 2000 + "</p>")
    posted = await _post(tenant, url, max_bytes=1000, crawl={"delay_s": 0})
    job = await wait_job(tenant.client, posted["jobId"], "dead", "completed", within_s=60)
    assert job["state"] == "dead"
    assert str(job["failureReason"]).startswith("resource_limit:")
    assert "options.max_bytes" in str(job["failureReason"])


async def test_bad_option_and_disallowed_host(tenant: Tenant) -> None:
    # An unknown option is refused at request time (workers_common.format_options).
    bad = await tenant.client.post(
        "/v1/ingest",
        json={"format": "web", "name": "http://127.0.0.1:9/x", "options": {"depth": 3}},
    )
    assert bad.status_code == 400 and "options.depth: unknown option" in bad.text, bad.text
    # Never fetched: the test server's browser may reach 127.0.0.1 only.
    off = await _post(tenant, "http://192.0.2.1/never.html")
    job = await wait_job(tenant.client, off["jobId"], "dead", "completed", within_s=30)
    assert str(job["failureReason"]).startswith("unsupported_feature: host_not_allowed")


async def test_crawl_child_is_deduplicated_against_an_active_job(
    tenant: Tenant, site: Site
) -> None:
    with serve_site() as other:  # another origin: its fetch does not wait for site's gate
        target = other.page("/slow-target.html", "<p>target</p>", delay_s=2)
        held = await _post(tenant, target)
        await wait_job(tenant.client, held["jobId"], "leased", within_s=30)
        root = site.page("/links-to-slow.html", f"<p><a href='{target}'>slow</a></p>")
        crawl = {"max_depth": 1, "same_origin": False, "delay_s": 0}
        job = await _crawl_page(tenant, root, crawl=crawl)
        # Asked for, deduplicated by core against the active job: none really enqueued.
        assert job["stats"]["children"] == 0
        assert any(e["transition"] == "completed" for e in job["events"])
        done = await wait_job(tenant.client, held["jobId"], "completed", "dead", within_s=30)
        assert done["state"] == "completed"
        await anyio.sleep(1)
        assert other.hit_count("/slow-target.html") == 1


@pytest.fixture(scope="module")
def bare_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("web-remote")
    with InProcessServer(write_config(folder, workers={"in_process": []})) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def test_remote_web_worker_process(bare_srv: InProcessServer, site: Site) -> None:
    """``python -m workers_common.run web_worker``: its lifespan (the browser) runs there."""
    tenant_key = bare_srv.create_key("remote-web", "org")
    scope_worker = bare_srv.spawn_worker("web_worker", None, TELHA_WEB__ALLOWED_HOSTS="127.0.0.1")
    try:
        import httpx

        async with httpx.AsyncClient(
            base_url=bare_srv.base_url, headers={"x-api-key": tenant_key}, timeout=30
        ) as client:
            url = site.page("/remote.html", "<h1>Remote</h1><p>fetched elsewhere</p>")
            resp = await client.post(
                "/v1/ingest", json={"format": "web", "name": url, "options": NO_DELAY}
            )
            job_id = resp.json()["jobId"]
            job = await wait_job(client, job_id, within_s=60)
            assert job["state"] == "completed", job
    finally:
        scope_worker.terminate()
        assert scope_worker.wait(30) == 0
