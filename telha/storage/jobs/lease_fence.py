"""The lease fence, once for both engines (docs/architecture.md, "A job's life and its
lease"): every write a lease guards checks, in its own transaction, that the job is still
leased under the generation the caller holds, and holds the job's row until it commits."""

from __future__ import annotations

from telha.domain.errors import StaleLease
from telha.domain.model import LeaseRef
from telha.storage.core.tx import Tx

__all__ = ["FENCE", "check_lease", "fence_held"]

#: The held job's row, to be locked (PostgreSQL's ``telha_commit_single`` reads it too:
#: :mod:`telha.storage.postgres.functions`); parameter ``(job)``.
FENCE = (
    "SELECT attempts, format, state, lease_generation, continuation, parent_job_id"
    " FROM jobs WHERE job_id = ?"
)


async def check_lease(tx: Tx, lease: LeaseRef) -> tuple[int, str, bytes | None]:
    """The lease fence: lock the held job's row until the transaction ends and return its
    ``(attempts, format, continuation blob)``. The reaper, a heartbeat or another submission
    of the same job waits for the lock, so the generation checked here is the one the write
    commits under.

    :raises StaleLease: the job is not leased under ``lease.lease_generation``.
    """
    attempts, fmt, blob, _ = await fence_held(tx, lease)
    return attempts, fmt, blob


async def fence_held(tx: Tx, lease: LeaseRef) -> tuple[int, str, bytes | None, bytes | None]:
    """:func:`check_lease` with the job's ``parent_job_id`` (``None``: no parent; a child job
    is enqueued with its parent's id and a ``parent=…`` event detail together) as a fourth
    value, read from the same row.

    :raises StaleLease: the job is not leased under ``lease.lease_generation``.
    """
    row = await tx.fetchone(FENCE + tx.for_update, lease.job_id)
    if row is None or row[2] != "leased" or row[3] != lease.lease_generation:
        raise StaleLease("job is not leased under this lease generation")
    return int(row[0]), str(row[1]), row[4], row[5]
