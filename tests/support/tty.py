"""Running a command the way a person sees it: on a pseudo-terminal (colours and tables
included) or piped."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time


def run_on_tty(args: list[str], env: dict[str, str], timeout_s: float = 120) -> tuple[int, str]:
    """Run ``args`` with stdin, stdout and stderr on a pseudo-terminal; its exit code and
    everything it wrote there (``\\r\\n`` back to ``\\n``)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side closed
                break
            if not data:
                break
            out += data
    finally:
        os.close(master)
    return proc.wait(timeout=30), out.decode("utf-8", "replace").replace("\r\n", "\n")
