"""How a supervised actor settles a stored row it cannot process (docs/architecture.md,
"Supervision and bad rows"): the row is recorded failed with its reason
(:meth:`~telha.storage.core.operations.SharedOps.fail_row`), counted in
``telha_rows_failed{actor, what}``, and the actor goes on with the next row. Only what
:func:`telha.domain.row_faults.is_row_error` calls the store's or the process's failure
escapes to the :class:`~telha.service.supervisor.Supervisor`, which restarts the actor.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from telha.domain.ids import now_us
from telha.domain.row_faults import RowFault
from telha.metrics import Metrics
from telha.storage.protocol import RowFaultStore

__all__ = ["past_bad_rows", "settle"]

T = TypeVar("T")

#: Most faulty rows one call of :func:`past_bad_rows` settles before it leaves the rest to
#: the actor's next pass (a bound on one pass, not on the rows ever settled).
MAX_FAULTS_PER_PASS = 100


async def settle(store: RowFaultStore, fault: RowFault, metrics: Metrics, actor: str) -> bool:
    """Record ``fault``'s row failed (logged ``row_failed`` by the store) and count it;
    ``False`` when the store had nothing to write (the row changed meanwhile, or a row kind
    that is only logged).

    :raises telha.domain.errors.StorageError: the store failed (the actor's supervisor
        restarts it).
    """
    done = await store.fail_row(fault, now_us=now_us())
    metrics.rows_failed.labels(actor, fault.what).inc()  # once recorded and logged
    return done


async def past_bad_rows(
    op: Callable[[], Awaitable[T]],
    store: RowFaultStore,
    metrics: Metrics,
    actor: str,
    *,
    default: T,
    on_fault: Callable[[RowFault], None] | None = None,
) -> T:
    """Run ``op`` (one transaction over stored rows); when a row of it cannot be processed
    (:class:`RowFault`: the transaction wrote nothing), settle that row and run ``op``
    again, which now passes it by (``on_fault(fault)`` is called once it is recorded).
    Returns ``op``'s result, or ``default`` when a fault could
    not be recorded (the same row would fail again: left to the next pass) or
    :data:`MAX_FAULTS_PER_PASS` rows failed in this call.

    :raises telha.domain.errors.StorageError: the store failed; anything else that is not a
        row's fault escapes unchanged.
    """
    for _ in range(MAX_FAULTS_PER_PASS):
        try:
            return await op()
        except RowFault as fault:
            if not await settle(store, fault, metrics, actor):
                return default
            if on_fault is not None:
                on_fault(fault)
    return default
