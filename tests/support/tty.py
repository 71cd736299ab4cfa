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


class TtyProcess:
    """A command running on a pseudo-terminal that a test reads as it goes (wait for some
    output, then send it a signal, say), then finishes.

    Use as ``with TtyProcess(args, env) as p: p.read_until("enqueued"); ...``; the process
    is killed if it still runs when the block ends."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: str | None = None) -> None:
        self._master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, close_fds=True
        )
        os.close(slave)
        self._out = bytearray()
        self._closed = False

    @property
    def output(self) -> str:
        """Everything written so far (``\\r\\n`` back to ``\\n``)."""
        return self._out.decode("utf-8", "replace").replace("\r\n", "\n")

    def _read(self, timeout_s: float) -> bool:
        """Read what is there within ``timeout_s``; ``False`` once the terminal closed."""
        if self._closed:
            return False
        ready, _, _ = select.select([self._master], [], [], timeout_s)
        if not ready:
            return True
        try:
            data = os.read(self._master, 65536)
        except OSError:  # EIO: the other side closed
            data = b""
        if not data:
            self._closed = True
            return False
        self._out += data
        return True

    def read_until(self, text: str, timeout_s: float = 30) -> str:
        """Read until the output holds ``text``; the output so far.

        :raises TimeoutError: not within ``timeout_s`` (or the terminal closed first)."""
        deadline = time.monotonic() + timeout_s
        while text not in self.output:
            if time.monotonic() > deadline or not self._read(0.2):
                raise TimeoutError(f"{text!r} not seen; output so far:\n{self.output}")
        return self.output

    def finish(self, timeout_s: float = 60) -> tuple[int, str]:
        """Read to the end; the exit code and all the output."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._read(0.5):
            if self.proc.poll() is not None and not select.select([self._master], [], [], 0)[0]:
                break
        return self.proc.wait(timeout=max(1.0, deadline - time.monotonic())), self.output

    def __enter__(self) -> TtyProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self._master)
