"""``Job``: what a handler sees of a leased job, and how it reaches the raw bytes.

Small inputs arrive inline in the job payload (``content_b64``); large uploads are referenced
by content hash and fetched by the consumer, before the handler runs, with the streaming
``FetchContent`` RPC into a spool file (``raw_path``). Handlers that can work from a file
(polars, docling) use :meth:`Job.local_path` or :meth:`Job.open` and never hold the whole
input in memory; :attr:`Job.content` reads everything.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["Job"]


@dataclass(frozen=True, slots=True)
class Job:
    """A leased job.

    :ivar raw: the raw bytes when they came inline, else ``None``.
    :ivar raw_path: the spool file holding the raw bytes when they were fetched (removed by
        the consumer after the job), else ``None``. At most one of ``raw``/``raw_path`` is set;
        neither for fetch formats (``web``), whose worker fetches ``name`` itself.
    :ivar content_hash: BLAKE3 hex of the raw bytes (``None`` for fetch formats).
    :ivar root_node_id: for a child job a parent links to, the id its projection root gets
        (core assigns it to the first node when the handler supplies no id there; a handler
        whose root has a deterministic id of its own uses this one instead), else ``None``.
    """

    job_id: str
    kind: str
    format: str
    name: str
    raw: bytes | None
    content_hash: str | None
    options: dict[str, Any]
    attempts: int
    tenant_id: str
    organization_id: str
    raw_path: Path | None = None
    root_node_id: str | None = None

    @property
    def size(self) -> int:
        """Bytes of raw content."""
        if self.raw_path is not None:
            return self.raw_path.stat().st_size
        return len(self.raw or b"")

    @property
    def content(self) -> bytes:
        """All raw bytes in memory; prefer :meth:`open`/:meth:`local_path` for large inputs."""
        if self.raw_path is not None:
            return self.raw_path.read_bytes()
        return self.raw or b""

    def open(self) -> BinaryIO:
        """The raw bytes as a binary file object (the caller closes it)."""
        if self.raw_path is not None:
            return self.raw_path.open("rb")
        return io.BytesIO(self.raw or b"")

    @contextmanager
    def local_path(self) -> Iterator[Path]:
        """A file path holding the raw bytes for the duration of the ``with`` block: the spool
        file itself, or a temporary copy of inline bytes (removed on exit)."""
        if self.raw_path is not None:
            yield self.raw_path
            return
        fd, name = tempfile.mkstemp(prefix="telha-raw-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(self.raw or b"")
            yield Path(name)
        finally:
            os.unlink(name)
