"""Benchmark: a 200-page local site crawled by Telha's web_worker vs plain Playwright.

Site: 200 pages served on 127.0.0.1 by this process (a heading, three paragraphs, a table, a
link to every page from the index), nothing else reachable. Crawl: one ``format=web`` POST of
the index with ``crawl.max_depth = 1``, ``max_pages = 200``, ``delay_s = 0`` to a real
``telha serve`` subprocess with ``web_worker`` in-process and 2 consumers; timed from the POST
to the crawl's last job ``completed`` (every page fetched, projected, stored; counted from
``/metrics``). The service is warmed first (browser and docling child started by a crawl of
another site copy), so start-up is not counted.

Floor, in the same run (in a process of its own, uvloop, like the service; run before and
after the crawl, the mean counted): plain Playwright on the same Chromium fetching the same
200 URLs one at a time (the worker's per-origin concurrency is 1) with a fresh context per
page, ``goto(wait_until="load")`` and ``page.content()`` — the browser work alone, no
projection, no storage. Target: crawl time /
floor time ≤ 1.5. For context the table also shows plain Playwright with two fetches at a
time (which a polite crawler does not do to one origin).

``--sandboxed-floor`` launches the floor's Chromium as the web worker must (as
``telha-browser`` through the same launcher, its sandbox on, no capability), so the ratio is
what Telha adds to the browser work it is required to do; the default floor is Playwright's
own launch as root with ``--no-sandbox``, which also measures what the sandbox costs.

``--browser-sys-nice`` runs the service with ``[web] browser_sys_nice = true`` (Chromium may
set its threads' priorities, docs/formats.md, "Web pages: the browser's sandbox"); the floor
is unchanged (Playwright's own launch: as root, ``--no-sandbox``). The load average is printed
before and after, for the record.

Run: ``.venv/bin/python bench/web.py [--pages 200] [--browser-sys-nice]``. Exits 0 whether
the target passes or not; 1 if a job fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)
sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "workers"))

import argparse
import multiprocessing
import os
import shutil
import tempfile
import time

import anyio
import httpx
from playwright.async_api import async_playwright
from prometheus_client.parser import text_string_to_metric_families

from tests.support.server import ServerProcess, write_config
from tests.support.site import Site, serve_site
from web_worker import sandbox
from web_worker.browser import CHROMIUM_ARGS

TARGET_RATIO = 1.5


def build_site(site: Site, prefix: str, pages: int) -> str:
    """``pages`` pages under ``prefix``; returns the index URL (page 0 links to all)."""
    links = "".join(f"<li><a href='{prefix}/p{i}.html'>page {i}</a></li>" for i in range(pages))
    for i in range(pages):
        rows = "".join(f"<tr><td>r{r}</td><td>{i * r}</td></tr>" for r in range(5))
        body = (
            f"<html><head><title>Page {i}</title></head><body><h1>Page {i}</h1>"
            f"<p>First paragraph of page {i}, with a <a href='{prefix}/p{(i + 1) % pages}.html'>"
            f"next</a> link.</p><p>Second paragraph: some ordinary words to read.</p>"
            f"<p>Third paragraph.</p><table><tr><th>k</th><th>v</th></tr>{rows}</table>"
            f"{'<ul>' + links + '</ul>' if i == 0 else ''}</body></html>"
        )
        site.page(f"{prefix}/p{i}.html", body)
    return site.url(f"{prefix}/p0.html")


def _finished(c: httpx.Client) -> tuple[int, int]:
    """Jobs completed and dead so far (every kind), from ``/metrics``'s
    ``telha_job_transitions_total`` (cheap to poll, unlike listings)."""
    done = {"completed": 0.0, "dead": 0.0}
    for family in text_string_to_metric_families(c.get("/metrics").text):
        for sample in family.samples:
            transition = sample.labels.get("transition", "")
            if sample.name == "telha_job_transitions_total" and transition in done:
                done[transition] += sample.value
    return int(done["completed"]), int(done["dead"])


def crawl(c: httpx.Client, index: str, pages: int) -> float:
    """Seconds from the POST of ``index`` to every page of the crawl completed."""
    before, dead_before = _finished(c)
    started = time.perf_counter()
    opts = {"crawl": {"max_depth": 1, "max_pages": pages, "delay_s": 0}}
    resp = c.post("/v1/ingest", json={"format": "web", "name": index, "options": opts})
    resp.raise_for_status()
    while True:
        done, dead = _finished(c)
        if dead > dead_before:
            raise RuntimeError(f"{dead - dead_before} job(s) of the crawl of {index} died")
        if done - before >= pages:
            return time.perf_counter() - started
        time.sleep(0.05)


def run_service(site: Site, tmp: Path, pages: int, *, sys_nice: bool = False) -> float:
    config = write_config(
        tmp,
        workers={"in_process": ["web_worker"], "concurrency": 2},
        web={"allowed_hosts": ["127.0.0.1"], "browser_sys_nice": sys_nice},
    )
    server = ServerProcess(config).start()
    try:
        key = server.create_key("bench", "org")
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=60) as c:
            crawl(c, build_site(site, "/warm", 4), 4)  # browser and docling child started
            return crawl(c, build_site(site, "/site", pages), pages)
    finally:
        server.stop()


async def run_floor(urls: list[str], fetchers: int, sandboxed: bool = False) -> float:
    """Seconds for plain Playwright to fetch ``urls`` with ``fetchers`` concurrent loops;
    ``sandboxed``: Chromium launched as Telha's web worker launches it (as ``telha-browser``
    through its launcher, its own sandbox on, no capability), else as root with
    ``--no-sandbox`` (Playwright's launch as root)."""
    launcher: Path | None = None
    if sandboxed:
        account = sandbox.browser_account()
        if account is None:
            raise RuntimeError("no sandboxed launch here (not root, or no telha-browser user)")
        launcher = sandbox.write_launcher(Path("/usr/bin/chromium"), account)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=str(launcher or "/usr/bin/chromium"),
            headless=True,
            chromium_sandbox=sandboxed,
            args=list(CHROMIUM_ARGS),
        )
        todo = list(reversed(urls))

        async def loop() -> None:
            while todo:
                url = todo.pop()
                ctx = await browser.new_context(service_workers="block")
                page = await ctx.new_page()
                await page.goto(url, wait_until="load")
                await page.content()
                await ctx.close()

        try:
            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for _ in range(fetchers):
                    tg.start_soon(loop)
            return time.perf_counter() - started
        finally:
            await browser.close()
            if launcher is not None:
                shutil.rmtree(launcher.parent, ignore_errors=True)


def floor_in_process(urls: list[str], fetchers: int, sandboxed: bool = False) -> float:
    """:func:`run_floor` on a fresh event loop (uvloop), for a pool process."""
    return float(
        anyio.run(run_floor, urls, fetchers, sandboxed, backend_options={"use_uvloop": True})
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--browser-sys-nice", action="store_true")
    parser.add_argument(
        "--sandboxed-floor",
        action="store_true",
        help="launch the floor's Chromium as the web worker does (telha-browser, sandbox on)",
    )
    args = parser.parse_args()
    sandboxed = args.sandboxed_floor
    load_before = os.getloadavg()
    with serve_site() as site, tempfile.TemporaryDirectory(prefix="telha-bench-") as tmp:
        urls = [site.url(f"/site/p{i}.html") for i in range(args.pages)]
        build_site(site, "/site", args.pages)
        # The floor runs before and after the crawl (the mean is used), so a machine whose load
        # drifts during the run does not favour either side.
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            floor_before = pool.apply(floor_in_process, (urls, 1, sandboxed))
        try:
            service_s = run_service(site, Path(tmp), args.pages, sys_nice=args.browser_sys_nice)
        except RuntimeError as exc:
            print(f"web: job failed: {exc}", file=sys.stderr)
            return 1
        # In a process of its own (with uvloop, like telha serve), so that it does not share
        # a GIL with this process's site server threads; telha serve is a process of its own.
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            floor_after = pool.apply(floor_in_process, (urls, 1, sandboxed))
            floor2_s = pool.apply(floor_in_process, (urls, 2, sandboxed))
    floor_s = (floor_before + floor_after) / 2
    n = args.pages
    ratio = service_s / floor_s
    loads = " / ".join(f"{a:.1f}" for a in (*load_before[:1], *os.getloadavg()[:1]))
    nice = ", browser_sys_nice" if args.browser_sys_nice else ""
    nice += "; floor launched sandboxed as telha-browser" if sandboxed else ""
    print(f"web: {n}-page local site, crawl depth 1, 2 in-process web_worker consumers{nice}"
          f" (load average before / after: {loads})")  # fmt: skip
    print("| path | s | pages/s |")
    print("|---|---|---|")
    print(f"| telha crawl (fetch + project + store) | {service_s:.2f} | {n / service_s:.1f} |")
    print(f"| plain Playwright, 1 fetch at a time (floor: mean of {floor_before:.1f} s before"
          f" and {floor_after:.1f} s after) | {floor_s:.2f} | {n / floor_s:.1f} |")  # fmt: skip
    print(f"| plain Playwright, 2 fetches at a time | {floor2_s:.2f} | {n / floor2_s:.1f} |")
    verdict = "ok" if ratio <= TARGET_RATIO else "over target"
    print(f"ratio telha / floor: {ratio:.2f} (target ≤ {TARGET_RATIO}: {verdict});"
          f" against 2 at a time: {service_s / floor2_s:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
