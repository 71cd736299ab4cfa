"""web_worker's destination rules inside ``telha serve`` (docs/formats.md, "Web pages:
destinations"): two loopback servers, the allowed test site on one ``host:port`` (the only
``[web] allowed_hosts`` entry) and an "internal" service on another port, which no route may
reach — the URL itself in every spelling, a redirect from the allowed site, a script of an
allowed page fetching it (or opening a WebSocket to it) and writing the answer into the DOM,
an ``<iframe>``, robots.txt redirected there; plus a recrawl of an unchanged index that
re-enqueues its links."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tests.support.inproc import InProcessServer
from tests.support.queue_env import Tenant
from tests.support.server import write_config
from tests.support.site import Site, serve_site
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

SECRET = "INTERNAL-SECRET admin panel"
NO_DELAY = {"crawl": {"delay_s": 0}}


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve_site() as s:
        yield s


@pytest.fixture(scope="module")
def internal() -> Iterator[Site]:
    with serve_site() as s:
        s.page("/admin", f"<h1>{SECRET}</h1>")
        s.page("/robots.txt", "User-agent: *\nDisallow: /\n", content_type="text/plain")
        yield s


@pytest.fixture(scope="module")
def robots_site() -> Iterator[Site]:
    """A second allowed site, whose robots.txt redirects to the internal service (its
    answer is cached per origin: kept apart from ``site``'s)."""
    with serve_site() as s:
        yield s


@pytest.fixture(scope="module")
def queue_srv(
    tmp_path_factory: pytest.TempPathFactory, site: Site, robots_site: Site
) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("web-destinations")
    listed = [s.base.removeprefix("http://") for s in (site, robots_site)]
    config = write_config(
        folder,
        workers={"in_process": ["web_worker"], "concurrency": 2},
        jobs={"max_attempts": 2, "backoff_base_ms": 10, "backoff_max_s": 1},
        web={"allowed_hosts": listed},
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _run(tenant: Tenant, url: str, **options: Any) -> dict[str, Any]:
    resp = await tenant.client.post(
        "/v1/ingest", json={"format": "web", "name": url, "options": options or NO_DELAY}
    )
    assert resp.status_code == 202, resp.text
    job = await wait_job(tenant.client, resp.json()["jobId"], "completed", "dead", within_s=60)
    return dict(job)


async def _text(tenant: Tenant, source_id: str) -> str:
    source = (await tenant.client.get(f"/v1/sources/{source_id}")).json()
    tx = source["versions"][0]["sourceVersionTx"]
    return str((await tenant.client.get(f"/v1/sources/{source_id}/versions/{tx}/text")).text)


def _refused(job: dict[str, Any], address: str) -> None:
    assert job["state"] == "dead", job
    assert job["attempts"] == 1  # permanent: never retried
    reason = str(job["failureReason"])
    assert reason.startswith("unsupported_feature: host_not_allowed"), reason
    assert address in reason, reason


@pytest.mark.parametrize(
    "spelling",
    [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "[::ffff:127.0.0.1]",
        "127.0.0.1.",
        "localhost",
    ],
)
async def test_internal_unreachable_directly_in_every_spelling(
    tenant: Tenant, internal: Site, spelling: str
) -> None:
    port = internal.base.rsplit(":", 1)[1]
    job = await _run(tenant, f"http://{spelling}:{port}/admin")
    _refused(job, f":{port}")
    assert "127.0.0.1" in str(job["failureReason"]) or "::ffff:7f00:1" in str(job["failureReason"])
    assert internal.hit_count("/admin") == 0


async def test_internal_unreachable_through_a_redirect(
    tenant: Tenant, site: Site, internal: Site
) -> None:
    port = internal.base.rsplit(":", 1)[1]
    for name, to in (("/go-internal", internal.url("/admin")), ("/go-v6", f"http://[::1]:{port}/")):
        job = await _run(tenant, site.redirect(name, to))
        _refused(job, f":{port}")
    assert internal.hit_count("/admin") == 0


async def test_scripts_iframes_and_websockets_of_an_allowed_page_are_blocked(
    tenant: Tenant, site: Site, internal: Site
) -> None:
    target = internal.url("/admin")
    ws = internal.base.replace("http://", "ws://")
    url = site.page(
        "/exfiltrate.html",
        "<h1>Allowed page</h1><p id='out'>start</p>"
        f"<iframe src='{target}'></iframe><img src='{internal.url('/pixel.png')}'>"
        "<script>"
        "const out = document.getElementById('out');"
        f"fetch('{target}').then(r => r.text()).then(t => out.textContent = 'GOT ' + t)"
        ".catch(e => out.textContent = 'fetch failed');"
        f"const x = new XMLHttpRequest(); x.open('GET', '{target}');"
        "x.onload = () => out.insertAdjacentText('afterend', 'XHR ' + x.responseText);"
        "x.send();"
        f"const s = new WebSocket('{ws}/socket');"
        "s.onopen = () => out.insertAdjacentText('afterend', 'WS OPEN');"
        "</script>",
    )
    job = await _run(tenant, url, wait_until="networkidle", crawl={"delay_s": 0})
    assert job["state"] == "completed", job
    text = await _text(tenant, str(job["sourceId"]))
    assert "Allowed page" in text
    assert "INTERNAL-SECRET" not in text and "WS OPEN" not in text
    # iframe, image, fetch, XHR, WebSocket: each refused at the proxy and counted.
    assert job["stats"]["blocked_requests"] >= 5, job["stats"]
    assert internal.hits == []


async def test_robots_txt_redirected_to_internal_is_not_fetched(
    tenant: Tenant, robots_site: Site, internal: Site
) -> None:
    # A host name passes the early check (it could resolve to a listed address): the
    # proxy refuses the address it resolves to.
    port = internal.base.rsplit(":", 1)[1]
    robots_site.redirect("/robots.txt", f"http://localhost:{port}/robots.txt")
    robots_site.page("/r/one.html", "<p>one</p>")
    root = robots_site.page("/r/index.html", "<p><a href='/r/one.html'>one</a></p>")
    job = await _run(tenant, root, crawl={"max_depth": 1, "delay_s": 0})
    assert job["state"] == "completed", job
    # robots.txt unreadable (its redirect refused): nothing followed, nothing internal hit.
    assert job["stats"].get("children", 0) == 0
    assert robots_site.hit_count("/robots.txt") == 1
    assert internal.hits == []


async def test_another_port_and_the_cloud_metadata_address(tenant: Tenant, site: Site) -> None:
    port = int(site.base.rsplit(":", 1)[1])
    job = await _run(tenant, f"http://127.0.0.1:{port + 1 if port < 65535 else port - 1}/x")
    _refused(job, "not on [web] allowed_hosts")
    job = await _run(tenant, "http://169.254.169.254/latest/meta-data/")
    _refused(job, "169.254.169.254:80")


async def test_recrawl_of_an_unchanged_index_refetches_its_links(
    tenant: Tenant, site: Site
) -> None:
    site.page("/news/a.html", "<p>A first.</p>")
    site.page("/news/b.html", "<p>B first.</p>")
    root = site.page("/news/index.html", "<p><a href='a.html'>a</a> <a href='b.html'>b</a></p>")
    crawl = {"crawl": {"max_depth": 1, "delay_s": 0}}
    first = await _run(tenant, root, **crawl)
    assert first["stats"]["children"] == 2
    await _wait_hits(site, "/news/b.html", 1)
    site.page("/news/b.html", "<p>B changed.</p>")
    again = await _run(tenant, root, **crawl)
    assert again["events"][-1]["detail"] == "deduplicated"  # the index did not change
    assert again["stats"]["children"] == 2  # both links enqueued again
    listing = await tenant.client.get("/v1/ingest", params={"parent": again["jobId"]})
    kids = {j["jobId"]: j for j in listing.json()["jobs"]}
    assert len(kids) == 2
    outcome: dict[str, tuple[int, str, str]] = {}
    for job_id in kids:
        kid = await wait_job(tenant.client, job_id, "completed", "dead", within_s=60)
        assert kid["state"] == "completed", kid
        versions = (await tenant.client.get(f"/v1/sources/{kid['sourceId']}")).json()["versions"]
        detail = str(kid["events"][-1]["detail"])
        outcome[str(kid["sourceId"])] = (
            len(versions),
            detail,
            await _text(tenant, kid["sourceId"]),
        )
    ((a_versions, a_detail, _),) = [v for v in outcome.values() if "A first." in v[2]]
    ((b_versions, _, b_text),) = [v for v in outcome.values() if "B " in v[2]]
    assert (a_versions, a_detail) == (1, "deduplicated")  # unchanged: nothing written
    assert b_versions == 2 and "B changed." in b_text  # changed: a new version
    assert site.hit_count("/news/a.html") == 2 and site.hit_count("/news/b.html") == 2


async def _wait_hits(site: Site, path: str, n: int) -> None:
    with anyio.fail_after(60):
        while site.hit_count(path) < n:  # noqa: ASYNC110 (the site answers from a thread)
            await anyio.sleep(0.05)
