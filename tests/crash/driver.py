"""The crash driver (docs/testing.md), shared by ``tests/crash`` and ``bench/chaos.py``.

A mixed load (JSON batches, text, streamed CSV, DOCX, email with an attachment, from the shared
corpus; every request a new source) is posted by clients that retry what users retry: a POST
whose connection died or was refused, or a 503. :class:`Fleet` runs ``telha serve`` on fixed
loopback ports (so clients and remote workers find it again after a restart) with remote
``workers_common.run`` processes, and SIGKILLs and restarts either on demand.
"""

from __future__ import annotations

import base64
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from tests.conftest import CORPUS
from tests.support.server import ServerProcess, restart_port, telha_check, write_config

__all__ = [
    "Answer",
    "Fleet",
    "Request",
    "dead_workers",
    "drain",
    "mixed_load",
    "post_with_retries",
]

DOCX = [
    "Strict.docx",
    "docx_lists.docx",
    "docx_rich_cells.docx",
    "footnotes.docx",
    "unit_test_headers_numbered.docx",
    "word_sample.docx",
]
REMOTE_WORKERS = ("text_worker", "tabular_worker", "docling_worker")


@dataclass(frozen=True)
class Request:
    """One POST /v1/ingest body and its format."""

    fmt: str
    name: str
    body: dict[str, Any]


@dataclass
class Answer:
    """The 2xx answer a request finally got, and how many attempts failed before it."""

    request: Request
    status: int
    body: dict[str, Any]
    retries: int


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def mixed_load(rng: random.Random, n: int, webhook_url: str | None = None) -> list[Request]:
    """``n`` requests cycling JSON, text, CSV (streamed: 2 rows per partial), DOCX and
    email-with-attachment, each under its own name (so each makes one version); shuffled.
    With ``webhook_url``, every odd-numbered request that makes a job (not JSON) asks for a
    webhook there (``options.webhook``)."""
    csv = (CORPUS / "csv" / "countries.csv").read_bytes()
    eml = (CORPUS / "eml" / "eml_with_attachment.eml").read_bytes()
    out: list[Request] = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            records = [{"title": f"risk {i}.{r} café", "n": r} for r in range(20)]
            body: dict[str, Any] = {"content": json.dumps(records)}
            out.append(Request("json", f"batch-{i}.json", body))
        elif kind == 1:
            text = f"Note {i}.\n\nÜber paragraph {rng.random()}.\n\nThird."
            out.append(Request("text", f"note-{i}.txt", {"content": text}))
        elif kind == 2:
            data = csv + f"{100 + i},Row,Extra {i},{i}\n".encode()
            body = {"contentBase64": _b64(data), "options": {"rows_per_partial": 2}}
            out.append(Request("csv", f"table-{i}.csv", body))
        elif kind == 3:
            data = (CORPUS / "docx" / DOCX[(i // 5) % len(DOCX)]).read_bytes()
            out.append(Request("docx", f"doc-{i}.docx", {"contentBase64": _b64(data)}))
        else:
            data = eml.replace(b"Subject: Email with Attachment", f"Subject: Mail {i}".encode())
            out.append(Request("eml", f"mail-{i}.eml", {"contentBase64": _b64(data)}))
        if webhook_url is not None and i % 2 and out[-1].fmt != "json":
            options = {**out[-1].body.get("options", {}), "webhook": {"url": webhook_url}}
            out[-1].body["options"] = options
    rng.shuffle(out)
    return out


async def post_with_retries(
    client: httpx.AsyncClient, req: Request, *, give_up_s: float = 120.0
) -> Answer:
    """POST until a 2xx answer: a refused or dropped connection, a timeout or a 503 is retried
    (request-level dedup makes that safe). Any other answer raises ``AssertionError``."""
    retries = 0
    deadline = time.monotonic() + give_up_s
    while True:
        try:
            resp = await client.post(
                "/v1/ingest", json={"format": req.fmt, "name": req.name, **req.body}
            )
        except httpx.TransportError:
            resp = None
        if resp is not None and resp.status_code in (200, 201, 202):
            return Answer(req, resp.status_code, dict(resp.json()), retries)
        if resp is not None and resp.status_code != 503:
            raise AssertionError(f"{req.name}: {resp.status_code} {resp.text}")
        retries += 1
        if time.monotonic() > deadline:
            raise AssertionError(f"{req.name}: no answer in {give_up_s}s")
        await anyio.sleep(0.1)


@dataclass
class Fleet:
    """``telha serve`` (SQLite, in-process ``text_worker`` and ``email_worker``) plus one remote
    process per :data:`REMOTE_WORKERS`, on fixed ports, with short leases.

    :param folder: the data folder (config, database, logs).
    :param synchronous: ``storage.synchronous``.
    :param webhook_hosts: ``[webhooks] allowed_hosts`` (the receiver's ``127.0.0.1:<port>``).
    """

    folder: Path
    synchronous: str = "normal"
    webhook_hosts: tuple[str, ...] = ()
    server: ServerProcess = field(init=False)
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    kills: dict[str, int] = field(default_factory=lambda: {"serve": 0, "worker": 0})
    #: An API key of the load's scope (set once the server has started).
    key: str = ""
    #: Times :func:`drain` had to restart the remote workers (never expected).
    restarts: int = 0
    #: Remote workers :func:`drain` found exited on their own, with their log tails.
    died: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        rest = restart_port()
        grpc = restart_port(rest)
        config = write_config(
            self.folder,
            server={"rest_addr": f"127.0.0.1:{rest}", "grpc_addr": f"127.0.0.1:{grpc}"},
            storage={"synchronous": self.synchronous},
            jobs={
                "lease_secs": 2,
                "reap_interval_s": 0.2,
                "backoff_base_ms": 50,
                "backoff_max_s": 0.5,
                "max_attempts": 100,  # losses to crashes must not exhaust attempts
                "max_worker_losses": 100,  # nor the poison cap ([jobs] max_worker_losses)
            },
            workers={"in_process": ["text_worker", "email_worker"], "concurrency": 1},
            # Deliveries cut by a kill are claimed again after claim_s.
            webhooks={
                "allowed_hosts": list(self.webhook_hosts),
                "backoff_base_ms": 100,
                "backoff_max_s": 1,
                "poll_interval_ms": 100,
                "timeout_s": 2,
                "claim_s": 3,
            },
        )
        self.server = ServerProcess(config)
        self.base_url = f"http://127.0.0.1:{rest}"

    def start(self) -> None:
        """Start the server, then the remote workers (blocking: call in a thread)."""
        self.server.start()
        for module in REMOTE_WORKERS:
            self.start_worker(module)

    def start_worker(self, module: str) -> None:
        """(Re)start one remote worker process, heartbeating every 0.5 s."""
        log = (self.folder / f"{module}.log").open("ab")
        self.workers[module] = subprocess.Popen(
            [sys.executable, "-m", "workers_common.run", module],
            env=self.server.worker_env(None, TELHA_HEARTBEAT_INTERVAL_SECS="0.5"),
            stdout=log,
            stderr=log,
        )
        log.close()

    def kill_server(self, while_down: Callable[[], None] | None = None) -> None:
        """SIGKILL ``telha serve`` and restart it (blocking: call in a thread); ``while_down``
        runs between the two (a copy of the store as the crash left it)."""
        self.server.kill()
        self.kills["serve"] += 1
        if while_down is not None:
            while_down()
        self.server.start()

    def kill_worker(self, module: str) -> None:
        """SIGKILL one remote worker and restart it."""
        proc = self.workers[module]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.kills["worker"] += 1
        self.start_worker(module)

    def stop(self) -> None:
        """Stop the workers, then the server (SIGTERM)."""
        for proc in self.workers.values():
            proc.terminate()
        for proc in self.workers.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.server.stop()

    def db(self) -> sqlite3.Connection:
        """A read-only connection to the database (beside the live server)."""
        return sqlite3.connect(f"file:{self.server.db}?mode=ro", uri=True)

    def active_jobs(self) -> int:
        """Jobs still ``pending`` or ``leased``."""
        with self.db() as conn:
            (n,) = conn.execute(
                "SELECT count(*) FROM jobs WHERE state IN ('pending', 'leased')"
            ).fetchone()
        return int(n)

    def backup(self, path: Path) -> None:
        """A consistent copy of the database at ``path`` (SQLite's backup, WAL included)."""
        dst = sqlite3.connect(path)
        with self.db() as src:
            src.backup(dst)
        dst.close()

    def webhook_secret(self, tenant: str, org: str) -> str:
        """Make the scope's webhook signing secret with ``telha webhook secret``; returns it."""
        out = subprocess.run(
            [sys.executable, "-m", "telha", "webhook", "secret", "--tenant", tenant,
             "--org", org, "--config", str(self.server.config)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return out.stdout.strip()

    def check(self) -> subprocess.CompletedProcess[str]:
        """``telha check`` on the fleet's config."""
        return telha_check(self.server.config, process=True)


#: Seconds the load may take to drain after the last kill before the remote workers are
#: restarted once (see :func:`drain`).
STUCK_S = 60.0


def dead_workers(fleet: Fleet) -> list[str]:
    """Remote workers whose process exited on its own (the fleet only restarts the ones it
    killed), each with the tail of its log."""
    dead = []
    for module, proc in fleet.workers.items():
        if proc.poll() is not None:
            tail = (fleet.folder / f"{module}.log").read_bytes()[-2000:].decode(errors="replace")
            dead.append(f"{module} exited {proc.returncode}:\n{tail}")
    return dead


async def drain(fleet: Fleet, stuck_s: float = STUCK_S) -> int:
    """Wait until no job is pending or leased (polling the database: there is no event);
    remote workers that exited on their own are added to ``fleet.died``.

    A fallback, counted, never expected: if the load has not drained ``stuck_s`` after the last
    kill, the remote workers are restarted once, as a supervisor would, so the remaining
    invariants can still be checked; returns how many times (0 or 1). (Remote workers used to
    die after a core SIGKILL — grpclib's unbalanced ``Task.cancel()`` let anyio's own
    cancellation escape them — and the load then waited for ever.)"""
    restarts = 0
    started = time.monotonic()
    while fleet.active_jobs():  # a database to poll: no event to wait on
        await anyio.sleep(0.2)
        if time.monotonic() - started >= stuck_s and not restarts:
            fleet.died += dead_workers(fleet)
            for module in REMOTE_WORKERS:
                await anyio.to_thread.run_sync(fleet.kill_worker, module)
            restarts = 1
    fleet.died += dead_workers(fleet)
    return restarts
