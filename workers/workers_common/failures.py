"""The failure taxonomy (spec 000 "Failure taxonomy"): handlers raise a typed
:class:`WorkerFailure`; anything else escaping a handler is ``transient``.

:func:`classify` is the only place an exception becomes a failure kind.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "FAILURE_REASON_MAX_BYTES",
    "CorruptInput",
    "ResourceLimit",
    "TransientFailure",
    "UnsupportedFeature",
    "WorkerFailure",
    "classify",
]

#: The wire ``failure_reason`` is ``"{kind}: {detail}"`` capped at 512 UTF-8 bytes.
FAILURE_REASON_MAX_BYTES = 512


class WorkerFailure(Exception):
    """Base failure: ``kind`` goes on the wire; ``permanent`` kinds dead-letter at once."""

    kind: ClassVar[str] = "transient"
    permanent: ClassVar[bool] = False


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
    boundary; untyped exceptions are ``transient`` with their type name in the detail.
    """
    if isinstance(exc, WorkerFailure):
        kind, permanent, detail = exc.kind, exc.permanent, str(exc) or type(exc).__name__
    else:
        kind, permanent, detail = "transient", False, f"{type(exc).__name__}: {exc}"
    reason = f"{kind}: {detail}".encode()[:FAILURE_REASON_MAX_BYTES].decode("utf-8", "ignore")
    return reason, permanent, kind
