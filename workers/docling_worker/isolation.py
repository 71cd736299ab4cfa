"""Parsing in child processes (docs/formats.md: a crash, a memory
ceiling or a timeout costs one child, never the worker).

Each conversion runs in a warm child process (docling imported once per child, not per job)
started with ``spawn`` and an address-space ceiling (``RLIMIT_AS`` = ``mem_ceiling_mb``, POSIX).
The parent waits at most ``timeout_s`` for the answer. A child that dies, runs out of memory or
times out is discarded (killed) and replaced by a fresh one for the next job; the worker
process itself is never harmed by a hostile document.

Child exit codes (a child that dies instead of answering): 10 → ``corrupt_input``, 20 →
``unsupported_feature``, 30 → ``resource_limit`` (memory), any other (a signal, a crash) →
``transient``. A typed failure the child can report (encrypted, corrupt, …) comes back over the
pipe with its kind and keeps the child alive.

Settings come from the environment (``telha serve`` exports its ``[docling]`` section there for
in-process workers; a remote worker reads the same names): ``TELHA_DOCLING__MEM_CEILING_MB``
(default 4096), ``TELHA_DOCLING__TIMEOUT_S`` (600), ``TELHA_DOCLING__MAX_PAGES`` (2000), and
``TELHA_DOCLING__ARTIFACTS_PATH`` (read by :mod:`docling_worker.convert` in the child).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from workers_common import (
    CorruptInput,
    ResourceLimit,
    TransientFailure,
    UnsupportedFeature,
    WorkerFailure,
)
from workers_common.failures import as_failure

__all__ = ["ChildPool", "Limits", "limits_from_env", "pool"]

_EXIT_KINDS: dict[int, type[WorkerFailure]] = {
    10: CorruptInput,
    20: UnsupportedFeature,
    30: ResourceLimit,
}
_KINDS: dict[str, type[WorkerFailure]] = {
    "corrupt_input": CorruptInput,
    "unsupported_feature": UnsupportedFeature,
    "resource_limit": ResourceLimit,
    "transient": TransientFailure,
}


@dataclass(frozen=True, slots=True)
class Limits:
    """Ceilings of one conversion: address space (MB), wall time (s), pages."""

    mem_ceiling_mb: int = 4096
    timeout_s: float = 600.0
    max_pages: int = 2000


def limits_from_env(environ: dict[str, str] | None = None) -> Limits:
    """:class:`Limits` from ``TELHA_DOCLING__*`` (module docstring); defaults otherwise.

    :raises ValueError: a value that is not a positive number.
    """
    env = os.environ if environ is None else environ
    values = Limits()
    mem = int(env.get("TELHA_DOCLING__MEM_CEILING_MB", values.mem_ceiling_mb))
    timeout = float(env.get("TELHA_DOCLING__TIMEOUT_S", values.timeout_s))
    pages = int(env.get("TELHA_DOCLING__MAX_PAGES", values.max_pages))
    if mem <= 0 or timeout <= 0 or pages <= 0:
        raise ValueError("TELHA_DOCLING__* limits must be positive")
    return Limits(mem, timeout, pages)


def _child_main(conn: Connection, mem_ceiling_mb: int) -> None:
    """Child loop: set the ceiling, import docling once, answer requests until EOF."""
    try:
        import resource

        limit = mem_ceiling_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # not POSIX: the timeout is the backstop
        pass
    try:
        import msgspec

        from docling_worker.convert import pdf_pipeline
        from docling_worker.cut_short import note_cut_pdf
        from docling_worker.html5 import note_lost_body
        from docling_worker.ocr import annotate, ocr_settings
        from docling_worker.ocr_sources import parse
        from docling_worker.pdf_text import pdf_text_document
        from docling_worker.projection import project_document
    except MemoryError:
        os._exit(30)
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        path, fmt, name, clarify, max_pages, links, ocr, extractor = request
        try:
            if extractor == "pypdfium2":  # docling_worker.pdf_text
                doc, ocr_run = pdf_text_document(Path(path), max_pages), None
            else:
                doc, ocr_run = parse(Path(path), fmt, name, max_pages, ocr)
            projected = project_document(
                doc, name, fmt, clarify=clarify, pdf_pipeline=pdf_pipeline(), links=links,
                extractor=extractor,
            )  # fmt: skip
            if ocr_run is not None:
                annotate(projected, ocr_run, ocr_settings().min_confidence)
            if fmt == "html":
                note_lost_body(projected, Path(path).read_bytes())
            elif fmt == "pdf":
                note_cut_pdf(projected, Path(path))
            body = msgspec.json.encode(projected)
            conn.send(("ok", body))
        except MemoryError:
            os._exit(30)
        except Exception as exc:  # typed here: the traceback does not cross the pipe
            failure = as_failure(exc)
            conn.send((failure.kind, str(failure)))


class _Child:
    """One warm child process and the parent's end of its pipe."""

    def __init__(self, mem_ceiling_mb: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(
            target=_child_main, args=(child_conn, mem_ceiling_mb), daemon=True,
            name="telha-docling",
        )  # fmt: skip
        self.proc.start()
        child_conn.close()

    def run(self, request: tuple[Any, ...], timeout_s: float) -> bytes:
        """Send one request and wait for its answer.

        :raises WorkerFailure: the typed failure the child reported, or the one its death or
            the timeout maps to (the child is then dead; the caller discards it).
        """
        self.conn.send(request)
        if not self.conn.poll(timeout_s):
            self.kill()
            raise ResourceLimit(f"timeout: the parse took over {timeout_s:g} s")
        try:
            answer = self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            code = self.proc.exitcode
            failure = _EXIT_KINDS.get(code or 0, TransientFailure)
            what = "out of memory" if code == 30 else f"exit code {code}"
            raise failure(f"the parser process died ({what})") from None
        kind, payload = answer
        if kind == "ok":
            return bytes(payload)
        raise _KINDS.get(kind, TransientFailure)(payload)

    @property
    def alive(self) -> bool:
        return self.proc.is_alive()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5)
        self.conn.close()


class ChildPool:
    """Warm children, at most ``size`` at once; a job borrows one (waiting when all are busy).

    :param size: children at most (one per concurrent job of this worker process).
    """

    def __init__(self, limits: Limits, size: int = 2) -> None:
        self.limits = limits
        self._idle: queue.LifoQueue[_Child] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)

    @contextmanager
    def child(self) -> Iterator[_Child]:
        """A live child for one job; returned to the pool after it, or discarded if it died."""
        with self._slots:
            try:
                child = self._idle.get_nowait()
            except queue.Empty:
                child = _Child(self.limits.mem_ceiling_mb)
            if not child.alive:
                child = _Child(self.limits.mem_ceiling_mb)
            try:
                yield child
            finally:
                if child.alive:
                    self._idle.put(child)

    def convert(
        self,
        path: Path,
        fmt: str,
        name: str,
        *,
        clarify: bool,
        links: bool = False,
        ocr: str = "auto",
        extractor: str | None = None,
    ) -> bytes:
        """The submission JSON for the document at ``path``, parsed in a child (``links``:
        with the hyperlink sidecar of :func:`docling_worker.projection.project_document`;
        ``ocr``: ``options.ocr``, see :func:`docling_worker.ocr_sources.parse`;
        ``extractor="pypdfium2"``: a PDF read by :mod:`docling_worker.pdf_text` instead).

        :raises WorkerFailure: the typed failure of the parse (see the module docstring).
        """
        request = (str(path), fmt, name, clarify, self.limits.max_pages, links, ocr, extractor)
        with self.child() as child:
            return child.run(request, self.limits.timeout_s)


_POOL: ChildPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> ChildPool:
    """The process's pool (created on first use from :func:`limits_from_env`)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ChildPool(limits_from_env())
        return _POOL
