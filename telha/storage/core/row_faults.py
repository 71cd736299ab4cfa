"""A stored row's processing, written once for both engines (docs/architecture.md,
"Supervision and bad rows"): :func:`per_row` turns a row's error into a
:class:`~telha.domain.row_faults.RowFault` (the rule is
:func:`telha.domain.row_faults.is_row_error`); the transaction that met it rolls back, and
:mod:`telha.storage.core.failed_rows` records the row failed in a transaction of its own,
so the next pass goes on with the other rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from telha.domain.row_faults import RowFault, fault_reason, is_row_error
from telha.storage.core.tx import Rollback, Tx

__all__ = ["per_row"]


@contextmanager
def per_row(tx: Tx, what: str, key: object, context: str = "") -> Iterator[None]:
    """Run one stored row's processing: an error that is the row's fault
    (:func:`~telha.domain.row_faults.is_row_error`, with the engine's
    :meth:`~telha.storage.core.tx.Tx.driver_failed`) leaves as a :class:`RowFault` naming
    ``what`` and ``key``; anything else (a lost lease, the driver failing, a
    :class:`~telha.storage.core.tx.Rollback`, cancellation) leaves unchanged. ``context``
    (e.g. ``"step nodes"``) starts the fault's reason.

    :raises RowFault: the row's processing failed (chained to the error, ``from``).
    """
    try:
        yield
    except Exception as exc:
        if isinstance(exc, Rollback) or not is_row_error(exc, tx.driver_failed):
            raise
        reason = f"{context}: {fault_reason(exc)}" if context else fault_reason(exc)
        raise RowFault(what, key, reason) from exc
