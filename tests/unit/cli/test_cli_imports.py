"""What starting the ``telha`` command line imports: the command modules and the client,
never the server's stack (the store, the service, the gRPC stubs, the log stack, JWT),
which ``serve``, ``migrate``, ``check`` and the store commands import when they run."""

from __future__ import annotations

import subprocess
import sys

#: Modules a client command or ``telha --help`` must not import.
SERVER_STACK = (
    "telha.storage",
    "telha.service",
    "telha.logs",
    "telha.retention",
    "telha.service.supervisor",
    "telha.tokens",
    "workers_common.consumer",
    "telha_proto",
    "structlog",
    "jwt",
)

_PROBE = """
import sys
import telha.cli.main
print("\\n".join(sorted(sys.modules)))
"""


def _imported(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(out.stdout.split())


def test_cli_start_imports_no_server_stack() -> None:
    imported = _imported(_PROBE)
    assert "telha.cli.ingest" in imported  # the commands are all registered
    heavy = sorted(m for m in imported if m.startswith(SERVER_STACK))
    assert heavy == []


def test_workers_common_submodule_skips_the_consumer() -> None:
    imported = _imported("import sys, workers_common.destinations; print(*sys.modules)")
    assert "workers_common.destinations" in imported
    assert "workers_common.consumer" not in imported


def test_workers_common_consumer_names_resolve() -> None:
    import workers_common
    from workers_common.consumer import HEARTBEAT_INTERVAL_SECS, WorkerConsumer

    assert workers_common.WorkerConsumer is WorkerConsumer
    assert workers_common.HEARTBEAT_INTERVAL_SECS == HEARTBEAT_INTERVAL_SECS
