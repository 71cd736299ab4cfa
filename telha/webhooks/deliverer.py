"""The webhook deliverer actor (docs/operations.md, "Webhooks"): sends the deliveries a job's
terminal transaction wrote (:mod:`telha.storage.webhooks.subscriptions`), off the completion path.

Each pass reads when the next delivery is due; when one is, it claims up to
``webhooks.batch`` due rows in one transaction (a claim no other replica can take), POSTs
them — at most ``webhooks.concurrency`` at once, each the job's JSON exactly as
``GET /v1/ingest/{jobId}`` answers it, signed per the Standard Webhooks convention with the
scope's secret as it is now — and records every outcome in one transaction: delivered (a 2xx
answer: the row is deleted), failed (retried after a jittered exponential backoff whose time
is stored on the row, so it survives restarts), expired (still failing ``webhooks.max_age_s``
after the job ended: given up and logged), gone (the job no longer exists) or failed for
good (the row kept with state ``failed`` and its reason, never sent again: a URL that does
not parse, a destination the ``[webhooks]`` rules refuse — checked on the URL, then on the
address each connection goes to, :mod:`telha.webhooks.checked_transport` — or anything raising while
one delivery is handled; the deliverer goes on with the next). A deliverer killed mid-pass
leaves its claimed rows to be claimed again once the claim (``webhooks.claim_s``) runs out:
delivery is at least once, and a receiver deduplicates by the ``webhook-id`` header.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Protocol

import anyio
import anyio.abc
import httpx
import msgspec
import structlog
from standardwebhooks import Webhook

from telha.config import WebhooksConfig
from telha.domain.ids import id_str, now_us
from telha.domain.listings import JobFamily
from telha.domain.model import JobRecord
from telha.domain.webhooks import retry_at
from telha.job_json import job_status
from telha.metrics import Metrics
from telha.storage.api import DeliveryClaim, DeliveryResult
from telha.webhooks.checked_transport import CheckedTransport
from workers_common.checked_connect import Refused
from workers_common.destinations import Destinations
from workers_common.logs import redact_url

__all__ = ["Deliverer", "DeliveryQueue", "sign_headers"]

log = structlog.get_logger("telha.webhooks")

#: httpcore's timeout phases, each given ``webhooks.timeout_s``.
_PHASES = ("connect", "read", "write", "pool")
#: Bytes of a receiver's answer read; a longer answer closes its connection.
_MAX_ANSWER_BYTES = 65536
#: URLs whose check :meth:`Deliverer._checked_url` remembers (then it starts again).
_CHECKED_URLS = 4096
#: Characters of a failed attempt's error kept on its row.
_ERROR_CHARS = 500


class DeliveryQueue(Protocol):
    """What the deliverer uses of a store's webhook aggregate
    (:class:`telha.storage.protocol.WebhookStore`, ``store.webhooks``)."""

    async def delivery_times(self) -> tuple[int | None, int | None]: ...

    async def claim_deliveries(
        self, *, now_us: int, limit: int, claim_us: int
    ) -> list[DeliveryClaim]: ...

    async def finish_deliveries(self, results: Sequence[DeliveryResult]) -> None: ...


def sign_headers(secret: str, msg_id: str, body: bytes, at: datetime) -> dict[str, str]:
    """The Standard Webhooks headers of one delivery: ``webhook-id``, ``webhook-timestamp``
    (seconds since the epoch) and ``webhook-signature`` (``v1,`` and the base64 HMAC-SHA256
    of ``id.timestamp.body`` under ``secret``, a ``whsec_…`` string)."""
    signature = Webhook(secret).sign(msg_id, at, body.decode("utf-8"))
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
        "user-agent": "telha-webhooks",
    }


def _one_connection(rules: Destinations) -> httpx.AsyncHTTPTransport:
    """A POST slot's transport: a pool of one kept-alive connection, each connection checked
    by ``rules``."""
    return CheckedTransport(
        rules, limits=httpx.Limits(max_connections=1, max_keepalive_connections=1)
    )


class _Permanent(Exception):
    """A delivery that can never be made; ``str(exc)`` says why."""


class Deliverer:
    """Sends due webhook deliveries; one per replica (claims keep replicas apart).

    :param deliveries: the store's webhook aggregate (``store.webhooks``).
    :param config: the ``[webhooks]`` section.
    :param metrics: counts outcomes (``telha_webhook_deliveries_total``) and reads
        :meth:`oldest_age_s` for ``telha_webhook_oldest_undelivered_seconds``.
    :param clock: µs since the epoch (tests inject one).
    :param transport: one httpx transport for every POST (tests); the default is a
        one-connection pool per POST slot, opening real connections, each checked by the
        ``[webhooks]`` rules.
    :raises ValueError: a ``webhooks.allowed_hosts`` entry that does not parse.
    """

    def __init__(
        self,
        deliveries: DeliveryQueue,
        config: WebhooksConfig,
        metrics: Metrics,
        *,
        clock: Callable[[], int] = now_us,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._deliveries = deliveries
        self._config = config
        self._metrics = metrics
        self._clock = clock
        self._transport = transport
        self._rules = config.rules()
        #: URL → (its one spelling, None) or (None, why it is refused): :meth:`_checked_url`.
        self._checked: dict[str, tuple[str | None, str | None]] = {}
        self._oldest: int | None = None

    def oldest_age_s(self) -> float:
        """Seconds since the oldest delivery not yet made was written, as of the last pass;
        0 when none."""
        return 0.0 if self._oldest is None else max(0.0, (self._clock() - self._oldest) / 1e6)

    async def run(self, *, task_status: anyio.abc.TaskStatus[Deliverer]) -> None:
        """Actor body: report ``self``, then deliver until cancelled. Closes its connections;
        storage errors escape (the supervisor restarts the actor; claimed rows are sent
        again once their claim runs out)."""
        cfg = self._config
        async with AsyncExitStack() as stack:
            # One POST slot per ``webhooks.concurrency``, each with httpx's transport alone
            # (no client: no cookies, redirects or proxies from the environment) over a pool
            # of one connection: httpcore checks every pooled connection on each request and
            # each response's end, so one pool of N connections costs O(N) per POST.
            slots = [
                await stack.enter_async_context(self._transport or _one_connection(self._rules))
                for _ in range(1 if self._transport else cfg.concurrency)
            ]
            task_status.started(self)
            while True:
                sent = await self.deliver_due(slots)
                if sent < cfg.batch:
                    await self._idle()

    async def _idle(self) -> None:
        """After a pass that found less than a batch: sleep ``webhooks.poll_interval_ms``, so
        deliveries written meanwhile are claimed together (two write transactions per batch,
        not per delivery), or less when a retry falls due sooner."""
        due, self._oldest = await self._deliveries.delivery_times()
        wait = self._config.poll_interval_ms / 1000
        if due is not None and due > self._clock():
            wait = min(wait, (due - self._clock()) / 1e6)
        await anyio.sleep(wait)

    async def deliver_due(self, slots: Sequence[httpx.AsyncBaseTransport]) -> int:
        """One pass: claim up to ``webhooks.batch`` due deliveries, send them over ``slots``
        (one POST in flight on each), record the outcomes; returns how many were claimed."""
        cfg = self._config
        now = self._clock()
        claimed = await self._deliveries.claim_deliveries(
            now_us=now, limit=cfg.batch, claim_us=int(cfg.claim_s * 1_000_000)
        )
        if not claimed:
            return 0
        results: list[DeliveryResult | None] = [None] * len(claimed)
        # By URL, so a slot's next delivery mostly goes where its kept-alive connection does.
        todo = deque(sorted(range(len(claimed)), key=lambda i: claimed[i].url))

        async def slot(client: httpx.AsyncBaseTransport) -> None:
            while todo:
                i = todo.popleft()
                results[i] = await self._attempt(client, claimed[i])

        try:
            async with anyio.create_task_group() as tg:
                for client in slots[: len(claimed)]:
                    tg.start_soon(slot, client)
        finally:
            # Record the attempts made; one cut short (shutdown) is due again at once rather
            # than when its claim runs out.
            ended = [
                r or DeliveryResult(c.delivery_id, self._clock(), "interrupted")
                for r, c in zip(results, claimed, strict=True)
            ]
            with anyio.move_on_after(self._config.timeout_s, shield=True):
                await self._deliveries.finish_deliveries(ended)
        return len(claimed)

    async def _attempt(
        self, client: httpx.AsyncBaseTransport, claim: DeliveryClaim
    ) -> DeliveryResult:
        """Send one claimed delivery; its outcome (counted in the metrics). Never raises
        (but cancellation): a delivery that cannot be handled fails for good."""
        try:
            return await self._try(client, claim)
        except _Permanent as exc:
            return self._fail(claim, str(exc))
        except Exception as exc:  # one row must not stop the deliverer (module docstring)
            return self._fail(claim, f"{type(exc).__name__}: {exc}")

    async def _try(self, client: httpx.AsyncBaseTransport, claim: DeliveryClaim) -> DeliveryResult:
        cfg = self._config
        now = self._clock()
        if now > claim.created_at + int(cfg.max_age_s * 1_000_000):
            return self._give_up(claim, "expired", "older than webhooks.max_age_s")
        job = claim.job
        if job is None:
            return self._give_up(claim, "gone", "the job no longer exists")
        url = self._checked_url(claim.url)
        error = await self._post(client, claim, url, job)
        if error is None:
            self._metrics.webhook_deliveries.labels("delivered").inc()
            return DeliveryResult(claim.delivery_id, None)
        at = retry_at(
            self._clock(), claim.created_at, claim.attempts,
            base_ms=cfg.backoff_base_ms, max_s=cfg.backoff_max_s, max_age_s=cfg.max_age_s,
        )  # fmt: skip
        if at is None:
            return self._give_up(claim, "expired", error)
        self._metrics.webhook_deliveries.labels("failed").inc()
        log.info(
            "webhook_retry", delivery=id_str(claim.delivery_id), url=redact_url(claim.url),
            attempts=claim.attempts, error=error, retry_in_s=round((at - now) / 1e6, 3),
        )  # fmt: skip
        return DeliveryResult(claim.delivery_id, at, error[:_ERROR_CHARS])

    def _checked_url(self, url: str) -> str:
        """``url`` with its host in one spelling, if the ``[webhooks]`` rules may allow it
        (a name is checked again when connecting); remembered per URL (the rules do not
        change while the process runs), so a receiver's deliveries pay for it once.

        :raises _Permanent: the URL does not parse or is refused — a row an older version
            wrote may hold what is refused today: failed, not retried.
        """
        known = self._checked.get(url)
        if known is None:
            try:
                spelled, refused = self._rules.check_url(url)
                known = (spelled, None) if refused is None else (None, f"refused: {refused}")
            except ValueError as exc:
                known = (None, f"the URL is not valid: {exc}")
            if len(self._checked) >= _CHECKED_URLS:
                self._checked.clear()
            self._checked[url] = known
        checked, problem = known
        if checked is None:
            raise _Permanent(str(problem))
        return checked

    async def _post(
        self, client: httpx.AsyncBaseTransport, claim: DeliveryClaim, url: str, job: JobRecord
    ) -> str | None:
        """POST the job's JSON to ``url``; ``None`` on a 2xx answer, else what went wrong.

        :raises _Permanent: the destination is refused at connect time.
        """
        if claim.secret is None:
            return "the scope has no signing secret"
        body = msgspec.json.encode(job_status(job, claim.family or JobFamily(None)))
        headers = sign_headers(
            claim.secret, id_str(claim.delivery_id), body, datetime.fromtimestamp(time.time(), UTC)
        )
        request = httpx.Request(
            "POST", url, content=body, headers=headers,
            extensions={"timeout": dict.fromkeys(_PHASES, self._config.timeout_s)},
        )  # fmt: skip
        try:
            # Bounded as a whole (the phases' timeouts bound each step only), so an attempt
            # ends well within its claim (webhooks.claim_s > timeout_s).
            with anyio.fail_after(self._config.timeout_s):
                resp = await client.handle_async_request(request)
                try:  # read (at most a little of) the answer, so its connection is kept
                    read = 0
                    async for chunk in resp.aiter_raw():
                        read += len(chunk)
                        if read > _MAX_ANSWER_BYTES:
                            break
                finally:
                    await resp.aclose()
        except Refused as exc:
            raise _Permanent(f"refused: {exc.reason}") from None
        except TimeoutError:
            return f"no answer within webhooks.timeout_s ({self._config.timeout_s} s)"
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if 200 <= resp.status_code < 300:
            return None
        return f"HTTP {resp.status_code}"

    def _fail(self, claim: DeliveryClaim, why: str) -> DeliveryResult:
        """A delivery that can never be made: kept ``failed`` with ``why``, never retried."""
        self._metrics.webhook_deliveries.labels("failed_permanently").inc()
        log.warning(
            "webhook_failed", delivery=id_str(claim.delivery_id), job=id_str(claim.job_id),
            url=redact_url(claim.url), attempts=claim.attempts, reason=why,
        )  # fmt: skip
        return DeliveryResult(claim.delivery_id, None, why[:_ERROR_CHARS], failed=True)

    def _give_up(self, claim: DeliveryClaim, outcome: str, why: str) -> DeliveryResult:
        self._metrics.webhook_deliveries.labels(outcome).inc()
        log.warning(
            "webhook_given_up", delivery=id_str(claim.delivery_id), job=id_str(claim.job_id),
            url=redact_url(claim.url), outcome=outcome, attempts=claim.attempts, reason=why,
        )  # fmt: skip
        return DeliveryResult(claim.delivery_id, None)
