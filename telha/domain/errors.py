"""The error taxonomy of the core (docs/rest-api.md, "Errors").

Every error a client can see is a :class:`TelhaError` subclass carrying its REST code and HTTP
status; the REST front maps them once, at the edge, to ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "Conflict",
    "ContentErased",
    "ContentError",
    "Forbidden",
    "InvalidStream",
    "JobFinished",
    "NotFound",
    "OutOfSync",
    "PayloadTooLarge",
    "QuotaExceeded",
    "RateLimited",
    "RequestError",
    "RequestTimeout",
    "StaleLease",
    "StorageError",
    "TelhaError",
    "Unauthenticated",
    "Unavailable",
]


class TelhaError(Exception):
    """Root of the client-visible errors: ``code`` (REST error code) and ``http_status``."""

    code: ClassVar[str] = "INTERNAL"
    http_status: ClassVar[int] = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ContentError(TelhaError):
    """The submitted content cannot be ingested (malformed, wrong shape): 400 INVALID_CONTENT."""

    code = "INVALID_CONTENT"
    http_status = 400


class ContentErased(TelhaError):
    """The content (or the version asked for) was erased (GDPR erasure): its digest is on
    the scope's blocklist, or the version's text and spans are gone: 410 CONTENT_ERASED."""

    code = "CONTENT_ERASED"
    http_status = 410


class RequestError(TelhaError):
    """The request itself is malformed (fields, options, parameters): 400 INVALID_REQUEST."""

    code = "INVALID_REQUEST"
    http_status = 400


class RequestTimeout(TelhaError):
    """The request body sent no bytes for ``server.body_idle_timeout_s`` seconds: 408
    REQUEST_TIMEOUT; the connection is closed after the answer (docs/operations.md, "Slow
    and idle clients")."""

    code = "REQUEST_TIMEOUT"
    http_status = 408


class Unauthenticated(TelhaError):
    """Missing or unknown credentials: 401 UNAUTHENTICATED."""

    code = "UNAUTHENTICATED"
    http_status = 401


class Forbidden(TelhaError):
    """Known credentials that may not do this (a connector token ingesting as another
    connector, or as no connector): 403 FORBIDDEN."""

    code = "FORBIDDEN"
    http_status = 403


class NotFound(TelhaError):
    """No such resource in the caller's scope (other scopes' ids also land here): 404."""

    code = "NOT_FOUND"
    http_status = 404


class Conflict(TelhaError):
    """The resource is in a state that refuses the request (a source being erased cannot be
    retired): 409 CONFLICT."""

    code = "CONFLICT"
    http_status = 409


class JobFinished(Conflict):
    """A job that already ended ``completed`` or ``dead`` cannot be cancelled: 409
    JOB_FINISHED."""

    code = "JOB_FINISHED"


class PayloadTooLarge(TelhaError):
    """Request body over ``ingest.max_body_bytes``: 413 PAYLOAD_TOO_LARGE."""

    code = "PAYLOAD_TOO_LARGE"
    http_status = 413


class Unavailable(TelhaError):
    """The service is starting or shutting down, or every slot of a global limit is held
    (``ingest.max_concurrent``, ``server.max_event_streams``): 503 UNAVAILABLE."""

    code = "UNAVAILABLE"
    http_status = 503


class StaleLease(TelhaError):
    """A submission or heartbeat for a job the caller does not hold under the current lease
    generation (or that is no longer leased): gRPC ``FAILED_PRECONDITION``, nothing written."""

    code = "FAILED_PRECONDITION"
    http_status = 409


class OutOfSync(TelhaError):
    """A streamed submission whose ``seq`` matches neither the expected next one nor a replay
    of the last (docs/architecture.md, "Streaming"): gRPC ``ABORTED``; the worker restarts
    the job."""

    code = "ABORTED"
    http_status = 409


class InvalidStream(TelhaError):
    """A streamed partial that only storage can find invalid (an offset inside earlier text
    off a UTF-8 boundary): the job dead-letters as ``invalid_submission``."""

    code = "INVALID_SUBMISSION"
    http_status = 400


class StorageError(TelhaError):
    """The storage engine failed (disk full, corrupt file); wraps the driver error with ``from``."""

    code = "INTERNAL"
    http_status = 500


class QuotaExceeded(TelhaError):
    """A scope's quota refuses the request (docs/operations.md, "Quotas and rate limits"):
    its pending jobs or stored bytes are at the limit, or it holds its share of the ingest
    or event-stream slots. ``retry_after_s`` (seconds, or
    ``None``) becomes the ``Retry-After`` header when waiting can help."""

    code = "QUOTA_EXCEEDED"
    http_status = 429

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RateLimited(TelhaError):
    """The API key made more requests than its scope's ``requests_per_second`` and ``burst``
    allow; ``retry_after_s`` (seconds) until its next one is admitted (``Retry-After``)."""

    code = "RATE_LIMITED"
    http_status = 429

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s: float | None = retry_after_s
