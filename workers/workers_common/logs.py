"""Structured logs shared by core and workers (structlog over stdlib ``logging``).

One configuration for ``telha serve`` and ``python -m workers_common.run``: JSON lines on
stderr unless it is a terminal (then structlog's console renderer), every line with
``event``, ``level``, ``logger``, ``timestamp``, plus whatever is bound in structlog's
contextvars — :func:`bound_job` binds the job fields (``job_id``, ``kind``, ``source_id``,
``attempt``, ``tenant_id``, ``organization_id``) around the handling of one job, so no call
site repeats them.

Nothing secret or content-bearing is logged on purpose; :func:`redact` is the backstop: any
key named like a credential or like content (``api_key``, ``authorization``, ``token``,
``content``, ``content_b64``, …) has its value replaced by ``"[redacted]"``, at the top level
and one level down in dict values.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

import msgspec
import structlog

from telha_proto.telha.worker.v1 import JobPayload

__all__ = [
    "QUIET_LOGGERS",
    "REDACTED",
    "bound_job",
    "configure_logging",
    "is_secret_key",
    "job_fields",
    "payload_fields",
    "redact",
    "redact_url",
]

REDACTED = "[redacted]"

_SECRET_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "x_api_key",
        "authorization",
        "auth",
        "token",
        "worker_token",
        "bearer",
        "password",
        "secret",
        "content",
        "content_b64",
        "contentbase64",
        "content_base64",
        "raw",
        "body",
        "payload",
        "payload_json",
        "result_json",
        "canonical_text",
        "canonicaltext",
    }
)
_SECRET_SUFFIXES = ("_token", "_api_key", "_secret", "_password", "_b64", "_content")


#: Libraries whose DEBUG lines carry values: aiosqlite prints each call with its SQL
#: parameters (content), hpack/h2 decoded headers (``authorization: Bearer <token>``),
#: httpcore/h11/multipart request bytes. They log at INFO or above whatever the level.
QUIET_LOGGERS = ("aiosqlite", "hpack", "h2", "h11", "httpcore", "httpx", "grpclib", "multipart",
                 "python_multipart")  # fmt: skip


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """Whether a log field named ``key`` may hold a credential or document content
    (case-insensitive; ``-`` counts as ``_``): its value is never written. Remembered per
    key (a line's field names repeat; bench/log_line.py)."""
    k = key.lower().replace("-", "_")
    return k in _SECRET_KEYS or k.endswith(_SECRET_SUFFIXES)


def redact_url(url: str) -> str:
    """``url`` fit for a log line (docs/operations.md, "Logs"): its userinfo removed, each
    query value (a query part without ``=``: the part) replaced by :data:`REDACTED`, its
    fragment dropped; scheme, host, port and path kept. Never raises: a URL that does not
    split keeps what comes before its ``?`` or ``#``, without anything up to an ``@``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        head = re.split(r"[?#]", url, maxsplit=1)[0]
        return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*:/*)[^/]*@", r"\1", head)
    query = "&".join(
        f"{k}={REDACTED}" if sep else REDACTED
        for k, sep, _ in (p.partition("=") for p in parts.query.split("&") if p)
    )
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


@functools.lru_cache(maxsize=4096)
def _is_url_key(key: str) -> bool:
    k = key.lower()
    return k == "url" or k.endswith("_url")


def redact(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
    """structlog processor: replace the values of secret-named keys (:func:`is_secret_key`)
    by :data:`REDACTED`, at the top level and inside dict values one level down; a string
    under ``url`` or ``*_url`` is written as :func:`redact_url` gives it."""
    for key, value in list(event_dict.items()):
        if is_secret_key(key):
            event_dict[key] = REDACTED
        elif isinstance(value, str) and _is_url_key(key):
            event_dict[key] = redact_url(value)
        elif isinstance(value, dict) and any(isinstance(k, str) for k in value):
            event_dict[key] = {
                k: REDACTED if isinstance(k, str) and is_secret_key(k) else v
                for k, v in value.items()
            }
    return event_dict


def job_fields(
    *,
    job_id: str,
    kind: str,
    source_id: str | None,
    attempt: int,
    tenant_id: str,
    organization_id: str,
) -> dict[str, Any]:
    """The fields every log line about a job carries. ``attempt`` is 1-based: the attempt
    the line is about (failed attempts before it + 1); ids are canonical UUID strings."""
    return {
        "job_id": job_id,
        "kind": kind,
        "source_id": source_id,
        "attempt": attempt,
        "tenant_id": tenant_id,
        "organization_id": organization_id,
    }


class _PayloadHead(msgspec.Struct):
    """The one field of core's ``IngestJobPayload`` a log line needs."""

    source_id: str | None = None


_HEAD = msgspec.json.Decoder(_PayloadHead)


def payload_fields(payload: JobPayload) -> dict[str, Any]:
    """:func:`job_fields` of a leased job as a worker receives it; ``source_id`` from the
    payload JSON (msgspec skips the other fields, base64 content included, without building
    them), ``None`` when the payload has none or is not an object."""
    try:
        source_id = _HEAD.decode(payload.payload_json).source_id
    except msgspec.DecodeError:
        source_id = None
    return job_fields(
        job_id=payload.job_id,
        kind=payload.kind,
        source_id=source_id,
        attempt=payload.attempts + 1,
        tenant_id=payload.tenant_id,
        organization_id=payload.organization_id,
    )


@contextmanager
def bound_job(**fields: Any) -> Iterator[None]:
    """Bind ``fields`` (see :func:`job_fields`) in structlog's contextvars for the block:
    every line logged in this task (and in threads anyio starts from it) carries them; the
    previous values come back on exit. Not for async generators, whose context is their
    consumer's."""
    with structlog.contextvars.bound_contextvars(**fields):
        yield


def configure_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """Route structlog and stdlib logging to ``stream`` (default stderr), one event a line.

    JSON lines unless the stream is a terminal; each line has ``event``, ``level``,
    ``logger``, ``timestamp`` (ISO 8601, UTC), the bound contextvars and the call's fields,
    secret-named fields redacted (:func:`redact`).

    :raises ValueError: ``level`` is not a ``logging`` level name.
    """
    out = stream or sys.stderr
    renderer: structlog.types.Processor
    if out.isatty():
        renderer = structlog.dev.ConsoleRenderer()
    else:
        renderer = structlog.processors.JSONRenderer()
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact,
    ]
    structlog.configure(
        # An event below its logger's level is dropped before the chain runs (a ``debug``
        # line per job cost ~1% of the server's CPU at the default level; bench/RESULTS.md).
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
            foreign_pre_chain=shared,
        )
    )
    # No line renders where a record was logged from (file, line, function): the stdlib need
    # not walk the stack for each record (the logging HOWTO's "Optimization"; bench/log_line.py).
    # Thread and process ids stay: a library's own handler may format them with ``%d``
    # (hypercorn's default error log does), which fails on ``None``.
    logging._srcfile = None
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    floor = max(root.level, logging.INFO)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(floor)
