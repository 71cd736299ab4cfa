"""The JobQueue actor (docs/architecture.md, "A job's life"): leases with deadlines and
generations, heartbeats, retries with backoff, dead letters, the reaper, fast failover of jobs
lost with their worker, and wake-ups for waiting pollers.

A poller waiting for work is woken the moment a job of one of its formats is enqueued or
returned to ``pending`` (no database polling); a job backing off is picked up when its
``available_at`` passes. Per-poller capacity is enforced by the caller through
:meth:`JobQueue.track`: the slot a job holds is given back when the job finishes, fails, is
released or its lease is reaped.

Cancel (docs/architecture.md, "Cancel"): :meth:`JobQueue.cancel` writes the cancel and, for a
lease it revoked that was handed out through this process, tells the lease's poller
(``on_cancelled`` of :meth:`JobQueue.track`: its stream sends the worker a ``cancel``
message) and frees its slot. A lease handed out through another replica is found by that
replica's :meth:`JobQueue.check_revoked`: at once on the ``NOTIFY`` the cancel sends
(PostgreSQL), and every ``jobs.reap_interval_s`` as a safety net.

Fast failover: a poller whose stream ended hands the jobs it still held to :meth:`JobQueue.lost`
(synchronous, so it works from a cancelled generator's ``finally``); the actor's loss task
writes them back to ``pending`` (``worker_lost``, :func:`~telha.domain.policy.decide_loss`) in
one transaction and wakes waiting pollers at once. Jobs handed over are at most the jobs
leased through this process, so that hand-off is bounded without a queue of its own.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager

import anyio
import anyio.abc
import structlog

from telha.config import JobsConfig
from telha.domain.errors import TelhaError
from telha.domain.ids import id_str, now_us
from telha.domain.model import EnqueueOutcome, JobRecord, LeaseRef, NewJob, Scope
from telha.domain.policy import (
    FailureDecision,
    decide_failure,
    decide_loss,
    format_reason,
    retry_after_us,
)
from telha.domain.row_faults import RowFault
from telha.logs import bound_job, fields_of
from telha.metrics import Metrics
from telha.row_faults import past_bad_rows
from telha.storage.api import REVOKED
from telha.storage.protocol import ALL_FORMATS, QueueStore

__all__ = ["JobQueue", "LeaseInterrupt"]

log = structlog.get_logger("telha.queue")

#: Longest a waiting poller sleeps without a wake-up before looking again (a safety net for
#: wake-ups that cannot be seen in-process, e.g. jobs enqueued by another process).
_MAX_IDLE_S = 5.0
_MIN_WAIT_S = 0.05
#: A format whose last poll stream ended this long ago (seconds) still counts as polled: a
#: remote worker reconnecting after a blip does not make its jobs look orphaned.
POLL_RECENT_S = 30.0


class _Wakeups:
    """Per-format wake-up registrations; a waiter registers before it looks, so no
    notification between its look and its wait is lost."""

    def __init__(self) -> None:
        self._waiters: defaultdict[str, set[anyio.Event]] = defaultdict(set)

    def notify(self, fmt: str) -> None:
        """Wake the waiters of ``fmt`` (``"*"``: every waiter)."""
        if fmt == ALL_FORMATS:
            waiting = list(self._waiters.values())
            self._waiters.clear()
            for events in waiting:
                for event in events:
                    event.set()
            return
        for event in self._waiters.pop(fmt, set()):
            event.set()

    @contextmanager
    def register(self, formats: Sequence[str]) -> Iterator[anyio.Event]:
        event = anyio.Event()
        for fmt in formats:
            self._waiters[fmt].add(event)
        try:
            yield event
        finally:
            for fmt in formats:
                waiters = self._waiters.get(fmt)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._waiters[fmt]


class LeaseInterrupt:
    """Cuts a waiting :meth:`JobQueue.lease_or_interrupt` short: it then returns ``None``
    without leasing (a ``PollJobs`` stream with a ``cancel`` message to send). A request
    stays until :meth:`clear`."""

    def __init__(self) -> None:
        self._requested = False
        self._waiting: anyio.Event | None = None

    @property
    def requested(self) -> bool:
        """Whether :meth:`interrupt` was called since the last :meth:`clear`."""
        return self._requested

    def interrupt(self) -> None:
        """Wake the lease wait (if one is waiting) and make it return ``None``."""
        self._requested = True
        if self._waiting is not None:
            self._waiting.set()

    def clear(self) -> None:
        """Forget the request (the owner has dealt with what caused it)."""
        self._requested = False

    def attach(self, woken: anyio.Event | None) -> None:
        """The wake-up event a lease wait now waits on (``None``: it waits on none); set at
        once when an interrupt is already requested. For :class:`JobQueue`."""
        self._waiting = woken
        if woken is not None and self._requested:
            woken.set()


#: What a tracked job calls back: ``on_finished()`` when it leaves the lease any way,
#: ``on_cancelled()`` (before ``on_finished``) when the lease was revoked by a cancel.
_Held = tuple[JobRecord, Callable[[], None], float, Callable[[], None] | None]


class JobQueue:
    """The queue over a :class:`~telha.storage.protocol.QueueStore`.

    :param store: the storage engine holding job rows and events.
    :param config: the ``[jobs]`` section (``lease_secs``, ``max_attempts``, backoff, reaper).
    :param clock: µs clock (injectable for tests).
    :param rng: randomness for backoff jitter.
    :param metrics: where transitions and the pending/leased gauges are recorded.
    """

    def __init__(
        self,
        store: QueueStore,
        config: JobsConfig,
        *,
        clock: Callable[[], int] = now_us,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._metrics = metrics or Metrics()
        self._store = store
        self._config = config
        self._clock = clock
        self._rng = rng or random.Random()
        self._wakeups = _Wakeups()
        #: job id → (record as leased, slot release, monotonic seconds at lease, cancel hook)
        self._holders: dict[bytes, _Held] = {}
        #: job id → (lease, detail) of jobs whose stream ended, not yet written back.
        self._lost: dict[bytes, tuple[LeaseRef, str]] = {}
        self._lost_ready = anyio.Event()
        self._revoked_ready = anyio.Event()
        #: job id → generation of leases :meth:`forget` was told are gone (at most the jobs
        #: leased through this process), settled by :meth:`check_revoked`.
        self._forgotten: dict[bytes, int] = {}
        #: format → poll streams open for it in this process, and monotonic seconds at which
        #: the last one ended (:meth:`polling`, :meth:`polled_formats`).
        self._pollers: defaultdict[str, int] = defaultdict(int)
        self._last_poll: dict[str, float] = {}

    @contextmanager
    def polling(self, formats: Sequence[str]) -> Iterator[None]:
        """Count a poll stream (a worker's ``PollJobs``, in-process or remote) for
        ``formats`` while the block runs, busy or waiting (:meth:`polled_formats`)."""
        for fmt in formats:
            self._pollers[fmt] += 1
        try:
            yield
        finally:
            now = time.monotonic()
            for fmt in formats:
                self._pollers[fmt] -= 1
                if not self._pollers[fmt]:
                    del self._pollers[fmt]
                self._last_poll[fmt] = now

    def polled_formats(self, recent_s: float = POLL_RECENT_S) -> set[str]:
        """Formats a poll stream of this process serves now, or served within ``recent_s``
        seconds (docs/operations.md, "Readiness": the ``hint`` of a pending job, ``/readyz``).
        Another replica's streams are not seen."""
        since = time.monotonic() - recent_s
        recent = {fmt for fmt, at in self._last_poll.items() if at >= since}
        return set(self._pollers) | recent

    @property
    def metrics(self) -> Metrics:
        """Where this queue (and the ingestor and servicer over it) count what happens."""
        return self._metrics

    @property
    def lease_us(self) -> int:
        """Lease length in µs (``jobs.lease_secs``)."""
        return int(self._config.lease_secs * 1_000_000)

    def decide(self, kind: str, attempts_before: int, min_delay_us: int = 0) -> FailureDecision:
        """The retry policy bound to this queue's config and clock (``min_delay_us``: the
        least delay a worker asked for, e.g. an HTTP ``Retry-After``)."""
        return decide_failure(
            kind,
            attempts_before=attempts_before,
            max_attempts=self._config.max_attempts,
            now_us=self._clock(),
            base_ms=self._config.backoff_base_ms,
            max_s=self._config.backoff_max_s,
            rng=self._rng,
            min_delay_us=min_delay_us,
        )

    def decide_loss(self, kind: str, attempts_before: int, losses_before: int) -> FailureDecision:
        """:func:`~telha.domain.policy.decide_loss` bound to this queue's config and clock."""
        return decide_loss(
            kind,
            attempts_before=attempts_before,
            losses_before=losses_before,
            max_attempts=self._config.max_attempts,
            max_losses=self._config.max_worker_losses,
            now_us=self._clock(),
            base_ms=self._config.backoff_base_ms,
            max_s=self._config.backoff_max_s,
            rng=self._rng,
        )

    async def run(self, *, task_status: anyio.abc.TaskStatus[JobQueue]) -> None:
        """Actor body: the reaper, every ``jobs.reap_interval_s`` seconds, the write-back of
        jobs lost with their worker (:meth:`lost`) and (when the engine has them) wake-ups from
        other processes, until cancelled."""
        async with anyio.create_task_group() as tg:
            wakeups = self._store.job_wakeups()
            if wakeups is not None:
                tg.start_soon(self._forward_wakeups, wakeups)
            tg.start_soon(self._write_back_losses)
            tg.start_soon(self._check_revoked_when_told)
            task_status.started(self)
            while True:
                await anyio.sleep(self._config.reap_interval_s)
                await self.reap()
                await self.refresh_gauges()
                self._revoked_ready.set()  # the safety net for a NOTIFY not seen

    async def _forward_wakeups(self, wakeups: AsyncIterator[str]) -> None:
        """Wake local pollers for formats made available elsewhere (another replica's
        enqueue, failure or reap): the storage engine's channel, e.g. LISTEN/NOTIFY."""
        async for fmt in wakeups:
            if fmt in (REVOKED, ALL_FORMATS):  # a lease revoked (maybe one handed out here)
                self._revoked_ready.set()
            if fmt != REVOKED:
                self._wakeups.notify(fmt)

    async def _check_revoked_when_told(self) -> None:
        while True:
            await self._revoked_ready.wait()
            self._revoked_ready = anyio.Event()
            try:
                await self.check_revoked()
            except Exception:  # storage trouble: the worker's next heartbeat is refused anyway
                log.exception("revoked_leases_not_checked")

    async def check_revoked(self) -> int:
        """Find the jobs leased through this process that were cancelled through another
        replica (their lease revoked in the database) and tell their pollers as
        :meth:`cancel` does for its own; free the slots of leases :meth:`forget` was told
        are gone otherwise. Returns how many cancelled leases were found."""
        forgotten, self._forgotten = self._forgotten, {}
        held = {job_id: h[0].lease_generation for job_id, h in self._holders.items()}
        if not held:
            return 0
        try:
            states = await self._store.jobs.lease_states(list(held))
        except TelhaError:  # storage trouble: the refused leases are freed all the same
            states = {}
        found = 0
        for job_id, generation in held.items():
            state = states.get(job_id)
            if state is not None and state[0] == "cancelled":
                found += self._revoke(LeaseRef(job_id, generation))
            elif forgotten.get(job_id) == generation:
                self.finished(job_id)
        return found

    def _revoke(self, lease: LeaseRef) -> int:
        """A lease tracked here was revoked by a cancel: its poller is told (the
        ``cancel`` message) and its slot freed. 1 if it was tracked here under that
        generation, else 0."""
        held = self._holders.get(lease.job_id)
        if held is None or held[0].lease_generation != lease.lease_generation:
            return 0
        del self._holders[lease.job_id]
        self._lost.pop(lease.job_id, None)
        self._forgotten.pop(lease.job_id, None)
        with bound_job(**fields_of(held[0])):
            log.info("lease_revoked", worker=held[0].lease_owner, reason="cancelled")
        if held[3] is not None:
            held[3]()
        held[1]()
        return 1

    async def cancel(self, scope: Scope, job_id: bytes, *, children: bool = False) -> JobRecord:
        """Cancel a job of ``scope`` (and with ``children`` its unfinished descendants):
        ``pending`` → ``cancelled`` at once; a ``leased`` one's lease is revoked (its
        generation bumped, a half-streamed version abandoned) and, when it was leased through
        this process, its poller is told at once; another replica's learns it from
        :meth:`check_revoked`. Returns the job as it is now, with its events.

        :raises telha.domain.errors.NotFound: no such job in ``scope``.
        :raises telha.domain.errors.JobFinished: it ended ``completed`` (unless
            ``children``) or ``dead``.
        :raises telha.domain.errors.Conflict: it is an erasure.
        """
        outcome = await self._store.jobs.cancel(
            scope, job_id, now_us=self._clock(), children=children
        )
        for cancelled, kind in outcome.cancelled:
            self.transition(kind, "cancelled")
            log.info("job_cancelled", job_id=id_str(cancelled), kind=kind)
        for lease, _ in outcome.revoked:
            self._revoke(lease)
        return outcome.job

    def lost(self, leases: Sequence[LeaseRef], detail: str) -> None:
        """Jobs whose worker is gone (its ``PollJobs`` stream ended while it held them): the
        actor writes them back (:meth:`lose`) at once. Synchronous and never blocking, for a
        stream's ``finally``; ``detail`` says which worker and how (the ``worker_lost`` event)."""
        for lease in leases:
            self._lost[lease.job_id] = (lease, detail)
        if self._lost:
            self._lost_ready.set()

    async def _write_back_losses(self) -> None:
        while True:
            await self._lost_ready.wait()
            self._lost_ready = anyio.Event()
            batch, self._lost = self._lost, {}
            by_detail: defaultdict[str, list[LeaseRef]] = defaultdict(list)
            for lease, detail in batch.values():
                by_detail[detail].append(lease)
            for detail, leases in by_detail.items():
                try:
                    await self.lose(leases, detail)
                except Exception:  # storage trouble: the lease expiry is the backstop
                    log.exception("worker_lost_not_recorded", jobs=len(leases))

    async def lose(self, leases: Sequence[LeaseRef], detail: str) -> int:
        """Return jobs lost with their worker to ``pending`` (``worker_lost``, a failed attempt,
        no backoff for a job's first loss) or dead them (``jobs.max_worker_losses``, or
        ``max_attempts``); wakes pollers. Leases no longer held are skipped; a job whose row
        cannot be processed ends ``dead`` (``corrupt_row``) as in :meth:`reap`. Returns how
        many jobs were lost."""

        async def lose_once() -> list[tuple[JobRecord, str]]:
            return await self._store.jobs.lose(
                leases, now_us=self._clock(), detail=detail, decide=self.decide_loss
            )

        lost: list[tuple[JobRecord, str]] = await past_bad_rows(
            lose_once, self._store, self._metrics, "job_queue", default=[], on_fault=self._dead
        )
        for job, state in lost:
            with bound_job(**fields_of(job)):
                log.warning("worker_lost", worker=job.lease_owner, state=state, detail=detail)
            self.transition(job.kind, "worker_lost" if state == "pending" else "dead")
            self.finished(job.job_id)
            if state == "pending":
                self._wakeups.notify(job.format)
        return len(lost)

    def _dead(self, fault: RowFault) -> None:
        """A job whose row could not be processed was dead-lettered: free its slot, if it
        was leased through here."""
        if isinstance(fault.key, bytes):
            self.finished(fault.key)

    async def refresh_gauges(self) -> None:
        """Take a new snapshot of active jobs by kind and state for ``telha_jobs``."""
        self._metrics.set_job_counts(await self._store.jobs.active_counts())

    def transition(self, kind: str, name: str) -> None:
        """Count one job state transition of a ``kind`` job (``telha_job_transitions_total``)."""
        self._metrics.transition(kind, name)

    async def reap(self) -> int:
        """Return expired leases to ``pending`` (``lease_expired``, a failed attempt) or
        dead-letter them; wakes pollers. Returns how many leases were reaped. An expired
        job whose row cannot be processed ends ``dead`` (``corrupt_row: …``, a ``dead``
        event, ``row_failed`` logged) and the others are reaped all the same
        (docs/architecture.md, "Supervision and bad rows").

        :raises telha.domain.errors.StorageError: the store failed (the supervisor
            restarts the queue).
        """

        async def reap_once() -> list[tuple[JobRecord, str]]:
            return await self._store.jobs.reap_expired(
                now_us=self._clock(), decide=self.decide_loss
            )

        reaped: list[tuple[JobRecord, str]] = await past_bad_rows(
            reap_once, self._store, self._metrics, "job_queue", default=[], on_fault=self._dead
        )
        for job, state in reaped:
            with bound_job(**fields_of(job)):
                log.warning("lease_expired", worker=job.lease_owner, state=state)
            self._metrics.lease_expired(job.kind, state)
            self.finished(job.job_id)
            if state == "pending":
                self._wakeups.notify(job.format)
        return len(reaped)

    async def enqueue(
        self, scope: Scope, job: NewJob, *, dedup: bool, max_pending: int = 0
    ) -> EnqueueOutcome:
        """Enqueue ``job`` (request-level dedup with ``dedup``; ``max_pending`` > 0: refused
        when the scope already has that many pending jobs) and wake its pollers.

        :raises QuotaExceeded: refused by ``max_pending``; nothing written.
        """
        outcome = await self._store.jobs.enqueue(
            scope, job, now_us=self._clock(), dedup=dedup, max_pending=max_pending
        )
        if not outcome.deduplicated:
            self._wakeups.notify(job.format)
        return outcome

    def notify(self, fmt: str) -> None:
        """Wake pollers of ``fmt`` (after jobs of it were enqueued elsewhere, e.g. children)."""
        self._wakeups.notify(fmt)

    async def lease(
        self, formats: Sequence[str], *, scope: Scope | None, worker_id: str
    ) -> JobRecord:
        """Wait for and lease the next available job of ``formats``.

        :param scope: only this scope's jobs (a scoped worker token), or ``None`` for all.
        Cancellation while waiting leases nothing.
        """
        job = await self.lease_or_interrupt(formats, scope=scope, worker_id=worker_id)
        assert job is not None  # no interrupt given
        return job

    async def lease_or_interrupt(
        self,
        formats: Sequence[str],
        *,
        scope: Scope | None,
        worker_id: str,
        interrupt: LeaseInterrupt | None = None,
    ) -> JobRecord | None:
        """:meth:`lease`, or ``None`` (nothing leased) as soon as ``interrupt`` is
        requested while it waits."""
        while True:
            with self._wakeups.register(formats) as woken:
                if interrupt is not None:
                    if interrupt.requested:
                        return None
                    interrupt.attach(woken)
                job = await self._store.jobs.lease_next(
                    formats,
                    scope=scope,
                    worker_id=worker_id,
                    now_us=self._clock(),
                    lease_us=self.lease_us,
                )
                if job is not None:
                    self.transition(job.kind, "leased")
                    return job
                wait_s = _MAX_IDLE_S
                due = await self._store.jobs.next_available_at(formats, scope)
                if due is not None:
                    # At least _MIN_WAIT_S: a job due now that this poller still could not
                    # lease (taken meanwhile) must not turn the wait into a busy loop.
                    wait_s = min(wait_s, max(_MIN_WAIT_S, (due - self._clock()) / 1_000_000))
                with anyio.move_on_after(wait_s):
                    await woken.wait()
                if interrupt is not None:
                    interrupt.attach(None)

    def track(
        self,
        job: JobRecord,
        on_finished: Callable[[], None],
        on_cancelled: Callable[[], None] | None = None,
    ) -> None:
        """Remember a job leased through this process and call ``on_finished`` once when it
        completes, fails, is released, reaped or cancelled; a cancel calls ``on_cancelled``
        first (the poller tells its worker)."""
        self._holders[job.job_id] = (job, on_finished, time.monotonic(), on_cancelled)

    def leased_here(self, job_id: bytes) -> JobRecord | None:
        """The record of a job this process leased and that has not finished yet (saves a
        read per submission; the lease itself is re-checked inside the commit)."""
        held = self._holders.get(job_id)
        return held[0] if held is not None else None

    def held_seconds(self, job_id: bytes) -> float | None:
        """Seconds since a job this process leased (and that has not finished) was tracked
        at its lease; ``None`` for a job not held here."""
        held = self._holders.get(job_id)
        return time.monotonic() - held[2] if held is not None else None

    def forget(self, lease: LeaseRef) -> None:
        """A lease tracked here turned out not to be current any more (its holder's heartbeat
        or submission was refused): its poller's slot is freed by the actor's next
        :meth:`check_revoked`, at once. A lease revoked by a cancel is told to its poller
        first, so a refusal racing the cancel's check does not swallow the ``cancel``
        message; one reaped or lost through another replica, which cannot free this
        process's slots, is only freed. Synchronous: no I/O on the refusal's path."""
        held = self._holders.get(lease.job_id)
        if held is not None and held[0].lease_generation == lease.lease_generation:
            self._forgotten[lease.job_id] = lease.lease_generation
            self._revoked_ready.set()

    def finished(self, job_id: bytes) -> None:
        """A job left the lease (any way): give its poller's slot back."""
        self._lost.pop(job_id, None)
        self._forgotten.pop(job_id, None)
        held = self._holders.pop(job_id, None)
        if held is not None:
            held[1]()

    async def heartbeat(self, leases: Sequence[LeaseRef]) -> tuple[list[bytes], int]:
        """Extend held leases; returns the extended ids and the new deadline (µs)."""
        now = self._clock()
        extended = await self._store.jobs.heartbeat(leases, now_us=now, lease_us=self.lease_us)
        return extended, now + self.lease_us

    async def fail(
        self, lease: LeaseRef, kind: str, detail: str, *, log_detail: bool = False
    ) -> JobRecord:
        """Record a failed attempt of a held job (retry with backoff, or dead) and log it, once
        (``job_failed``; ``log_detail``: with ``detail`` as ``reason``, for core's own reasons
        only — a worker's may quote content). A detail ending in ``(retry_after_s=N)`` delays
        the retry by at least ``N`` seconds.

        :raises telha.domain.errors.StaleLease: the caller does not hold the job.
        """
        reason = format_reason(kind, detail)
        least = retry_after_us(detail)

        def decide(k: str, attempts_before: int) -> FailureDecision:
            return self.decide(k, attempts_before, least)

        job = await self._store.jobs.fail(lease, kind, reason, now_us=self._clock(), decide=decide)
        self.finished(lease.job_id)
        self.transition(job.kind, "retried" if job.state == "pending" else "dead")
        # The line is about the attempt that failed (``job`` already counts it).
        with bound_job(**{**fields_of(job), "attempt": job.attempts}):
            extra = {"reason": detail} if log_detail else {}
            log.info(
                "job_failed", failure_kind=kind, state=job.state, attempts=job.attempts, **extra
            )
        if job.state == "pending":
            self._wakeups.notify(job.format)
        return job

    async def release(self, lease: LeaseRef, detail: str) -> bool:
        """Give a held job back without counting an attempt (shutdown of a worker pool)."""
        held = self._holders.get(lease.job_id)
        released = await self._store.jobs.release(lease, now_us=self._clock(), detail=detail)
        self.finished(lease.job_id)
        if released:
            self.transition(held[0].kind if held is not None else "unknown", "released")
        return released

    async def get(
        self, scope: Scope | None, job_id: bytes, *, events: bool = True
    ) -> JobRecord | None:
        """A job (with its events unless ``events=False``), if it exists in ``scope``
        (``None``: any scope)."""
        return await self._store.jobs.get(scope, job_id, events=events)
