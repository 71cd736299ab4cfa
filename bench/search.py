"""Benchmark: ``GET /v1/search`` and ``POST /v1/locate`` over a generated corpus, vs. a floor.

A real ``telha serve`` subprocess on 127.0.0.1 is given ``--spans`` span rows through the
normal ingest path: ``format=json`` batches of generated paragraphs (one record, one span
row; words drawn from a Zipf-distributed vocabulary of pseudo-words) plus the real corpus
files the search tests use. Then, client-side wall times:

- search: a seeded mix of 1–3 word queries whose terms are frequent, medium or rare
  (vocabulary rank buckets), ``limit=20``; p50 and p99; first with ``[search] rank_window``
  (``--rank-window``, the service's default), then, the server restarted on the same data with
  ``rank_window = 0``, every match ranked;
- floor (SQLite): the bare FTS5 query of the same terms on the same file (``bm25`` ordered,
  the scope's rowid range, ``LIMIT 21``, read-only connection in this process, SQLite's
  default settings), p50 and p99; PostgreSQL: the bare ``tsquery`` with ``ts_rank`` on the
  same database. On SQLite the same query is also timed on a connection set as the store's
  readers are (``mapped floor``: ``PRAGMA mmap_size``, their page cache), for information:
  what is left of the route's cost once the engine's settings are alike;
- the store's own search in this process (:func:`floor_and_store`: the store opened
  read-only, ``store.search.page`` with the rank window), query by query alternating with the
  floor: what the REST route costs less HTTP. Two ratios are printed, REST / floor (the
  target's) and in-process / floor (wall and CPU); the searches are timed with
  ``http.client`` on one kept-alive connection (``--client httpx`` for ``httpx``);
- locate: sentences cut from generated paragraphs (half with their spaces doubled), p50;
  then one-word fragments cut from inside vocabulary words (:func:`fragments`): of rare
  words (rank ≥ 10,000), of frequent ones (rank < 300), and 2-character ones, which have no
  trigram (the substring index cannot narrow them: docs/rest-api.md, "Locate a quote");
- erase: one small source erased on the full index (SQLite's FTS5 ``optimize`` rewrites the
  whole index in the erasure's ``mark`` step), wall time of the request.

Run: ``.venv/bin/python bench/search.py [--engine sqlite|postgres] [--spans N]``. Exits 0
whether the targets pass or not; non-zero only if a request fails. ``--store DIR`` (SQLite)
keeps the built store in ``DIR`` and, run again with the same ``DIR`` and ``--spans``,
reuses it instead of ingesting (the 1,000,000-span store takes minutes to build); ``--quick``
times only the searches with the rank window and the locates (no restart, floor kept).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import base64
import http.client
import os
import random
import sqlite3
import statistics
import tempfile
import time
import urllib.parse
from typing import Any

import anyio
import asyncpg
import httpx
import msgspec

from telha.config import SearchConfig, load_config
from telha.domain.model import Scope
from telha.domain.search_query import fts5_query, parse_query, scope_rowids, tsquery
from telha.storage import open_store
from telha.storage.search.queries import Filters
from telha.storage.sqlite.base import reader_pragmas
from tests.support.pg import create_database, drop_databases
from tests.support.server import ServerProcess, write_config
from tests.support.wait import wait_job_blocking, wait_search_indexed

SEED = 20261201
BATCH = 10_000
VOCABULARY = 30_000
QUERIES = 300
LOCATES = 100
#: One-word fragment locates of each kind (rare, frequent, short).
FRAGMENTS = 20
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
CORPUS_FILES = [
    "pdf/zen_of_python_corrupted.pdf",
    "pdf/multi_page.pdf",
    "csv/countries.csv",
    "eml/japanese_iso_2022.eml",
    "msg/testMSG_chinese.msg",
]
TARGET_P50_MS, TARGET_P99_MS, TARGET_FLOOR_RATIO, TARGET_LOCATE_MS = 25.0, 150.0, 1.5, 25.0
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"] + ["ção", "ñe", "ür", "ét"]


def vocabulary(rng: random.Random) -> list[str]:
    """``VOCABULARY`` distinct pseudo-words, rank order (rank 0 most frequent)."""
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < VOCABULARY:
        w = "".join(rng.choices(_SYLLABLES, k=rng.randint(1, 4)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def paragraphs(rng: random.Random, words: list[str], n: int) -> list[str]:
    """``n`` paragraphs of 15–60 Zipf-drawn words, sentences of 5–15 words."""
    weights = [1.0 / (r + 1) for r in range(len(words))]
    cum = []
    acc = 0.0
    for w in weights:
        acc += w
        cum.append(acc)
    out = []
    for _ in range(n):
        k = rng.randint(15, 60)
        drawn = rng.choices(words, cum_weights=cum, k=k)
        sentences, i = [], 0
        while i < k:
            j = min(k, i + rng.randint(5, 15))
            s = " ".join(drawn[i:j])
            sentences.append(s[0].upper() + s[1:] + ".")
            i = j
        out.append(" ".join(sentences))
    return out


def queries(rng: random.Random, words: list[str]) -> list[str]:
    """1–3 word queries, each term from a frequent (rank < 20), medium (200–2,000) or rare
    (≥ 10,000) bucket."""
    buckets = [words[:20], words[200:2000], words[10_000:]]
    return [
        " ".join(rng.choice(rng.choice(buckets)) for _ in range(rng.randint(1, 3)))
        for _ in range(QUERIES)
    ]


def fragments(words: list[str]) -> dict[str, list[str]]:
    """:data:`FRAGMENTS` one-word quotes of each kind, each cut from inside a vocabulary
    word (neither its first nor its last character): ``rare`` from words of rank ≥ 10,000
    (at least 3 characters), ``frequent`` from words of rank < 300, ``short`` 2 characters
    of rare words. Drawn with their own seed, so the other draws do not move."""
    rng = random.Random(SEED + 1)
    rare = [w for w in words[10_000:] if len(w) >= 6]
    frequent = [w for w in words[:300] if len(w) >= 5]
    return {
        "rare": [w[1:-1] for w in rng.sample(rare, FRAGMENTS)],
        "frequent": [w[1:-1] for w in rng.sample(frequent, FRAGMENTS)],
        "short": [w[1:3] for w in rng.sample(rare, FRAGMENTS)],
    }


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def ingest(c: httpx.Client, total: int, texts: list[str]) -> float:
    """Post ``texts`` as JSON batches and the corpus files; returns the ingest seconds."""
    t0 = time.perf_counter()
    for b in range(0, total, BATCH):
        records = [{"text": t} for t in texts[b : b + BATCH]]
        body = {
            "format": "json",
            "name": f"gen-{b}.json",
            "content": msgspec.json.encode(records).decode(),
        }
        resp = c.post("/v1/ingest", json=body)
        if resp.status_code != 201:
            raise RuntimeError(f"batch {b}: {resp.status_code} {resp.text[:500]}")
    for rel in CORPUS_FILES:
        path = CORPUS / rel
        raw = base64.b64encode(path.read_bytes()).decode()
        body = {"format": path.parent.name, "name": path.name, "contentBase64": raw}
        resp = c.post("/v1/ingest", json=body)
        if resp.status_code != 202:
            raise RuntimeError(f"{rel}: {resp.status_code} {resp.text[:500]}")
        job = wait_job_blocking(c, resp.json()["jobId"], within_s=300)
        if job["state"] != "completed":
            raise RuntimeError(f"{rel}: {job}")
    return time.perf_counter() - t0


def timed(fn: Any, *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1e3


_FLOOR_SQLITE = (
    "SELECT rowid, bm25(search_fts) AS s FROM search_fts WHERE search_fts MATCH ?"
    " AND rowid >= ? AND rowid < ? ORDER BY s LIMIT 21"
)
_FLOOR_POSTGRES = (
    "SELECT rowid, ts_rank(body, q) AS s FROM search_spans, CAST($1::text AS tsquery) q"
    " WHERE body @@ q AND scope_id = $2 ORDER BY s DESC LIMIT 21"
)


def paired(
    server: ServerProcess,
    key: str,
    dsn: str,
    sid: int,
    qs: list[str],
    rank_window: int,
    client: str,
) -> dict[str, Any]:
    """Each query four ways back to back, the order rotated query by query (so the load of
    the moment weighs on all four alike): ``search``, ``GET /v1/search`` through REST
    (:class:`Searcher`, ``limit`` 20); ``floor``, the bare engine query (SQLite: a read-only
    ``sqlite3`` connection in this process; PostgreSQL: one ``asyncpg`` connection);
    ``store``, ``store.search.page`` of the store opened read-only in this process as the server
    opens it (its reader pool, the rank window, every hit's words, nodes and snippet: what
    the route does less HTTP; ``limit`` 21 as the route asks); ``mapped`` (SQLite only),
    the floor's query on a connection set as the store's readers
    (:func:`~telha.storage.sqlite.base.reader_pragmas`). Wall ms of each, CPU ms of this
    process (``*_cpu``: SQLite runs in it, PostgreSQL does not; for ``search`` the
    client's), the server's CPU ms per REST search (``server_cpu``: every thread of it, its
    background actors too) and the mean hits. 20 queries warm the caches first."""
    cfg, base_dir = load_config(server.config, environ={})
    scope = Scope("bench", "search")
    names = ("search", "floor", "store", "mapped")
    out: dict[str, Any] = {k: [] for n in names for k in (n, f"{n}_cpu")}
    hits: list[int] = []
    searcher = Searcher(server.base_url, key, client)
    assert server.proc is not None
    pid = server.proc.pid

    async def run() -> None:
        conn = await asyncpg.connect(dsn) if dsn else None
        lite = None if dsn else sqlite3.connect(f"file:{server.db}?mode=ro", uri=True)
        mapped = None if dsn else sqlite3.connect(f"file:{server.db}?mode=ro", uri=True)
        if mapped is not None:
            for pragma in reader_pragmas(cfg.storage.reader_mmap_mib * 1024 * 1024):
                mapped.execute(pragma)
        try:
            async with open_store(cfg, base_dir, readers=1, pool_size=2, readonly=True) as store:

                async def rest(q: str) -> None:
                    hits.append(len(searcher(q)["hits"]))

                async def floor(q: str) -> None:
                    await _floor(conn, lite, sid, q)

                async def floor_mapped(q: str) -> None:
                    await _floor(conn, mapped, sid, q)

                async def search(q: str) -> None:
                    await store.search.page(
                        scope, parse_query(q), Filters(), limit=21, offset=0,
                        rank_window=rank_window,
                    )  # fmt: skip

                ways = list(zip(names, (rest, floor, search, floor_mapped), strict=True))
                ways = ways if mapped is not None else ways[:-1]  # PostgreSQL: no mapped floor
                for q in qs[:20]:
                    for _, fn in ways:
                        await fn(q)
                hits.clear()
                out["server_cpu"] = await _rotated(ways, qs, out, pid) / len(qs)
        finally:
            searcher.close()
            if conn is not None:
                await conn.close()
            for sqlite_conn in (lite, mapped):
                if sqlite_conn is not None:
                    sqlite_conn.close()

    anyio.run(run)
    out["hits_mean"] = statistics.mean(hits)
    return out


async def _rotated(
    ways: list[tuple[str, Any]], qs: list[str], out: dict[str, Any], pid: int
) -> float:
    """Each query every way, the order rotated query by query; wall and CPU ms appended to
    ``out[name]`` and ``out[f"{name}_cpu"]``. Returns the CPU ms server ``pid`` spent in
    the ``search`` way's requests."""
    server_cpu = 0.0
    for i, q in enumerate(qs):
        k = i % len(ways)
        for name, fn in ways[k:] + ways[:k]:
            s0 = _proc_cpu_ms(pid)
            c0, t0 = time.process_time(), time.perf_counter()
            await fn(q)
            out[name].append((time.perf_counter() - t0) * 1e3)
            out[f"{name}_cpu"].append((time.process_time() - c0) * 1e3)
            if name == "search":
                server_cpu += _proc_cpu_ms(pid) - s0
    return server_cpu


async def _floor(
    conn: asyncpg.Connection | None, lite: sqlite3.Connection | None, sid: int, q: str
) -> None:
    """The bare engine query of ``q``: on ``conn`` (PostgreSQL) or ``lite`` (SQLite)."""
    if conn is not None:
        await conn.fetch(_FLOOR_POSTGRES, tsquery(parse_query(q)), sid)
    elif lite is not None:
        lo, hi = scope_rowids(sid)
        lite.execute(_FLOOR_SQLITE, (fts5_query(parse_query(q)), lo, hi)).fetchall()


def _proc_cpu_ms(pid: int) -> float:
    """User and system CPU ms of process ``pid`` so far (``/proc``, clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1e3 / os.sysconf("SC_CLK_TCK")


def _config(tmp: Path, engine: str, storage: dict[str, Any], rank_window: int) -> Path:
    return write_config(
        tmp,
        engine,
        storage=storage,
        ingest={"max_body_bytes": 64 * 1024 * 1024, "json_max_records": BATCH},
        workers={
            "in_process": ["tabular_worker", "email_worker", "docling_worker"],
            "concurrency": 1,
        },
        search={"rank_window": rank_window},
        # bench/acl.py registers a folder connector at ``tmp`` (it is never run).
        connectors={"allowed_roots": [str(tmp)]},
    )


class Searcher:
    """``GET /v1/search`` on one kept-alive HTTP/1.1 connection: ``httpx`` (the client the
    bench uses everywhere else) or the standard library's ``http.client``, which spends
    about a third of ``httpx``'s CPU a request (the client's time is in every REST figure and
    not in the floor's)."""

    def __init__(self, base_url: str, key: str, client: str) -> None:
        self.key, self.client = key, client
        self.httpx = httpx.Client(base_url=base_url, headers={"x-api-key": key}, timeout=600)
        host, port = urllib.parse.urlsplit(base_url).netloc.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=600)

    def close(self) -> None:
        self.httpx.close()
        self.conn.close()

    def __call__(self, q: str) -> Any:
        """The answer's JSON. :raises RuntimeError: not a 200."""
        params = {"q": q, "limit": 20}
        if self.client == "httpx":
            resp = self.httpx.get("/v1/search", params=params)
            status, body = resp.status_code, resp.content
        else:
            path = "/v1/search?" + urllib.parse.urlencode(params)
            self.conn.request("GET", path, headers={"x-api-key": self.key})
            answer = self.conn.getresponse()
            status, body = answer.status, answer.read()
        if status != 200:
            raise RuntimeError(f"search {q!r}: {status} {body[:300]!r}")
        return msgspec.json.decode(body)


def time_searches(c: httpx.Client, key: str, qs: list[str], client: str) -> list[float]:
    """Client-side ms of each query through REST (after 20 to warm the caches)."""
    searcher = Searcher(str(c.base_url), key, client)
    try:
        for q in qs[:20]:
            searcher(q)
        return [timed(searcher, q) for q in qs]
    finally:
        searcher.close()


def time_fragments(c: httpx.Client, words: list[str]) -> dict[str, Any]:
    """Client-side ms of each one-word fragment locate (:func:`fragments`), by kind
    (``fragment_<kind>``), and how many answered a place (``fragment_<kind>_found``)."""
    out: dict[str, Any] = {}
    found: list[bool] = []

    def locate(text: str) -> None:
        resp = c.post("/v1/locate", json={"text": text})
        if resp.status_code != 200:
            raise RuntimeError(f"locate {text!r}: {resp.status_code} {resp.text[:300]}")
        found.append(bool(resp.json()))

    for kind, texts in fragments(words).items():
        found.clear()
        out[f"fragment_{kind}"] = [timed(locate, t) for t in texts]
        out[f"fragment_{kind}_found"] = sum(found)
    return out


def run(
    engine: str,
    spans: int,
    tmp: Path,
    rank_window: int,
    *,
    quick: bool = False,
    client: str = "http.client",
) -> dict[str, Any]:
    """Ingest (unless ``tmp`` holds a store built by an earlier run with as many spans),
    then the searches with ``rank_window``; the server restarted with ``rank_window = 0``
    (every match ranked): the searches again, the floor, the locates and one erasure.
    ``quick``: no restart, no erasure; the searches ranking every match are not timed."""
    rng = random.Random(SEED)
    words = vocabulary(rng)
    texts = paragraphs(rng, words, spans)
    qs = queries(rng, words)
    storage: dict[str, Any] = {}
    dsn = ""
    if engine == "postgres":
        dsn = create_database()
        storage = {"dsn": dsn, "pool_size": 8}
    out: dict[str, Any] = {
        "engine": engine, "spans": spans, "rank_window": rank_window, "client": client,
    }  # fmt: skip
    built = tmp / f"built-{spans}"
    reuse = engine == "sqlite" and built.exists()
    server = ServerProcess(_config(tmp, engine, storage, rank_window)).start()
    try:
        key = server.create_key("bench", "search")
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=600) as c:
            out["ingest_s"] = 0.0 if reuse else ingest(c, spans, texts)
            out["index_s"] = wait_search_indexed(c)
            if engine == "sqlite":
                built.touch()
            sid = 1  # the bench's only scope
            out.update(paired(server, key, dsn, sid, qs, rank_window, client))
        if not quick:
            server.stop()
            server = ServerProcess(_config(tmp, engine, storage, 0)).start()
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=600) as c:
            out["exact"] = out["search"] if quick else time_searches(c, key, qs, client)
            quotes = []
            for t in rng.sample(texts, LOCATES):
                sentence = t.split(". ")[0].rstrip(".") + "."
                quotes.append(sentence.replace(" ", "  ") if rng.random() < 0.5 else sentence)

            def locate(text: str) -> None:
                resp = c.post("/v1/locate", json={"text": text})
                if resp.status_code != 200 or not resp.json():
                    raise RuntimeError(f"locate {text!r}: {resp.status_code} {resp.text[:300]}")

            out["locate"] = [timed(locate, t) for t in quotes]
            out.update(time_fragments(c, words))
            out["erase_s"] = float("nan")
            if quick:
                return out
            resp = c.post(
                "/v1/ingest",
                json={
                    "format": "json",
                    "name": "erase-me.json",
                    "content": '[{"text": "to be erased"}]',
                },
            )
            source = resp.json()["sourceId"]
            t0 = time.perf_counter()
            resp = c.post(f"/v1/sources/{source}/erase", json={"reason": "bench"})
            if resp.status_code != 200:
                raise RuntimeError(f"erase: {resp.status_code} {resp.text[:300]}")
            out["erase_s"] = time.perf_counter() - t0
        if not dsn:
            out["db_mb"] = sum(p.stat().st_size for p in tmp.glob("telha.db*")) / 1e6
    finally:
        server.stop()
        if dsn:
            drop_databases()
    return out


def report(r: dict[str, Any]) -> None:
    """Print the table and the verdicts of one run."""
    s50, s99 = pct(r["search"], 0.5), pct(r["search"], 0.99)
    f50, f99 = pct(r["floor"], 0.5), pct(r["floor"], 0.99)
    l50, l99 = pct(r["locate"], 0.5), pct(r["locate"], 0.99)
    size = f", database {r['db_mb']:.0f} MB" if "db_mb" in r else ""
    print(f"search ({r['engine']}): {r['spans']:,} generated spans + corpus{size}")
    print(
        f"ingest {r['ingest_s']:.0f} s, then the index's queue drained in {r['index_s']:.1f} s;"
        f" mean hits per query {r['hits_mean']:.1f}"
    )
    e50, e99 = pct(r["exact"], 0.5), pct(r["exact"], 0.99)
    i50, i99 = pct(r["store"], 0.5), pct(r["store"], 0.99)
    m50 = pct(r["mapped"], 0.5) if r["mapped"] else 0.0  # none on PostgreSQL
    rows = [
        (f"search (REST, limit 20, rank_window {r['rank_window']:,})", s50, s99),
        ("search (REST, limit 20, every match ranked)", e50, e99),
        ("search (store call in this process, no HTTP)", i50, i99),
        ("floor (bare engine query, every match)", f50, f99),
        ("locate (REST)", l50, l99),
    ]
    if m50:
        mapped = ("mapped floor (the same, set as the readers)", m50, pct(r["mapped"], 0.99))
        rows.insert(-1, mapped)
    if r["exact"] is r["search"]:  # --quick: not timed
        del rows[1]
    for kind in ("rare", "frequent", "short"):
        times = r.get(f"fragment_{kind}")
        if times:
            found = r[f"fragment_{kind}_found"]
            what = f"locate a word's {kind} fragment ({found}/{len(times)} found)"
            rows.append((what, pct(times, 0.5), pct(times, 0.99)))
    print(f"| {'what':<46} |  p50 ms |  p99 ms |")
    print(f"|{'-' * 48}|---------|---------|")
    for what, a, b in rows:
        print(f"| {what:<46} | {a:7.1f} | {b:7.1f} |")
    print(f"erase of one source on this index: {r['erase_s']:.2f} s")
    if r["engine"] == "sqlite":
        ok = "PASS" if s50 <= TARGET_P50_MS and s99 <= TARGET_P99_MS else "FAIL"
        print(f"target search p50 <= {TARGET_P50_MS:g} ms, p99 <= {TARGET_P99_MS:g} ms: {ok}")
    ratio = s50 / f50 if f50 else float("inf")
    exact = e50 / f50 if f50 else float("inf")
    inproc = i50 / f50 if f50 else float("inf")
    cpu = pct(r["store_cpu"], 0.5) / max(pct(r["floor_cpu"], 0.5), 1e-9)
    print(
        f"REST client: {r['client']} (one kept-alive HTTP/1.1 connection); CPU ms per search,"
        f" p50: client {pct(r['search_cpu'], 0.5):.2f}, store in-process"
        f" {pct(r['store_cpu'], 0.5):.2f}, floor {pct(r['floor_cpu'], 0.5):.2f};"
        f" server's CPU a REST search, mean: {r['server_cpu']:.2f}"
    )
    per_query = [a / b for a, b in zip(r["search"], r["floor"], strict=True) if b > 0]
    print(f"median of the per-query ratios REST / floor: {statistics.median(per_query):.2f}")
    ranked = "" if r["exact"] is r["search"] else f"; every match ranked: {exact:.2f}"
    print(
        f"ratio REST search / floor (p50): {ratio:.2f}{ranked}"
        f"   (target <= {TARGET_FLOOR_RATIO:g}: "
        f"{'PASS' if ratio <= TARGET_FLOOR_RATIO else 'FAIL'})"
    )
    print(
        f"ratio in-process store search / floor (p50): wall {inproc:.2f}, CPU {cpu:.2f}"
        " (no HTTP: not the target's measure)"
    )
    if m50:
        print(
            f"ratio REST search / mapped floor (p50): {s50 / m50:.2f}; in-process store search"
            f" / mapped floor: {i50 / m50:.2f} (the engine set alike: not the target's measure)"
        )
    ok = "PASS" if l50 <= TARGET_LOCATE_MS else "FAIL"
    print(f"target locate p50 <= {TARGET_LOCATE_MS:g} ms: {ok}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument(
        "--rank-window",
        type=int,
        default=SearchConfig().rank_window,
        help="[search] rank_window of the first run (default: the service's default)",
    )
    parser.add_argument(
        "--store", type=Path, help="SQLite: keep the store in this folder, reuse it if built"
    )
    parser.add_argument(
        "--quick", action="store_true", help="only the windowed searches, floor and locates"
    )
    parser.add_argument(
        "--client",
        choices=("http.client", "httpx"),
        default="http.client",
        help="the HTTP client timing the searches (one kept-alive connection either way)",
    )
    args = parser.parse_args()
    try:
        if args.store is not None:
            args.store.mkdir(parents=True, exist_ok=True)
            result = run(
                args.engine, args.spans, args.store, args.rank_window, quick=args.quick,
                client=args.client,
            )  # fmt: skip
        else:
            with tempfile.TemporaryDirectory(prefix="telha-bench-search-") as tmp:
                result = run(
                    args.engine, args.spans, Path(tmp), args.rank_window, quick=args.quick,
                    client=args.client,
                )  # fmt: skip
    except (RuntimeError, httpx.HTTPError) as exc:
        print(f"search: request failed: {exc}", file=sys.stderr)
        return 1
    report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
