"""The failure taxonomy (docs/worker-protocol.md, "Failures"): handlers raise a typed
:class:`WorkerFailure`; anything else escaping a handler is ``transient``.

:func:`classify` is the only place an exception becomes a failure kind.
"""

from __future__ import annotations

import math
from typing import ClassVar

__all__ = [
    "FAILURE_REASON_MAX_BYTES",
    "RETRY_AFTER_MARK",
    "CorruptInput",
    "ResourceLimit",
    "TransientFailure",
    "UnsupportedFeature",
    "WorkerFailure",
    "classify",
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


def classify(exc: BaseException) -> tuple[str, bool, str]:
    """``(failure_reason, permanent, kind)`` for an exception that escaped a handler.

    ``failure_reason`` is ``"{kind}: {detail}"`` cut to 512 UTF-8 bytes on a character
    boundary; untyped exceptions are ``transient`` with their type name in the detail. A
    retryable failure with ``retry_after_s`` ends in ``" (retry_after_s=N)"`` (N whole
    seconds, rounded up), kept whole however long the detail is.
    """
    mark = ""
    if isinstance(exc, WorkerFailure):
        kind, permanent, detail = exc.kind, exc.permanent, str(exc) or type(exc).__name__
        if exc.retry_after_s is not None and not permanent:
            mark = f" ({RETRY_AFTER_MARK}{max(0, math.ceil(exc.retry_after_s))})"
    else:
        kind, permanent, detail = "transient", False, f"{type(exc).__name__}: {exc}"
    room = FAILURE_REASON_MAX_BYTES - len(mark)
    reason = f"{kind}: {detail}".encode()[:room].decode("utf-8", "ignore") + mark
    return reason, permanent, kind
