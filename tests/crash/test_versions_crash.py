"""The crash tier for versions that supersede (docs/testing.md; docs/architecture.md,
"Versions and node identity"): ``telha serve`` is SIGKILLed and restarted while sources are
re-ingested with changes — JSON (a single shot committed by the core), markdown (a single
shot through the in-process text worker) and CSV (streamed by the remote tabular worker, the
supersede at its finalize) — and sources are retired by a process of their own, SIGKILLed in
the middle of its retires.

Invariants: every store the crash left (a copy taken while the server is down) and the final
one has no source with rows of two versions current, no current row of a superseded version
and no current row of a retired source (``telha check``'s version checks); after the load
drains, each re-ingested source's current graph is exactly its last version's — the same
nodes (labels, properties) and edge count as the last content ingested afresh under another
name — every version posted was published once, and ``telha check`` passes.

``TELHA_CRASH_SEED`` picks another seed (printed on failure).
"""

from __future__ import annotations

import base64
import collections
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import pytest

from telha.check.runner import format_report, run_checks
from telha.check.versions import VersionChecks
from telha.config import Config, StorageConfig
from telha.storage import open_store
from telha.storage.core.visible import visible
from tests.crash.driver import Fleet, Request, dead_workers, drain, post_with_retries

pytestmark = [pytest.mark.crash, pytest.mark.anyio]

SEED = int(os.environ.get("TELHA_CRASH_SEED", "20260801"))
#: Server kills at most, while the chains run; every other one waits (up to 3 s) for a
#: streamed supersede in progress.
SERVE_KILLS = 24
VERSIONS = 4
#: JSON records, markdown paragraphs, CSV rows per source (10% edited per version).
SIZE = 600
RETIRED = 4
ROOTS = {"DOCUMENT", "TABLE", "WORKBOOK", "FILE"}
TENANT, ORG = "crash", "main"


def _edited(i: int, v: int) -> bool:
    """Whether item ``i`` differs in version ``v`` (a tenth of them, another tenth each time)."""
    return i % 10 == v % 10


def _json(n: int, v: int) -> str:
    records = [{"title": f"item {i} café", "n": i, "rev": v if _edited(i, v) else 0}
               for i in range(SIZE)]  # fmt: skip
    return json.dumps(records)


def _markdown(n: int, v: int) -> str:
    paras = [f"Paragraph {i} of note {n}{f' revised {v}' if _edited(i, v) else ''}."
             for i in range(SIZE)]  # fmt: skip
    return f"# Note {n}\n\n" + "\n\n".join(paras) + "\n"


def _csv(n: int, v: int) -> bytes:
    rows = [f"{i},Name {i},{v if _edited(i, v) else 0}" for i in range(SIZE)]
    return ("id,name,rev\n" + "\n".join(rows) + "\n").encode()


def request(kind: str, n: int, v: int, name: str | None = None) -> Request:
    """Version ``v`` of source ``n`` of ``kind`` (``json``, ``markdown`` or ``csv``)."""
    name = name or f"{kind}-{n}"
    if kind == "json":
        return Request("json", name, {"content": _json(n, v)})
    if kind == "markdown":
        return Request("markdown", name, {"content": _markdown(n, v)})
    data = _csv(n, v)
    body = {"contentBase64": base64.b64encode(data).decode(),
            "options": {"rows_per_partial": 10}}  # fmt: skip
    return Request("csv", name, body)


CHAINS = [("json", 0), ("json", 1), ("markdown", 0), ("markdown", 1), ("csv", 0), ("csv", 1)]


async def _settle(client: httpx.AsyncClient, job_id: str, give_up_s: float = 180.0) -> None:
    """Poll the job through server kills until it is terminal; it must be ``completed``."""
    deadline = time.monotonic() + give_up_s
    while time.monotonic() < deadline:
        try:
            resp = await client.get(f"/v1/ingest/{job_id}")
        except httpx.TransportError:
            resp = None
        if resp is not None and resp.status_code == 200:
            state = resp.json()["state"]
            if state in ("completed", "dead"):
                assert state == "completed", resp.json()
                return
        await anyio.sleep(0.1)
    raise AssertionError(f"job {job_id} not terminal in {give_up_s}s")


async def _chain(client: httpx.AsyncClient, kind: str, n: int, inflight: list[str]) -> str:
    """Post the source's versions one after another, each once the one before applied;
    returns the source id."""
    source = ""
    for v in range(VERSIONS):
        inflight.append(f"{kind}-{n}@{v}")
        try:
            answer = await post_with_retries(client, request(kind, n, v), give_up_s=180)
            if answer.status == 202:
                await _settle(client, answer.body["jobId"])
        finally:
            inflight.remove(f"{kind}-{n}@{v}")
        source = answer.body["sourceId"]
    return source


def _retirer(fleet: Fleet, sources: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crash.retire", str(fleet.server.config), TENANT, ORG,
         *sources],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip


def _retire_under_kills(fleet: Fleet, sources: list[str], rng: random.Random) -> int:
    """Retire ``sources`` by :mod:`tests.crash.retire`, SIGKILLed 0-20 ms after each of its
    first retires commits (so the kill lands in the next one), run again until every source
    printed; returns how many runs were killed (blocking: call in a thread)."""
    left = list(sources)
    killed = 0
    while left:
        with _retirer(fleet, left) as proc:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line and len(left) > 1:
                left.remove(line)
                time.sleep(rng.uniform(0, 0.02))
                proc.send_signal(signal.SIGKILL)
                killed += 1
                continue
            rest = proc.stdout.read().split()
            assert proc.wait(60) == 0, "the retirer failed"
        for done in [line, *rest]:
            if done in left:
                left.remove(done)
    return killed


async def _version_checks(path: Path) -> str:
    """The version checks over a copy of the store; the report when they found anything."""
    cfg = Config(storage=StorageConfig(path=str(path)))
    async with open_store(cfg, path.parent, readers=1, pool_size=2, readonly=True) as store:
        report = await run_checks(store, families=[VersionChecks()])
    return format_report(report, str(path)) if report.total else ""


def _graph(fleet: Fleet, source: str) -> tuple[collections.Counter[str], int, int]:
    """The source's current graph, read through the visibility rule: the multiset of its
    non-root nodes' properties (labels may derive from the source's name), how many nodes
    and how many edges."""
    now_n, _ = visible("n", None)
    now_e, _ = visible("e", None, node=False)
    sid = uuid.UUID(source).bytes
    with fleet.db() as conn:
        nodes = conn.execute(
            f"SELECT labels, CAST(properties AS TEXT) FROM nodes n WHERE source_id = ? AND {now_n}",
            (sid,),
        ).fetchall()
        (edges,) = conn.execute(
            f"SELECT count(*) FROM edges e WHERE source_id = ? AND {now_e}", (sid,)
        ).fetchone()
    kept = collections.Counter(
        str(props) for labels, props in nodes if not ROOTS & set(json.loads(labels))
    )
    return kept, len(nodes), int(edges)


def _cut_streams(path: Path) -> int:
    """Streamed supersedes in progress in a store (a crashed one: the kill cut them in the
    middle): a source's newest version, pinned, not published, its job leased, the source
    with a published version already."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM source_versions s JOIN jobs j ON j.job_id = s.job_id"
            " WHERE s.published_tx IS NULL AND j.state = 'leased' AND NOT EXISTS"
            " (SELECT 1 FROM source_versions l WHERE l.scope_id = s.scope_id"
            " AND l.source_id = s.source_id AND l.tx > s.tx) AND EXISTS"
            " (SELECT 1 FROM source_versions p WHERE p.scope_id = s.scope_id"
            " AND p.source_id = s.source_id AND p.published_tx IS NOT NULL)"
        ).fetchone()
    return int(n)


@dataclass
class Run:
    """What one run of the load did: the sources of each chain, the retired sources, the
    references (each chain's last content ingested afresh), the stores kills left, the
    re-ingests in flight at each kill, how often the retirer was killed mid-run."""

    fleet: Fleet
    rng: random.Random
    sources: dict[tuple[str, int], str] = field(default_factory=dict)
    retired: list[str] = field(default_factory=list)
    refs: dict[tuple[str, int], str] = field(default_factory=dict)
    snapshots: list[Path] = field(default_factory=list)
    inflight: list[str] = field(default_factory=list)
    hits: list[str] = field(default_factory=list)
    retirer_kills: int = 0
    restarts: int = 0
    #: Streamed supersedes a kill cut between two parts (summed over the crashed stores).
    cut_streams: int = 0

    def snapshot(self) -> None:
        """Copy the store the kill left (the server is down)."""
        self.hits.extend(self.inflight)
        path = self.fleet.folder / f"crashed-{len(self.snapshots)}.db"
        self.fleet.backup(path)
        self.snapshots.append(path)

    async def chain(self, client: httpx.AsyncClient, kind: str, n: int) -> None:
        self.sources[(kind, n)] = await _chain(client, kind, n, self.inflight)

    async def retire(self) -> None:
        await anyio.sleep(self.rng.uniform(1, 4))
        rng = random.Random(self.rng.random())
        self.retirer_kills = await anyio.to_thread.run_sync(
            _retire_under_kills, self.fleet, self.retired, rng
        )

    async def chaos(self) -> None:
        """Kill the server at random moments while the chains run (at most
        :data:`SERVE_KILLS` times); every other kill waits for a streamed supersede."""
        for i in range(SERVE_KILLS):
            await anyio.sleep(self.rng.uniform(0.5, 2.0))
            if len(self.sources) == len(CHAINS):
                return
            if i % 2:
                with anyio.move_on_after(3):
                    while True:  # a database to poll: no event to wait on
                        if _cut_streams(self.fleet.server.db):
                            break
                        await anyio.sleep(0.05)
            await anyio.to_thread.run_sync(self.fleet.kill_server, self.snapshot)

    async def load(self, client: httpx.AsyncClient) -> None:
        """The retired sources' first versions, then the chains and the retirer under
        server kills, the drain, and the references."""
        for n in range(RETIRED):
            answer = await post_with_retries(client, request("json", 100 + n, 0, f"gone-{n}"))
            self.retired.append(str(answer.body["sourceId"]))
        with anyio.fail_after(400):
            async with anyio.create_task_group() as tg:
                for kind, n in CHAINS:
                    tg.start_soon(self.chain, client, kind, n)
                tg.start_soon(self.retire)
                await self.chaos()
            self.restarts = await drain(self.fleet)
        for kind, n in CHAINS:
            req = request(kind, n, VERSIONS - 1, f"ref-{kind}-{n}")
            answer = await post_with_retries(client, req)
            if answer.status == 202:
                await _settle(client, answer.body["jobId"])
            self.refs[(kind, n)] = str(answer.body["sourceId"])

    async def verify(self) -> None:
        """The invariants of the module docstring."""
        for path in self.snapshots:
            found = await _version_checks(path)
            assert not found, f"seed {SEED}, the store a kill left:\n{found}"
            self.cut_streams += _cut_streams(path)
        result = self.fleet.check()
        assert result.returncode == 0, f"seed {SEED}\n{result.stdout}{result.stderr}"
        assert "current_versions" in result.stdout and "retired_sources" in result.stdout
        with self.fleet.db() as conn:
            for key, source in self.sources.items():
                (published,) = conn.execute(
                    "SELECT count(*) FROM source_versions WHERE source_id = ?"
                    " AND published_tx IS NOT NULL",
                    (uuid.UUID(source).bytes,),
                ).fetchone()
                assert published == VERSIONS, (key, published)
            for source in self.retired:
                (retired_tx,) = conn.execute(
                    "SELECT retired_tx FROM source_versions WHERE source_id = ?",
                    (uuid.UUID(source).bytes,),
                ).fetchone()
                assert retired_tx is not None, source
                assert _graph(self.fleet, source) == (collections.Counter(), 0, 0), source
        for key, source in self.sources.items():
            assert _graph(self.fleet, source) == _graph(self.fleet, self.refs[key]), key
        assert not dead_workers(self.fleet) + self.fleet.died
        assert self.restarts == 0, "the load drained only after the remote workers restarted"


async def test_supersede_and_retire_leave_one_graph_current(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    run = Run(fleet, random.Random(SEED + 18))
    await anyio.to_thread.run_sync(fleet.start)
    fleet.key = fleet.server.create_key(TENANT, ORG)
    try:
        async with httpx.AsyncClient(
            base_url=fleet.base_url, headers={"x-api-key": fleet.key}, timeout=30
        ) as client:
            await run.load(client)
        await run.verify()
    except BaseException:
        print(f"versions crash seed {SEED}, kills {fleet.kills}, folder {tmp_path}")
        raise
    finally:
        await anyio.to_thread.run_sync(fleet.stop)
    print(
        f"kills {fleet.kills}, retirer killed {run.retirer_kills} times mid-run;"
        f" {len(run.snapshots)} crashed stores checked; re-ingests in flight at a kill:"
        f" {len(run.hits)}; streamed supersedes cut mid-stream: {run.cut_streams}"
    )
