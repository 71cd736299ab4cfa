"""The service in-process: :func:`telha.service.wiring.run_service` (the wiring ``telha serve``
runs) on its own event loop in a thread of the test process, listening on real 127.0.0.1
sockets (REST and gRPC, port 0 unless the config names one).

:class:`InProcessServer` answers to what tests use of
:class:`tests.support.server.ServerProcess` (``base_url``, ``grpc_addr``, ``db``,
``create_key``, ``worker_token``, ``spawn_worker``, ``stop``), so a module whose test is not
about the process (signals, crashes, the log, the CLI) swaps one for the other. It saves the
child's interpreter start and imports: several seconds a server on a loaded 2-core machine.

Logging is configured for the test process as ``telha serve`` configures it (JSON lines,
``info``), once, when this module is imported; each server's lines (its tasks' and their
threads') go to its own ``serve.log`` beside the config, as a subprocess's do, so
:meth:`InProcessServer.log_text` reads them; other lines go to stderr.

What differs from a subprocess: signals are not listened to;
``TELHA_`` variables of the environment do not override the config file (the settings the
service exports to its in-process workers would otherwise leak from one server into the
next); those exported settings are restored when the server stops.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from concurrent.futures import Future
from contextlib import AbstractContextManager
from contextvars import ContextVar
from functools import partial
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc
import anyio.from_thread

from telha.config import Config, load_config
from telha.domain.model import Scope
from telha.logs import configure_logging
from telha.service.wiring import run_service
from tests.support.server import LOANED_ENV, ServerProcess

__all__ = ["InProcessServer", "Server"]

#: The settings :func:`telha.service.wiring.run_service` exports for in-process workers.
_EXPORTED_PREFIXES = ("TELHA_DOCLING__", "TELHA_WEB__", "TELHA_CONNECTORS__", "TELHA_OCR__")
#: Generous for a loaded 2-core CI machine (the first start imports the worker modules).
READY_TIMEOUT_S = 90.0


#: The log file of the in-process server whose task (or thread) is logging.
_LOG_FILE: ContextVar[IO[str] | None] = ContextVar("telha_inproc_log", default=None)


class _ServerLogs(io.TextIOBase):
    """The test process's log stream: a line goes to the log file of the server logging it
    (:data:`_LOG_FILE`), or to the stderr of the moment (pytest's capture) if none."""

    def write(self, text: str) -> int:
        out = _LOG_FILE.get()
        (out if out is not None else sys.stderr).write(text)
        return len(text)

    def isatty(self) -> bool:
        return False


configure_logging("info", _ServerLogs())


def _exported() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(_EXPORTED_PREFIXES)}


class InProcessServer:
    """One service, wired by :func:`telha.service.wiring.run_service`, in a thread with its own
    event loop. ``with InProcessServer(config) as srv:`` starts it and stops it (if still
    running) when the block ends."""

    def __init__(self, config: Path) -> None:
        """``config``: a ``config.toml`` (:func:`tests.support.server.write_config`)."""
        self.config = config
        self.db = config.parent / "telha.db"
        self.log = config.parent / "serve.log"
        self._log_file: IO[str] | None = None
        self.base_url = ""
        self.grpc_addr = ""
        self._portal_cm: AbstractContextManager[anyio.from_thread.BlockingPortal] | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._shutdown: anyio.Event | None = None
        self._done: Future[None] | None = None
        self._env_before: dict[str, str] = {}
        # ``create_key``, ``worker_token``, ``worker_env``, ``spawn_worker``: the same code as
        # the subprocess server's (they read the config file and the store, not the process).
        self._files = ServerProcess(config)

    def __enter__(self) -> InProcessServer:
        if self._done is None or self._done.done():
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def start(self) -> InProcessServer:
        """Start the service and wait until it is ready (its addresses known).

        :raises RuntimeError: not ready within ``READY_TIMEOUT_S``.
        :raises Exception: whatever :func:`telha.service.wiring.run_service` raised starting.
        """
        cfg, base_dir = load_config(self.config, environ={})
        self._env_before = _exported()
        self._log_file = self.log.open("a", encoding="utf-8", buffering=1)
        self._portal_cm = anyio.from_thread.start_blocking_portal("asyncio")
        self._portal = self._portal_cm.__enter__()
        try:
            self._shutdown = self._portal.call(anyio.Event)
            self._done, (rest, grpc) = self._portal.start_task(
                self._run, cfg, base_dir, self._shutdown, self._log_file, name=str(self.config)
            )
        except BaseException:
            self._close_portal()
            raise
        LOANED_ENV.update(set(_exported()) - set(self._env_before))
        self.base_url = f"http://{rest}"
        self.grpc_addr = self._files.grpc_addr = grpc
        return self

    @staticmethod
    async def _run(
        cfg: Config,
        base_dir: Path,
        shutdown: anyio.Event,
        log_file: IO[str],
        *,
        task_status: anyio.abc.TaskStatus[tuple[str, str]],
    ) -> None:
        """The service in a task group of the portal's loop, logging to ``log_file``; ready
        within the timeout."""
        _LOG_FILE.set(log_file)  # this task's context: every task and thread it starts
        async with anyio.create_task_group() as tg:
            with anyio.fail_after(READY_TIMEOUT_S):
                addrs = await tg.start(partial(run_service, cfg, base_dir, shutdown))
            task_status.started(addrs)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """A graceful shutdown (what SIGTERM starts in ``telha serve``); 0 once every actor
        has stopped (``sig`` is accepted for :class:`ServerProcess`'s signature only).

        :raises Exception: what the service raised while running or stopping.
        :raises TimeoutError: not stopped within ``timeout`` seconds.
        """
        del sig
        if self._done is None or self._portal is None or self._shutdown is None:
            return 0
        if not self._done.done():
            self._portal.call(self._shutdown.set)
        try:
            self._done.result(timeout)
        finally:
            self._close_portal()
        return 0

    def kill(self) -> None:
        """Cancel the service at once if it still runs (no drain)."""
        if self._done is not None and not self._done.done():
            self._done.cancel()
        self._close_portal()

    def _close_portal(self) -> None:
        if self._portal_cm is not None:
            cm, self._portal_cm, self._portal = self._portal_cm, None, None
            try:
                cm.__exit__(None, None, None)
            finally:
                for key in set(_exported()) - set(self._env_before):
                    del os.environ[key]
                    LOANED_ENV.discard(key)
                os.environ.update(self._env_before)
                if self._log_file is not None:
                    self._log_file.close()
                    self._log_file = None

    def log_text(self) -> str:
        """What the server logged (JSON lines), as :meth:`ServerProcess.log_text`."""
        return self.log.read_text(encoding="utf-8", errors="replace")

    def create_key(self, tenant: str, org: str, principals: tuple[str, ...] | None = None) -> str:
        """:meth:`ServerProcess.create_key`: a key minted straight into the store."""
        return self._files.create_key(tenant, org, principals)

    def worker_token(self, scope: Scope | None, ttl_s: int = 3600) -> str:
        """:meth:`ServerProcess.worker_token`: a worker token signed with the key file."""
        return self._files.worker_token(scope, ttl_s)

    def worker_env(self, scope: Scope | None, **extra: str) -> dict[str, str]:
        """:meth:`ServerProcess.worker_env`: a remote worker's environment (without the
        settings this process exported for its own in-process workers)."""
        return self._files.worker_env(scope, **extra)

    def spawn_worker(
        self, module: str, scope: Scope | None, stderr: Any = subprocess.DEVNULL, **extra: str
    ) -> subprocess.Popen[bytes]:
        """:meth:`ServerProcess.spawn_worker`: a real ``workers_common.run`` process."""
        return self._files.spawn_worker(module, scope, stderr, **extra)


#: Either kind of test server (what fixtures and helpers accept).
Server = ServerProcess | InProcessServer
