"""Webhook storage on each engine (:mod:`telha.storage.webhooks.subscriptions`): deliveries are
written by the transaction that ends a job — completed, failed to dead, reaped to dead,
cancelled — for
the subscriptions that asked for that state only; a claim takes a delivery for one attempt
(a second claim meanwhile gets nothing, concurrent claims are disjoint); a finished attempt
deletes or reschedules it; the scope's secret is made by the first add and rotated."""

from __future__ import annotations

import random

import anyio
import pytest

from telha.domain.ids import new_id
from telha.domain.model import Dedup, JobCompletion, LeaseRef, NewJob, Scope, WebhookTarget
from telha.domain.policy import FailureDecision, decide_failure, decide_loss
from telha.domain.webhooks import ALL_EVENTS, event_bit
from telha.storage import StorageEngine
from telha.storage.webhooks.subscriptions import DeliveryResult
from tests.integration.test_storage_contract import one_node, version

pytestmark = pytest.mark.anyio

SCOPE = Scope("hook-store", "org")
NOW = 1_800_000_000_000_000
LEASE_US = 60_000_000
URL = "http://127.0.0.1:9/hook"


def job(webhook: WebhookTarget | None = None) -> NewJob:
    return NewJob(new_id(), "ingest:text", "text", new_id(), None, b"{}", webhook=webhook)


async def leased(store: StorageEngine, new: NewJob, now: int = NOW) -> LeaseRef:
    await store.jobs.enqueue(SCOPE, new, now_us=now, dedup=False)
    got = await store.jobs.lease_next(
        ["text"], scope=SCOPE, worker_id="w", now_us=now, lease_us=LEASE_US
    )
    assert got is not None and got.job_id == new.job_id
    return LeaseRef(got.job_id, got.lease_generation)


def dead_now(kind: str, attempts: int) -> FailureDecision:
    return decide_failure(
        "corrupt_input", attempts_before=attempts, max_attempts=3, now_us=NOW,
        base_ms=1000, max_s=10.0, rng=random.Random(0),
    )  # fmt: skip


async def test_terminal_transactions_write_the_subscribed_deliveries(
    store: StorageEngine,
) -> None:
    secret = await store.webhooks.rotate_secret(SCOPE, now_us=NOW)
    on_done = job(WebhookTarget(URL, event_bit("completed")))
    on_dead = job(WebhookTarget(URL, event_bit("dead")))
    plain = job()
    # Completed: the job subscribed to completed gets one, the one to dead none.
    for new in (on_done, on_dead):
        await _complete(store, await leased(store, new))
    assert await store.webhooks.pending_deliveries([on_done.job_id]) == 1
    assert await store.webhooks.pending_deliveries([on_dead.job_id]) == 0
    # Dead by a permanent failure.
    again = job(WebhookTarget(URL, ALL_EVENTS))
    await store.jobs.fail(await leased(store, again), "corrupt_input", "bad", now_us=NOW,
                         decide=dead_now)  # fmt: skip
    assert await store.webhooks.pending_deliveries([again.job_id]) == 1
    # Dead by the reaper (a lease that ran out, the loss cap reached).
    reaped = job(WebhookTarget(URL, event_bit("dead")))
    await leased(store, reaped)
    late = NOW + LEASE_US + 1

    def lose(kind: str, attempts: int, losses: int) -> FailureDecision:
        return decide_loss(
            kind, attempts_before=attempts, losses_before=losses, max_attempts=3,
            max_losses=1, now_us=late, base_ms=1000, max_s=10.0, rng=random.Random(0),
        )  # fmt: skip

    assert [s for _, s in await store.jobs.reap_expired(now_us=late, decide=lose)] == ["dead"]
    assert await store.webhooks.pending_deliveries([reaped.job_id]) == 1
    # A job without a subscription, in a scope without scope-wide ones: none.
    await _complete(store, await leased(store, plain))
    assert await store.webhooks.pending_deliveries([plain.job_id]) == 0

    claimed = await store.webhooks.claim_deliveries(now_us=late, limit=10, claim_us=5_000_000)
    assert sorted(c.job_id for c in claimed) == sorted(
        [on_done.job_id, again.job_id, reaped.job_id]
    )
    by_job = {c.job_id: c for c in claimed}
    assert by_job[on_done.job_id].event == "completed" and by_job[reaped.job_id].event == "dead"
    assert all(c.secret == secret and c.attempts == 1 and c.scope == SCOPE for c in claimed)
    # Claimed: nothing is due until the claim runs out.
    assert (
        await store.webhooks.claim_deliveries(now_us=late + 1, limit=10, claim_us=5_000_000) == []
    )
    await store.webhooks.finish_deliveries(
        [DeliveryResult(claimed[0].delivery_id, None)]
        + [DeliveryResult(c.delivery_id, late + 10, "HTTP 503") for c in claimed[1:]]
    )
    retried = await store.webhooks.claim_deliveries(now_us=late + 10, limit=10, claim_us=5_000_000)
    assert sorted(c.delivery_id for c in retried) == sorted(c.delivery_id for c in claimed[1:])
    assert all(c.attempts == 2 for c in retried)
    # A claim that is never finished (its deliverer died) comes back when the claim ends.
    back = await store.webhooks.claim_deliveries(now_us=late + 10 + 5_000_000, limit=10, claim_us=1)
    assert len(back) == 2 and all(c.attempts == 3 for c in back)
    await store.webhooks.finish_deliveries([DeliveryResult(c.delivery_id, None) for c in back])
    assert await store.webhooks.delivery_times() == (None, None)


async def _complete(store: StorageEngine, lease: LeaseRef) -> None:
    """Complete a held job with a first version of a new source (the single-shot commit
    PostgreSQL runs as one call when the job has no subscription)."""
    await store.versions.commit(
        SCOPE,
        version(new_id(), new_id(), job=lease.job_id),
        one_node("text"),
        dedup=Dedup.SUBMIT,
        completion=JobCompletion(lease, NOW + 1, b"{}"),
    )


async def test_scope_wide_webhooks_and_secret(store: StorageEngine) -> None:
    assert not await store.webhooks.has_secret(SCOPE)
    first_id, secret = await store.webhooks.add(SCOPE, URL, ALL_EVENTS, now_us=NOW)
    assert secret is not None and secret.startswith("whsec_")
    assert await store.webhooks.has_secret(SCOPE)
    second_id, again = await store.webhooks.add(SCOPE, URL + "2", event_bit("dead"), now_us=NOW)
    assert again is None  # only the first add makes (and shows) the secret
    assert [h.webhook_id for h in await store.webhooks.subscriptions(SCOPE)] == [
        first_id,
        second_id,
    ]
    assert await store.webhooks.subscriptions(Scope("nobody", "org")) == []
    rotated = await store.webhooks.rotate_secret(SCOPE, now_us=NOW + 1)
    assert rotated != secret
    # A completed job of the scope: the all-events webhook only.
    new = job()
    await _complete(store, await leased(store, new))
    [claim] = await store.webhooks.claim_deliveries(now_us=NOW + 2, limit=10, claim_us=1_000_000)
    assert claim.url == URL and claim.secret == rotated
    assert not await store.webhooks.remove(Scope("nobody", "org"), first_id)
    assert await store.webhooks.remove(SCOPE, first_id)
    assert not await store.webhooks.remove(SCOPE, first_id)
    assert [h.webhook_id for h in await store.webhooks.subscriptions(SCOPE)] == [second_id]


async def test_concurrent_claims_are_disjoint(store: StorageEngine) -> None:
    await store.webhooks.add(SCOPE, URL, ALL_EVENTS, now_us=NOW)
    jobs = [job() for _ in range(12)]
    for new in jobs:
        await _complete(store, await leased(store, new))
    got: list[list[bytes]] = []

    async def claim() -> None:
        claimed = await store.webhooks.claim_deliveries(
            now_us=NOW + 5, limit=5, claim_us=60_000_000
        )
        got.append([c.delivery_id for c in claimed])

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(claim)
    flat = [d for batch in got for d in batch]
    assert len(flat) == len(set(flat)) == 12


async def test_a_cancel_writes_the_deliveries_subscribed_to_cancelled(
    store: StorageEngine,
) -> None:
    await store.webhooks.rotate_secret(SCOPE, now_us=NOW)
    held = job(WebhookTarget(URL, ALL_EVENTS))
    await leased(store, held)
    pending = job(WebhookTarget(URL, event_bit("cancelled")))
    await store.jobs.enqueue(SCOPE, pending, now_us=NOW, dedup=False)
    other = job(WebhookTarget(URL, event_bit("completed")))
    await store.jobs.enqueue(SCOPE, other, now_us=NOW, dedup=False)
    for new in (pending, held, other):
        out = await store.jobs.cancel(SCOPE, new.job_id, now_us=NOW + 1)
        assert out.job.state == "cancelled"
    assert await store.webhooks.pending_deliveries([pending.job_id]) == 1
    assert await store.webhooks.pending_deliveries([held.job_id]) == 1  # a revoked lease too
    assert await store.webhooks.pending_deliveries([other.job_id]) == 0  # not subscribed to it
    # Cancelling again writes nothing more.
    await store.jobs.cancel(SCOPE, pending.job_id, now_us=NOW + 2)
    assert await store.webhooks.pending_deliveries([pending.job_id]) == 1
