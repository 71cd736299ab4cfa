"""The supervision rule for stored rows (docs/architecture.md, "Supervision and bad rows"): a
stored row an actor cannot process is that row's failure, recorded with its reason, and the
actor goes on with the next row; only the store or the process failing escapes to the
supervisor, which restarts the actor.

This module is the one place that tells the two apart (:func:`is_row_error`); the storage
operations wrap each row's processing with it
(:func:`telha.storage.core.row_faults.per_row`) and the actors settle what comes out
(:mod:`telha.row_faults`).
"""

from __future__ import annotations

from collections.abc import Callable

from telha.domain.errors import TelhaError
from telha.domain.policy import FAILURE_REASON_MAX_BYTES

__all__ = ["FAULT_KIND", "RowFault", "fault_reason", "is_row_error"]

#: The failure kind of a job whose stored row cannot be processed (its ``failureReason`` is
#: ``"corrupt_row: {what}: {error}"``): permanent, the job is dead at once.
FAULT_KIND = "corrupt_row"


class RowFault(Exception):
    """One stored row could not be processed; the transaction that met it wrote nothing.

    :param what: the kind of row: ``"job"`` (a job row: the reaper, the eraser),
        ``"search_entry"`` (a version the full-text index is being filled with),
        ``"retention_job"`` (an ended job a retention pass examined).
    :param key: the row's key: a job id (16 bytes) for a job, ``(scope id, source id,
        version tx)`` for a search entry, the job id as stored for a retention job.
    :param reason: why, ``"{ExceptionType}: {message}"`` (at most 512 UTF-8 bytes with its
        kind prefix).
    """

    def __init__(self, what: str, key: object, reason: str) -> None:
        super().__init__(f"{what} {key!r}: {reason}")
        self.what = what
        self.key = key
        self.reason = reason


def fault_reason(exc: BaseException) -> str:
    """``"{ExceptionType}: {message}"`` of a row's error, cut on a character boundary so that
    ``"corrupt_row: " + reason`` fits a job's failure reason (512 UTF-8 bytes)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    room = FAILURE_REASON_MAX_BYTES - len(FAULT_KIND) - 2
    return text.encode("utf-8")[:room].decode("utf-8", "ignore")


def is_row_error(exc: BaseException, driver_failed: Callable[[BaseException], bool]) -> bool:
    """Whether ``exc``, raised while one stored row was being processed, is that row's fault
    (a value that does not decode, has the wrong type, is out of range, names something
    gone) rather than the store's or the process's.

    Never a row's fault: cancellation and other :class:`BaseException` s, a
    :class:`~telha.domain.errors.TelhaError` (typed outcomes such as a lost lease, and
    :class:`~telha.domain.errors.StorageError`: the driver failed), :class:`OSError`,
    :class:`MemoryError`, a :class:`RowFault` already made, and what the engine's
    ``driver_failed(exc)`` claims (a connection lost, a disk error; a driver's data errors
    are the row's). Everything else is.
    """
    if not isinstance(exc, Exception):
        return False
    if isinstance(exc, TelhaError | OSError | MemoryError | RowFault):
        return False
    return not driver_failed(exc)
