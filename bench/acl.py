"""Benchmark: what principals cost ``GET /v1/search`` and ``GET /v1/sources``
(docs/rest-api.md, "Principals").

One ``telha serve`` on 127.0.0.1 gets ``--spans`` generated span rows (``bench/search.py``'s
Zipf paragraphs, in ``format=json`` batches of 10,000): half the batches by API key (no
ACL), a quarter through a connector token with the ACL ``group:eng``, a quarter with
``group:ops``. Then the same seeded queries, each asked without principals and with
``X-Telha-Principals: group:eng`` (alternated, so both see the same load), ``limit=20``:
client-side p50 and p99, mean hits. Without principals no query changes (the ACL condition
is added only when a request names principals); with them, each candidate row costs one
probe of ``connector_items_by_source``.

Run: ``.venv/bin/python bench/acl.py [--engine sqlite|postgres] [--spans N]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import random
import statistics
import tempfile
import uuid
from typing import Any

import httpx
import msgspec

from bench.search import BATCH, SEED, _config, paragraphs, pct, queries, timed, vocabulary
from telha.config import load_config
from telha.domain.model import Scope
from telha.tokens import load_token_key, mint_connector_token
from tests.support.pg import create_database, drop_databases
from tests.support.server import ServerProcess
from tests.support.wait import wait_search_indexed

HEADER = "x-telha-principals"


def _acl(batch: int) -> list[str] | None:
    """Batches 0, 2, 4…: no ACL; 1, 5, 9…: ``group:eng``; 3, 7, 11…: ``group:ops``."""
    if batch % 2 == 0:
        return None
    return ["group:eng"] if batch % 4 == 1 else ["group:ops"]


def ingest(api: httpx.Client, conn: httpx.Client, texts: list[str]) -> None:
    for i, b in enumerate(range(0, len(texts), BATCH)):
        records = [{"text": t} for t in texts[b : b + BATCH]]
        body: dict[str, Any] = {
            "format": "json", "name": f"gen-{b}.json",
            "content": msgspec.json.encode(records).decode(),
        }  # fmt: skip
        acl = _acl(i)
        client = api if acl is None else conn
        if acl is not None:
            body |= {"externalId": f"gen-{b}", "acl": acl}
        resp = client.post("/v1/ingest", json=body)
        if resp.status_code != 201:
            raise RuntimeError(f"batch {b}: {resp.status_code} {resp.text[:300]}")


def run(engine: str, spans: int, tmp: Path) -> dict[str, Any]:
    rng = random.Random(SEED)
    words = vocabulary(rng)
    texts = paragraphs(rng, words, spans)
    qs = queries(rng, words)
    storage: dict[str, Any] = {}
    if engine == "postgres":
        storage = {"dsn": create_database(), "pool_size": 8}
    out: dict[str, Any] = {"engine": engine, "spans": spans}
    server = ServerProcess(_config(tmp, engine, storage, 50_000)).start()
    try:
        scope = Scope("bench", "acl")
        key = server.create_key(scope.tenant_id, scope.organization_id)
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=600) as c:
            made = c.post("/v1/connectors", json={"kind": "folder", "settings": {"root": str(tmp)}})
            cid = made.json()["connectorId"]
            cfg, _ = load_config(server.config, environ={})
            token = mint_connector_token(
                load_token_key(cfg.grpc.token_key, server.db.parent), scope,
                uuid.UUID(cid).bytes, 3600,
            )  # fmt: skip
            with httpx.Client(
                base_url=server.base_url, headers={"x-connector-token": token}, timeout=600
            ) as conn:
                ingest(c, conn, texts)
            wait_search_indexed(c)
            for q in qs[:20]:  # warm
                c.get("/v1/search", params={"q": q, "limit": 20})
            times: dict[str, list[float]] = {"none": [], "eng": []}
            hits: dict[str, list[int]] = {"none": [], "eng": []}

            def search(q: str, who: str) -> None:
                headers = {HEADER: "group:eng"} if who == "eng" else {}
                resp = c.get("/v1/search", params={"q": q, "limit": 20}, headers=headers)
                if resp.status_code != 200:
                    raise RuntimeError(f"search {q!r}: {resp.status_code} {resp.text[:300]}")
                hits[who].append(len(resp.json()["hits"]))

            for q in qs:
                for who in ("none", "eng"):
                    times[who].append(timed(search, q, who))
            out["search"], out["hits"] = times, hits
            listing: dict[str, list[float]] = {"none": [], "eng": []}
            for _ in range(50):
                for who in ("none", "eng"):
                    headers = {HEADER: "group:eng"} if who == "eng" else {}
                    listing[who].append(timed(lambda h=headers: c.get("/v1/sources", headers=h)))
            out["listing"] = listing
    finally:
        server.stop()
        if storage:
            drop_databases()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--spans", type=int, default=80_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="telha-bench-acl-") as tmp:
        try:
            r = run(args.engine, args.spans, Path(tmp))
        except (RuntimeError, httpx.HTTPError) as exc:
            print(f"acl: request failed: {exc}", file=sys.stderr)
            return 1
    print(f"acl ({r['engine']}): {r['spans']:,} spans; half no ACL, a quarter group:eng")
    print(f"| {'what':<44} |  p50 ms |  p99 ms | hits |")
    print(f"|{'-' * 46}|---------|---------|------|")
    for who, what in (("none", "no principals"), ("eng", "X-Telha-Principals: group:eng")):
        t = r["search"][who]
        mean = statistics.mean(r["hits"][who])
        print(f"| search, {what:<36} | {pct(t, 0.5):7.1f} | {pct(t, 0.99):7.1f} | {mean:4.1f} |")
    for who, what in (("none", "no principals"), ("eng", "principals group:eng")):
        t = r["listing"][who]
        print(f"| GET /v1/sources, {what:<27} | {pct(t, 0.5):7.1f} | {pct(t, 0.99):7.1f} |      |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
