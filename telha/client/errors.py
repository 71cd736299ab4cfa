"""The client's errors: one class per REST error code (docs/rest-api.md), under :class:`TelhaError`.

A response with an error body ``{"error": {"code", "message"}}`` raises the class of its code
(:func:`error_for`); a code this client does not know raises :class:`TelhaError` itself with
that code. Connection failures that outlast the retries raise :class:`ConnectionFailed`.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "Conflict",
    "ConnectionFailed",
    "ContentErased",
    "Forbidden",
    "InternalError",
    "InvalidContent",
    "InvalidRequest",
    "JobFinished",
    "NotFound",
    "PayloadTooLarge",
    "QuotaExceeded",
    "RateLimited",
    "RequestTimeout",
    "TelhaError",
    "TooManyRequests",
    "Unauthenticated",
    "Unavailable",
    "error_for",
]


class TelhaError(Exception):
    """An error answer of a Telha server.

    :ivar code: the REST error code (``NOT_FOUND``, …).
    :ivar status: the HTTP status (0: no answer at all).
    :ivar message: the server's message.
    """

    default_code: ClassVar[str] = "UNKNOWN"

    def __init__(self, message: str, *, status: int, code: str | None = None) -> None:
        super().__init__(f"{code or self.default_code} ({status}): {message}")
        self.code = code or self.default_code
        self.status = status
        self.message = message


class InvalidContent(TelhaError):
    """400: the content cannot be ingested (malformed, wrong shape)."""

    default_code = "INVALID_CONTENT"


class InvalidRequest(TelhaError):
    """400: a field, option or query parameter is wrong."""

    default_code = "INVALID_REQUEST"


class Unauthenticated(TelhaError):
    """401: no API key, or one the server does not know."""

    default_code = "UNAUTHENTICATED"


class Forbidden(TelhaError):
    """403: known credentials that may not do this (a connector token's limits)."""

    default_code = "FORBIDDEN"


class NotFound(TelhaError):
    """404: no such job, source, version or node in this key's scope."""

    default_code = "NOT_FOUND"


class Conflict(TelhaError):
    """409: the resource's state refuses the request (a source being erased cannot be
    retired)."""

    default_code = "CONFLICT"


class JobFinished(Conflict):
    """409 ``JOB_FINISHED``: the job to cancel already ended ``completed`` or ``dead``."""

    default_code = "JOB_FINISHED"


class ContentErased(TelhaError):
    """410: the content was erased (GDPR) and is refused for good."""

    default_code = "CONTENT_ERASED"


class PayloadTooLarge(TelhaError):
    """413: the body or upload is over the server's limit."""

    default_code = "PAYLOAD_TOO_LARGE"


class RequestTimeout(TelhaError):
    """408: the request's body sent nothing for the server's ``server.body_idle_timeout_s``
    (the connection stalled; not retried)."""

    default_code = "REQUEST_TIMEOUT"


class Unavailable(TelhaError):
    """503: the server is starting, stopping or at its ingest concurrency limit (retried)."""

    default_code = "UNAVAILABLE"


class InternalError(TelhaError):
    """500: the server failed (its log says why)."""

    default_code = "INTERNAL"


class TooManyRequests(TelhaError):
    """A ``429`` answer: a quota or rate limit of the key's scope refused the request.

    :ivar retry_after_s: the server's ``Retry-After`` in seconds, or ``None`` when waiting
        cannot help (a full storage quota). The client waits that long and retries.
    """

    default_code = "TOO_MANY_REQUESTS"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        if retry_after_s is not None:
            message = f"{message} (Retry-After: {retry_after_s:g} s)"
        super().__init__(message, status=status, code=code)
        self.retry_after_s = retry_after_s


class QuotaExceeded(TooManyRequests):
    """``QUOTA_EXCEEDED``: the scope's pending jobs or stored bytes are at its quota."""

    default_code = "QUOTA_EXCEEDED"


class RateLimited(TooManyRequests):
    """``RATE_LIMITED``: the key made more requests per second than its scope allows."""

    default_code = "RATE_LIMITED"


class ConnectionFailed(TelhaError):
    """No answer: the server could not be reached, or the connection broke (after retries)."""

    default_code = "CONNECTION_FAILED"


_BY_CODE: dict[str, type[TelhaError]] = {
    cls.default_code: cls
    for cls in (
        InvalidContent, InvalidRequest, Unauthenticated, Forbidden, NotFound, Conflict, JobFinished,
        ContentErased, PayloadTooLarge, RequestTimeout, Unavailable, InternalError,
    )
}  # fmt: skip


def error_for(
    status: int, code: str | None, message: str, retry_after_s: float | None = None
) -> TelhaError:
    """The exception for an error answer: the class of ``code``, else :class:`TelhaError`
    with ``code`` (or ``HTTP_<status>`` when the body had none); a ``429`` carries its
    ``Retry-After`` (seconds, or ``None``)."""
    if status == 429:
        limited = {"QUOTA_EXCEEDED": QuotaExceeded, "RATE_LIMITED": RateLimited}
        kind = limited.get(code or "", TooManyRequests)
        return kind(message, status=status, code=code, retry_after_s=retry_after_s)
    cls = _BY_CODE.get(code or "")
    if cls is not None:
        return cls(message, status=status)
    return TelhaError(message, status=status, code=code or f"HTTP_{status}")
