"""web_worker's pure parts: URLs, crawl scope and budgets, options, HTTP status mapping,
robots.txt rules, media-type routing; and the Retry-After path through the failure
taxonomy and the queue's retry policy."""

from __future__ import annotations

import itertools
import random

import pytest

from telha.domain.policy import decide_failure, parse_reason, retry_after_us
from web_worker.crawl import candidates, child_options
from web_worker.links import absolute_url, origin_of
from web_worker.options import CRAWL_DELAY_S, CrawlOptions, parse_options
from web_worker.project import route_format
from web_worker.robots import parse_robots
from web_worker.status import network_failure, retry_after_s, status_failure
from workers_common import (
    CorruptInput,
    TransientFailure,
    UnsupportedFeature,
    classify,
)

BASE = "http://127.0.0.1:8000/docs/index.html"


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("page.html#part", "http://127.0.0.1:8000/docs/page.html"),
        ("/top?q=1#x", "http://127.0.0.1:8000/top?q=1"),
        ("../up.html", "http://127.0.0.1:8000/up.html"),
        ("HTTP://LocalHost:80/A", "http://localhost/A"),
        ("https://127.0.0.1:443", "https://127.0.0.1/"),
        ("//127.0.0.1:9/x", "http://127.0.0.1:9/x"),
        ("#only-a-fragment", "http://127.0.0.1:8000/docs/index.html"),
        ("mailto:a@127.0.0.1", None),
        ("javascript:void(0)", None),
        ("   ", None),
        ("http://[::1]:8080/v6", "http://[::1]:8080/v6"),
    ],
)
def test_absolute_url(href: str, expected: str | None) -> None:
    assert absolute_url(BASE, href) == expected


def test_origin_of() -> None:
    assert origin_of("http://127.0.0.1:8000/a/b?c") == "http://127.0.0.1:8000"
    assert origin_of("https://127.0.0.1:443/") == "https://127.0.0.1"


def _crawl(**kw: object) -> CrawlOptions:
    return CrawlOptions(**{"max_depth": 1, **kw})  # type: ignore[arg-type]


def test_candidates_scope() -> None:
    o = "http://127.0.0.1:8000"
    links = [f"{o}/a", f"{o}/b", f"{o}/a", "http://127.0.0.2:8000/x", f"{o}/skip/me", f"{o}/self"]
    crawl = _crawl(exclude=("*/skip/*",))
    assert candidates(links, crawl, page_urls=(f"{o}/self",), origin=o) == [f"{o}/a", f"{o}/b"]
    wide = _crawl(same_origin=False, include=("http://127.0.0.2:8000/*",))
    assert candidates(links, wide, page_urls=(), origin=o) == ["http://127.0.0.2:8000/x"]
    assert candidates(links, _crawl(max_depth=0), page_urls=(), origin=o) == []
    assert candidates(links, _crawl(depth=1), page_urls=(), origin=o) == []
    assert candidates(links, _crawl(max_pages=1), page_urls=(), origin=o) == []


def test_child_budgets_never_exceed_max_pages() -> None:
    urls = [f"http://127.0.0.1:8000/{i}" for i in range(4)]
    crawl = _crawl(max_depth=3, max_pages=12, delay_s=0.5)
    children = child_options(urls, crawl, {"timeout_s": 5}, origin="http://127.0.0.1:8000")
    budgets = [opts["crawl"]["max_pages"] for _url, opts in children]
    assert budgets == [3, 3, 3, 2]  # 11 pages left: 4 children, 7 spare, earlier ones first
    assert sum(budgets) == crawl.max_pages - 1
    for _url, opts in children:
        assert opts["timeout_s"] == 5
        assert opts["crawl"]["depth"] == 1
        assert opts["crawl"]["origin"] == "http://127.0.0.1:8000"
        assert opts["crawl"]["delay_s"] == 0.5
    few = child_options(urls, _crawl(max_pages=3), {}, origin="http://127.0.0.1:8000")
    assert [u for u, _ in few] == urls[:2]
    assert [o["crawl"]["max_pages"] for _, o in few] == [1, 1]


def test_options() -> None:
    assert parse_options({}).crawl.delay_s == 0.0
    crawl = parse_options({"crawl": {"max_depth": 2}}).crawl
    assert (crawl.max_depth, crawl.max_pages, crawl.same_origin, crawl.delay_s) == (
        2, 50, True, CRAWL_DELAY_S,
    )  # fmt: skip
    assert parse_options({"crawl": {"include": "http://127.0.0.1/*"}}).crawl.include == (
        "http://127.0.0.1/*",
    )
    for bad in (
        {"nope": 1},
        {"timeout_s": "5"},
        {"timeout_s": 0},
        {"max_bytes": True},
        {"wait_until": "never"},
        {"wait_for": ""},
        {"crawl": []},
        {"crawl": {"max_depth": -1}},
        {"crawl": {"deep": 1}},
        {"crawl": {"exclude": [1]}},
    ):
        with pytest.raises(UnsupportedFeature, match="option"):
            parse_options(bad)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (200, None),
        (204, None),
        (404, "corrupt_input"),
        (410, "corrupt_input"),
        (400, "corrupt_input"),
        (401, "unsupported_feature"),
        (403, "unsupported_feature"),
        (429, "transient"),
        (500, "transient"),
        (503, "transient"),
    ],
)
def test_status_failure(status: int, kind: str | None) -> None:
    failure = status_failure(status, "http://127.0.0.1:8000/p")
    assert (failure.kind if failure else None) == kind
    if failure is not None:
        assert f"http_status {status}" in str(failure)
    if status in (401, 403):
        assert str(failure).startswith("auth_required:")


def test_retry_after_header() -> None:
    assert retry_after_s("120") == 120.0
    assert retry_after_s(None) is None
    assert retry_after_s("soon") is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", now_s=1445412470.0) == 10.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", now_s=1445412490.0) == 0.0


def test_retry_after_rides_the_failure_reason_into_the_backoff() -> None:
    failure = status_failure(503, "http://127.0.0.1:8000/p", "30")
    assert isinstance(failure, TransientFailure)
    reason, permanent, _kind = classify(failure)
    assert reason.endswith("(retry_after_s=30)") and not permanent
    kind, detail = parse_reason(reason, permanent=permanent)
    least = retry_after_us(detail)
    assert least == 30_000_000
    decision = decide_failure(
        kind, attempts_before=0, max_attempts=5, now_us=0, base_ms=10, max_s=300,
        rng=random.Random(1), min_delay_us=least,
    )  # fmt: skip
    assert decision.state == "pending" and decision.available_at == 30_000_000
    capped = decide_failure(
        kind, attempts_before=0, max_attempts=5, now_us=0, base_ms=10, max_s=5,
        rng=random.Random(1), min_delay_us=least,
    )  # fmt: skip
    assert capped.available_at == 5_000_000  # never past jobs.backoff_max_s
    # A long detail keeps the mark whole; a permanent failure never carries one.
    long = TransientFailure("x" * 600, retry_after_s=2.5)
    reason, _, _ = classify(long)
    assert len(reason.encode()) <= 512 and reason.endswith("(retry_after_s=3)")
    assert "retry_after" not in classify(CorruptInput("gone", retry_after_s=9))[0]
    assert retry_after_us("no mark here") == 0


def test_network_failures() -> None:
    refused = network_failure("net::ERR_CONNECTION_REFUSED at http://127.0.0.1/\nCall log:", "u")
    assert refused.kind == "transient" and "ERR_CONNECTION_REFUSED" in str(refused)
    assert network_failure("net::ERR_BLOCKED_BY_CLIENT", "u").kind == "unsupported_feature"
    for message in ("net::ERR_NAME_NOT_RESOLVED", "net::ERR_CONNECTION_RESET", "Timeout 30000ms"):
        failure = network_failure(
            f"Page.goto: {message} at http://127.0.0.1:8000/", "http://127.0.0.1:8000/"
        )
        assert failure.kind == "transient" and message in str(failure)


def test_robots_rules() -> None:
    robots = parse_robots(
        "User-agent: *\nDisallow: /private/\n\nUser-agent: Telha\nCrawl-delay: 2\n"
    )
    assert robots.allows("http://127.0.0.1:8000/private/x")  # our own group has no Disallow
    assert robots.crawl_delay_s() == 2.0
    strict = parse_robots("User-agent: *\nDisallow: /private/\n")
    assert not strict.allows("http://127.0.0.1:8000/private/x")
    assert strict.allows("http://127.0.0.1:8000/public")
    assert strict.crawl_delay_s() == 0.0


@pytest.mark.parametrize(
    ("media", "url", "fmt"),
    [
        ("application/pdf", "http://127.0.0.1:8000/x", "pdf"),
        ("text/csv", "http://127.0.0.1:8000/x", "csv"),
        ("text/plain", "http://127.0.0.1:8000/x", "text"),
        ("application/octet-stream", "http://127.0.0.1:8000/r.XLSX", "xlsx"),
        ("", "http://127.0.0.1:8000/a.docx", "docx"),
    ],
)
def test_route_format(media: str, url: str, fmt: str) -> None:
    assert route_format(media, url) == fmt


def test_route_format_unknown() -> None:
    with pytest.raises(UnsupportedFeature, match="content_type: image/png"):
        route_format("image/png", "http://127.0.0.1:8000/a.png")


@pytest.mark.anyio
async def test_missing_chromium_fails_clearly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import web_worker
    from web_worker.browser import BrowserUnavailable
    from workers_common import Job

    monkeypatch.setenv("TELHA_WEB__CHROMIUM_PATH", "/nonexistent/chromium")
    monkeypatch.setenv("TELHA_WEB__ALLOWED_HOSTS", "127.0.0.1")
    job = Job("j", "ingest:web", "web", "http://127.0.0.1:9/x", b"", None, {}, 0, "t", "o")
    with caplog.at_level("ERROR", logger="web_worker"):
        async with web_worker.lifespan():
            with pytest.raises(BrowserUnavailable, match="Chromium not found at /nonexistent"):
                await web_worker.handle(job)
    assert "Chromium not found" in caplog.text  # said once at start, before any job
    assert classify(BrowserUnavailable("x"))[2] == "transient"


@pytest.mark.anyio
async def test_origin_gate_serializes_one_origin_with_the_delay() -> None:
    import time

    import anyio

    from web_worker.gate import OriginGate

    gate = OriginGate()
    spans: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}

    async def fetch(origin: str, delay: float) -> None:
        async with gate.turn(origin, delay):
            start = time.monotonic()
            await anyio.sleep(0.05)
            spans[origin].append((start, time.monotonic()))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(fetch, "a", 0.1)
        tg.start_soon(fetch, "b", 0.0)
    a = sorted(spans["a"])
    for (_s1, e1), (s2, _e2) in itertools.pairwise(a):
        assert s2 - e1 >= 0.09  # one at a time, the delay between
    assert spans["b"][0][0] < a[1][0]  # another origin is not held up


@pytest.mark.anyio
async def test_module_lifespan_is_optional() -> None:
    import types

    import web_worker
    from workers_common.handlers import module_lifespan

    async with module_lifespan(types.ModuleType("plain_worker")):
        pass  # a module without lifespan(): nothing to enter
    async with module_lifespan(web_worker):
        assert web_worker._process().host._browser is None  # no job: no browser started
    with pytest.raises(RuntimeError):
        web_worker._process()  # left: the process's state is gone
