"""The failure taxonomy (docs/worker-protocol.md, "Failures"): handlers raise a typed
:class:`WorkerFailure`; an untyped exception escaping a handler is classified by
:func:`input_caused`, the one rule for what retrying cannot help.

:func:`classify` is the only place an exception becomes a failure kind.
"""

from __future__ import annotations

import email.errors
import errno
import math
import struct
import zlib
from typing import ClassVar

__all__ = [
    "FAILURE_REASON_MAX_BYTES",
    "RETRY_AFTER_MARK",
    "CorruptInput",
    "ResourceLimit",
    "TransientFailure",
    "UnsupportedFeature",
    "WorkerFailure",
    "as_failure",
    "classify",
    "input_caused",
]

#: The wire ``failure_reason`` is ``"{kind}: {detail}"`` capped at 512 UTF-8 bytes.
FAILURE_REASON_MAX_BYTES = 512


#: How a retry delay rides on the wire: a ``failure_reason`` ending in ``(retry_after_s=N)``
#: asks core to wait at least ``N`` seconds (still capped by ``jobs.backoff_max_s``).
RETRY_AFTER_MARK = "retry_after_s="


class WorkerFailure(Exception):
    """Base failure: ``kind`` goes on the wire; ``permanent`` kinds dead-letter at once.

    :param retry_after_s: the least delay in seconds before a retry (an HTTP ``Retry-After``);
        core takes the larger of it and its own backoff. Ignored for permanent kinds.
    """

    kind: ClassVar[str] = "transient"
    permanent: ClassVar[bool] = False

    def __init__(self, *args: object, retry_after_s: float | None = None) -> None:
        super().__init__(*args)
        self.retry_after_s = retry_after_s


class TransientFailure(WorkerFailure):
    """Might work next time (a timeout, a busy dependency): retried with backoff."""


class ResourceLimit(WorkerFailure):
    """Over a size, page, memory or time limit: retried with backoff up to max attempts."""

    kind = "resource_limit"


class CorruptInput(WorkerFailure):
    """The bytes cannot be parsed as their format: dead-lettered at once."""

    kind = "corrupt_input"
    permanent = True


class UnsupportedFeature(WorkerFailure):
    """Valid input using something this worker does not handle: dead-lettered at once."""

    kind = "unsupported_feature"
    permanent = True


#: Exception types a parser raises because of the bytes it reads: decoding and lookups
#: (``UnicodeError`` and ``json.JSONDecodeError`` are ``ValueError``\ s; ``LookupError``
#: covers an unknown codec name, ``KeyError`` and ``IndexError``), syntax errors (XML parsers'
#: ``ParseError``), arithmetic on read values, truncated streams (``EOFError``), binary
#: layouts (``struct.error``, ``zlib.error``) and mail structure (``email.errors``).
INPUT_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    LookupError,
    SyntaxError,
    ArithmeticError,
    EOFError,
    RecursionError,
    struct.error,
    zlib.error,
    email.errors.MessageError,
)

#: Top-level packages whose exceptions are parser/schema errors about their input, whatever
#: their type (polars' ``SchemaError``/``ComputeError``, openpyxl's and pdfium's errors,
#: tree-sitter, lxml, extract-msg, olefile, docling), and those raised from inside one of them
#: (an ``AttributeError`` a parser hits on a malformed element is still about the bytes).
PARSER_PACKAGES = frozenset(
    {
        "polars",
        "openpyxl",
        "pypdfium2",
        "pypdfium2_raw",
        "docling",
        "docling_core",
        "docling_parse",
        "docx",
        "pptx",
        "tree_sitter",
        "lxml",
        "bs4",
        "extract_msg",
        "olefile",
        "compressed_rtf",
        "RTFDE",
        "zipfile",
        "tarfile",
        "xml",
        "email",
        "csv",
        "charset_normalizer",
        "PIL",
    }
)

#: Top-level packages of the service's own I/O (network, store, the browser, the pool):
#: their exceptions are about availability, never about the bytes.
SERVICE_PACKAGES = frozenset(
    {"grpclib", "h2", "httpx", "httpcore", "aiosqlite", "sqlite3", "asyncpg", "psycopg",
     "anyio", "playwright"}
)  # fmt: skip


def _package(obj: object) -> str:
    return (getattr(obj, "__module__", None) or "").split(".", 1)[0]


def _raised_in(exc: BaseException) -> str:
    """Top-level package of the innermost frame that raised ``exc`` (``""`` if unknown)."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    name = tb.tb_frame.f_globals.get("__name__", "")
    return str(name).split(".", 1)[0]


def input_caused(exc: BaseException) -> bool | None:
    """The one classification rule for an untyped exception (docs/worker-protocol.md,
    "Failures"): ``True`` when it is a function of the input (retrying cannot help: a
    permanent ``corrupt_input``), ``False`` when it is about the service itself (its own I/O,
    a timeout, unavailability: ``transient``), ``None`` when it is neither (a bug or an
    unknown library error: ``transient``, as before, so a flaky dependency still retries).

    * transient: ``TimeoutError``, ``ConnectionError``, an ``OSError`` carrying an ``errno``
      (a system call failed: the disk, the network), anything a service package raised
      (:data:`SERVICE_PACKAGES`).
    * input: :data:`INPUT_ERRORS`, an ``OSError`` without ``errno`` (a decoder's complaint
      about a truncated or malformed file, e.g. ``gzip.BadGzipFile``, a truncated image) or
      with ``EINVAL`` (a seek to an offset read from a corrupt header, as ``zipfile`` does), an
      exception of a parser package (:data:`PARSER_PACKAGES`) or raised from inside one.

    ``MemoryError`` is neither here: :func:`classify` makes it a ``resource_limit``.
    """
    if isinstance(exc, TimeoutError | ConnectionError):
        return False
    if _package(type(exc)) in SERVICE_PACKAGES:
        return False
    if isinstance(exc, OSError):
        if exc.errno == errno.EINVAL:  # a seek/read with an offset the bytes gave
            return True
        return exc.errno is None and getattr(exc, "winerror", None) is None
    if isinstance(exc, MemoryError | SystemExit | KeyboardInterrupt):
        return None
    if isinstance(exc, INPUT_ERRORS):
        return True
    if _package(type(exc)) in PARSER_PACKAGES or _raised_in(exc) in PARSER_PACKAGES:
        return True
    return None


def as_failure(exc: BaseException) -> WorkerFailure:
    """``exc`` as a typed :class:`WorkerFailure` of the kind :func:`classify` gives it (itself
    when already typed), its detail ``"{type}: {message}"``. For code that must carry a
    failure across a process boundary, where the traceback :func:`input_caused` reads is
    lost (the docling child, a pool process)."""
    if isinstance(exc, WorkerFailure):
        return exc
    _, permanent, kind = classify(exc)
    cls: type[WorkerFailure] = (
        CorruptInput
        if permanent
        else ResourceLimit
        if kind == "resource_limit"
        else TransientFailure
    )
    return cls(f"{type(exc).__name__}: {exc}")


def classify(exc: BaseException) -> tuple[str, bool, str]:
    """``(failure_reason, permanent, kind)`` for an exception that escaped a handler.

    ``failure_reason`` is ``"{kind}: {detail}"`` cut to 512 UTF-8 bytes on a character
    boundary. An untyped exception is ``corrupt_input`` (permanent) when
    :func:`input_caused` says the input caused it, ``resource_limit`` for ``MemoryError``,
    otherwise ``transient``; its detail starts with its type name. A retryable failure with
    ``retry_after_s`` ends in ``" (retry_after_s=N)"`` (N whole seconds, rounded up), kept
    whole however long the detail is.
    """
    mark = ""
    if isinstance(exc, WorkerFailure):
        kind, permanent, detail = exc.kind, exc.permanent, str(exc) or type(exc).__name__
        if exc.retry_after_s is not None and not permanent:
            mark = f" ({RETRY_AFTER_MARK}{max(0, math.ceil(exc.retry_after_s))})"
    else:
        detail = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, MemoryError):
            kind, permanent = ResourceLimit.kind, False
        elif input_caused(exc):
            kind, permanent = CorruptInput.kind, True
        else:
            kind, permanent = "transient", False
    room = FAILURE_REASON_MAX_BYTES - len(mark)
    reason = f"{kind}: {detail}".encode()[:room].decode("utf-8", "ignore") + mark
    return reason, permanent, kind
