"""Benchmark: the cost of :class:`telha.rest.metrics_middleware.MetricsMiddleware` per request.

The same starlette app (a templated route answering a small JSON body), called over raw ASGI
in-process, with and without the middleware, interleaved in rounds (alternating which goes
first) so machine load hits both alike; each app's fastest round counts. Prints µs per
request for each and the difference (the middleware's own cost).

Run: ``.venv/bin/python bench/metrics_middleware.py [--requests N] [--rounds N]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds a queue.py: drop it (sys.path[0]) so ``import queue`` finds the stdlib.
sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import time
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from telha.metrics import Metrics
from telha.rest.metrics_middleware import MetricsMiddleware


async def job(request: Request) -> Response:
    return JSONResponse({"jobId": request.path_params["job_id"], "state": "completed"})


def build(metered: bool) -> Starlette:
    routes = [Route("/v1/ingest/{job_id}", job, methods=["GET"])]
    middleware = [Middleware(MetricsMiddleware, metrics=Metrics(), routes=routes)]
    return Starlette(routes=routes, middleware=middleware if metered else [])


async def run(app: Starlette, n: int) -> float:
    """Seconds for ``n`` GETs through ``app``."""
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": "", "raw_path": b"", "query_string": b"", "headers": [],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 7625), "root_path": "",
    }  # fmt: skip
    start = time.perf_counter()
    for i in range(n):
        path = f"/v1/ingest/job-{i}"
        await app({**scope, "path": path, "raw_path": path.encode()}, receive, send)
        messages.clear()
    return time.perf_counter() - start


async def main_async(n: int, rounds: int) -> tuple[float, float]:
    plain, metered = build(False), build(True)
    await run(plain, 1000)
    await run(metered, 1000)
    # Alternate which app goes first; keep each app's fastest round (least disturbed by load).
    t_plain, t_metered = [], []
    for i in range(rounds):
        if i % 2:
            t_metered.append(await run(metered, n))
            t_plain.append(await run(plain, n))
        else:
            t_plain.append(await run(plain, n))
            t_metered.append(await run(metered, n))
    return min(t_plain) / n * 1e6, min(t_metered) / n * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/metrics_middleware.py")
    parser.add_argument("--requests", type=int, default=5000, help="requests per round and app")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    plain, metered = anyio.run(main_async, args.requests, args.rounds)
    print(f"metrics middleware: {args.rounds} rounds of {args.requests:,} GETs per app, raw ASGI")
    print("| app                 | µs/request |")
    print("|---------------------|------------|")
    print(f"| without middleware  | {plain:10.1f} |")
    print(f"| with middleware     | {metered:10.1f} |")
    print(f"middleware cost: {metered - plain:.1f} µs/request ({metered / plain - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
