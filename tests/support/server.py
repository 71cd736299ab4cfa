"""Start and stop a real ``telha serve`` subprocess (port 0 on 127.0.0.1; a temp SQLite file,
or with ``engine="postgres"`` a fresh database on the test cluster, see :mod:`tests.support.pg`).

The server logs JSON lines to a file; :meth:`ServerProcess.start` waits for the ``ready``
event and reads the bound REST address from it. Shared by tests and benchmarks.
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx

from telha.auth import hash_key, mint_api_key
from telha.config import ConfigError, load_config
from telha.domain.errors import StorageError
from telha.domain.model import Scope
from telha.storage import open_store
from telha.tokens import load_token_key, mint_worker_token
from tests.support.pg import create_database
from tests.support.wait import wait_job

__all__ = [
    "LOANED_ENV",
    "ServerProcess",
    "child_environ",
    "restart_port",
    "settled_job",
    "write_config",
]

#: Settings an in-process server (:mod:`tests.support.inproc`) exported into this process's
#: environment for its own workers while it runs: never passed on to a child process.
LOANED_ENV: set[str] = set()


def child_environ() -> dict[str, str]:
    """This process's environment for a child (server or worker): without :data:`LOANED_ENV`."""
    return {k: v for k, v in os.environ.items() if k not in LOANED_ENV}


#: Generous: a loaded 2-core CI machine starts a server in seconds, but never stalls a test.
READY_TIMEOUT_S = 90.0


def write_config(folder: Path, engine: str = "sqlite", **sections: dict[str, Any]) -> Path:
    """Write ``config.toml`` in ``folder``: REST on port 0, the data folder ``folder``, plus
    overrides. ``engine="postgres"``: a fresh database (unless ``storage`` names a ``dsn``)."""
    storage: dict[str, Any] = {"path": "telha.db"}
    if engine == "postgres":
        storage.update(engine="postgres", pool_size=4)
        if "dsn" not in sections.get("storage", {}):
            storage["dsn"] = create_database()
    merged: dict[str, dict[str, Any]] = {
        "server": {"rest_addr": "127.0.0.1:0", "grpc_addr": "127.0.0.1:0", "shutdown_grace_s": 5},
        "storage": storage,
        # web_worker's browser may reach the test's own pages only, never another address.
        "web": {"allowed_hosts": ["127.0.0.1"]},
    }
    for name, values in sections.items():
        merged.setdefault(name, {}).update(values)
    lines = []
    for name, values in merged.items():
        lines.append(f"[{name}]")
        lines.extend(f"{k} = {json.dumps(v)}" for k, v in values.items())
    path = folder / "config.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def wait_jobs_finished(
    db: Path, timeout_s: float = 600, poll_s: float = 0.02
) -> collections.Counter[str]:
    """Block until no job in the SQLite file ``db`` is ``pending`` or ``leased`` (read-only,
    every ``poll_s`` seconds, from the calling process: polling through REST would cost the
    server's own CPU); then job counts by state.

    :raises TimeoutError: jobs still unfinished after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        query = "SELECT count(*) FROM jobs WHERE state IN ('pending', 'leased')"
        while conn.execute(query).fetchone()[0]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs unfinished after {timeout_s} s")
            time.sleep(poll_s)
        rows = conn.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall()
    return collections.Counter({str(s): int(n) for s, n in rows})


def telha_check(config: Path, *, process: bool = False) -> subprocess.CompletedProcess[str]:
    """``telha check --config config`` (read-only; safe beside a running server): its exit
    code, summary on stdout and violations.

    What the command does runs in this process (the same config reading, checks and report,
    in a thread of its own: the caller may be inside an event loop), saving a child's start
    and imports; ``process=True`` runs ``python -m telha check`` instead, for tests about
    the command itself.
    """
    args = [sys.executable, "-m", "telha", "check", "--config", str(config)]
    if process:
        return subprocess.run(
            args, env=child_environ(), capture_output=True, text=True, timeout=120, check=False
        )
    from telha.check.runner import check_config, format_report

    try:
        cfg, base_dir = load_config(config, environ=child_environ())
    except ConfigError as exc:
        return subprocess.CompletedProcess(args, 2, "", f"telha: config error: {exc}\n")
    location = f"{cfg.storage.engine} {open_store(cfg, base_dir, readonly=True).location}"
    with ThreadPoolExecutor(1) as pool:
        ran = pool.submit(anyio.run, partial(check_config, cfg, base_dir))
        try:
            report = ran.result(timeout=120)
        except StorageError as exc:
            return subprocess.CompletedProcess(
                args, 1, "", f"telha: storage error: {exc.message}\n"
            )
    out = format_report(report, location) + "\n"
    return subprocess.CompletedProcess(args, 1 if report.total else 0, out, "")


#: Ports for servers restarted on the same address, below Linux's ephemeral range
#: (``net.ipv4.ip_local_port_range``, 32768-60999 by default).
_RESTART_PORTS = range(20000, 32000)


def restart_port(*taken: int) -> int:
    """A free loopback port (not one of ``taken``) for a server that is restarted on the same
    address (crash tests).
    Not from the ephemeral range, as port 0 would give: while the server is down, a loopback
    connection (a client, a worker reconnecting) may get that number as its own local port
    and the restart then fails with "Address already in use"."""
    while True:
        port = random.choice(_RESTART_PORTS)
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


async def settled_job(
    c: httpx.AsyncClient, body: dict[str, Any], within_s: float = 60.0
) -> dict[str, Any]:
    """POST ``body`` to ``/v1/ingest`` and wait for the job it made to be ``completed`` or
    ``dead``; its status body.

    :raises TimeoutError: not settled within ``within_s`` seconds.
    """
    job_id = (await c.post("/v1/ingest", json=body)).json()["jobId"]
    return await wait_job(c, job_id, within_s=within_s)


class ServerProcess:
    """One ``telha serve --config PATH`` child process."""

    def __init__(self, config: Path, serve_args: tuple[str, ...] = ()) -> None:
        """``serve_args`` are appended to ``telha serve --config PATH`` (``--log-level``)."""
        self.config = config
        self.serve_args = serve_args
        self.db = config.parent / "telha.db"
        self.log = config.parent / "serve.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""
        self.grpc_addr = ""

    def __enter__(self) -> ServerProcess:
        """``with ServerProcess(config) as srv:`` starts the server (unless it runs already)
        and kills it, if it still runs, when the block ends. A test that wants a clean
        shutdown calls :meth:`stop` inside the block and asserts its exit code."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def start(self) -> ServerProcess:
        """Spawn and wait for readiness; raises ``RuntimeError`` with the log if it exits."""
        offset = self.log.stat().st_size if self.log.exists() else 0
        cmd = [sys.executable, "-m", "telha", "serve", "--config", str(self.config)]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [*cmd, *self.serve_args],
                stdout=log,
                stderr=subprocess.STDOUT,
                # faulthandler: a server that never gets ready dumps its threads' stacks
                # into the log on the SIGABRT below, so the failure says where it stood.
                env={**child_environ(), "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"},
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in self.log.read_bytes()[offset:].splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") == "ready":
                    self.base_url = f"http://{event['rest_addr']}"
                    self.grpc_addr = str(event["grpc_addr"])
                    return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"telha serve exited {self.proc.returncode}:\n{self.log_text()}")
            time.sleep(0.02)
        self.proc.send_signal(signal.SIGABRT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()
        raise RuntimeError(f"telha serve not ready in {READY_TIMEOUT_S}s:\n{self.log_text()}")

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Send ``sig`` and wait for the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def create_key(self, tenant: str, org: str, principals: tuple[str, ...] | None = None) -> str:
        """Mint a key straight into the server's store (what ``api-key create`` does),
        acting for ``principals`` (sorted; ``None``: none)."""
        key_id, key = mint_api_key()
        cfg, base_dir = load_config(self.config, environ={})

        async def insert() -> None:
            async with open_store(cfg, base_dir, readers=1, pool_size=2) as store:
                await store.keys.add(Scope(tenant, org), key_id, hash_key(key), principals)

        # Own thread, own event loop: callable from sync fixtures and async tests alike.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(anyio.run, insert).result()
        return key

    def worker_token(self, scope: Scope | None, ttl_s: int = 3600) -> str:
        """A worker token signed with this server's key file (what ``worker-token`` prints)."""
        cfg, _ = load_config(self.config, environ={})
        key = load_token_key(cfg.grpc.token_key, self.db.parent)
        return mint_worker_token(key, scope, ttl_s)

    def spawn_worker(
        self, module: str, scope: Scope | None, stderr: Any = subprocess.DEVNULL, **extra: str
    ) -> subprocess.Popen[bytes]:
        """Start ``python -m workers_common.run module`` against this server (the caller
        stops it); ``extra`` goes into its environment."""
        return subprocess.Popen(
            [sys.executable, "-m", "workers_common.run", module],
            env=self.worker_env(scope, **extra),
            stderr=stderr,
        )

    def worker_env(self, scope: Scope | None, **extra: str) -> dict[str, str]:
        """The environment of a ``python -m workers_common.run`` process for this server:
        this process's, plus the gRPC target, a worker token for ``scope`` and ``extra``."""
        return {
            **child_environ(),
            "TELHA_GRPC_TARGET": self.grpc_addr,
            "TELHA_WORKER_TOKEN": self.worker_token(scope),
            **extra,
        }
