"""Cancelling jobs (docs/architecture.md, "Cancel"), written once for both engines.

A ``pending`` job becomes ``cancelled`` at once. A ``leased`` one is revoked in the same
transaction: its lease generation is bumped (so its holder's next heartbeat, submission or
``FetchContent`` fails the lease fence and writes nothing), its half-streamed version, if any,
is abandoned (:func:`~telha.storage.jobs.lifecycle.abandon_stream`: the previous version stays
current) and, on PostgreSQL, every replica is told (``NOTIFY`` :data:`REVOKED`) so the one
holding the worker's ``PollJobs`` stream sends it the ``cancel`` message. ``cancelled`` is
terminal, counts no attempt and is never retried; request-level dedup only matches
``pending``/``leased`` jobs, so the same bytes posted again make a new job.

With ``children``, the job's unfinished descendants are cancelled too: its child jobs
(``jobs.parent_job_id``) and theirs. A parent's children are enqueued only when it
completes, so ``children`` is also accepted on a ``completed`` parent: the parent stays as
it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from telha.domain.erasure import ERASE_KIND
from telha.domain.errors import Conflict, JobFinished, NotFound
from telha.domain.ids import id_str
from telha.domain.model import JobRecord, LeaseRef, Scope
from telha.storage.core.tx import Tx
from telha.storage.jobs.lifecycle import abandon_stream, add_event
from telha.storage.jobs.reads import get_job
from telha.storage.webhooks.deliveries import job_ended

__all__ = ["REVOKED", "CancelOutcome", "cancel_job", "lease_states"]

#: The wake-up payload (``NOTIFY telha_jobs``) that says "a lease was revoked": each replica
#: checks the jobs leased through it (:meth:`telha.queue.job_queue.JobQueue.check_revoked`).
#: Not a format name (formats are lower-case words).
REVOKED = "!revoked"

#: Descendants are looked for level by level, at most this many levels (an e-mail inside an
#: archive inside an e-mail is three).
_MAX_DEPTH = 16


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    """What a cancel did: ``job`` as it is now (with its events); ``cancelled``: the jobs this
    call moved to ``cancelled`` (the job itself and, with ``children``, descendants), each
    with its kind; ``revoked``: the leases it revoked, ``(lease as held, kind)``, so the
    process that leased a job can tell its worker and free its slot."""

    job: JobRecord
    cancelled: tuple[tuple[bytes, str], ...]
    revoked: tuple[tuple[LeaseRef, str], ...]


async def _cancel_one(
    tx: Tx, job_id: bytes, now_us: int, detail: str
) -> tuple[str, str, LeaseRef | None] | None:
    """Cancel one job if it is unfinished (its row locked first); ``(previous state, kind,
    the lease it revoked or None)``, or ``None`` when it had already ended."""
    row = await tx.fetchone(
        "SELECT state, kind, lease_generation, lease_owner, continuation FROM jobs"
        f" WHERE job_id = ?{tx.for_update}",
        job_id,
    )
    if row is None or row[0] not in ("pending", "leased"):
        return None
    state, kind, generation, owner, continuation = row
    revoked = None
    if state == "leased":
        revoked = LeaseRef(job_id, int(generation))
        await abandon_stream(tx, job_id, now_us, continuation)
        detail = f"{detail}; lease of worker {owner} (generation {generation}) revoked"
    # A leased job's generation moves on, so its holder is fenced off whatever it sends; the
    # attempt in progress is not counted (attempts counts failed attempts only).
    await tx.execute(
        "UPDATE jobs SET state = 'cancelled',"
        " lease_generation = lease_generation + ?, lease_owner = NULL, lease_deadline = NULL,"
        " continuation = NULL, updated_at = ? WHERE job_id = ?",
        1 if revoked is not None else 0, now_us, job_id,
    )  # fmt: skip
    await add_event(tx, job_id, now_us, "cancelled", detail)
    await job_ended(tx, job_id, "cancelled", now_us)
    return str(state), str(kind), revoked


async def _children(tx: Tx, parents: Sequence[bytes]) -> list[bytes]:
    """The child jobs of ``parents`` (``jobs.parent_job_id``, indexed by ``jobs_by_parent``)."""
    cond, params = tx.dialect.any("parent_job_id", list(parents), "bytea")
    rows = await tx.fetchall(f"SELECT job_id FROM jobs WHERE {cond} ORDER BY job_id", *params)
    return [r[0] for r in rows]


async def cancel_job(
    tx: Tx, scope: Scope, job_id: bytes, now_us: int, children: bool
) -> CancelOutcome:
    """``POST /v1/ingest/{jobId}/cancel`` as one transaction (see the module docstring).
    Cancelling a ``cancelled`` job again changes nothing and answers the same job.

    :raises NotFound: no such job in ``scope``.
    :raises JobFinished: the job is ``completed`` or ``dead`` (a ``completed`` one is accepted
        with ``children``: only its descendants are cancelled).
    :raises Conflict: the job is an erasure (``erase``): an erasure is never left half done.
    """
    # The row is locked before its state is read: a completion racing this cancel either
    # committed first (409) or waits for it (and is then refused by the lease fence).
    await tx.fetchone(f"SELECT state FROM jobs WHERE job_id = ?{tx.for_update}", job_id)
    job = await get_job(tx, scope, job_id, False)
    if job is None:
        raise NotFound("no such job")
    if job.kind == ERASE_KIND:
        raise Conflict("an erasure cannot be cancelled")
    if job.state == "dead" or (job.state == "completed" and not children):
        raise JobFinished(f"the job already ended {job.state}")
    cancelled: list[tuple[bytes, str]] = []
    revoked: list[tuple[LeaseRef, str]] = []
    done = await _cancel_one(tx, job_id, now_us, "cancelled by request")
    if done is not None:
        cancelled.append((job_id, done[1]))
        if done[2] is not None:
            revoked.append((done[2], done[1]))
    if children:
        level, seen = [job_id], {job_id}
        for _ in range(_MAX_DEPTH):
            level = [c for c in await _children(tx, level) if c not in seen]
            if not level:
                break
            seen.update(level)
            for child in level:  # id order: the order every multi-job write locks rows in
                got = await _cancel_one(tx, child, now_us, f"parent {id_str(job_id)} cancelled")
                if got is not None:
                    cancelled.append((child, got[1]))
                    if got[2] is not None:
                        revoked.append((got[2], got[1]))
    if revoked:
        await tx.notify(REVOKED)
    now = await get_job(tx, scope, job_id, True)
    assert now is not None
    return CancelOutcome(now, tuple(cancelled), tuple(revoked))


async def lease_states(tx: Tx, job_ids: Sequence[bytes]) -> dict[bytes, tuple[str, int]]:
    """``{job_id: (state, lease_generation)}`` of the jobs that exist among ``job_ids``."""
    if not job_ids:
        return {}
    cond, params = tx.dialect.any("job_id", job_ids, "bytea")
    rows = await tx.fetchall(
        f"SELECT job_id, state, lease_generation FROM jobs WHERE {cond}", *params
    )
    return {bytes(r[0]): (str(r[1]), int(r[2])) for r in rows}
