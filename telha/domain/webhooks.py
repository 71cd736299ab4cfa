"""Webhook rules with no I/O (docs/operations.md, "Webhooks"): the ``options.webhook`` value
of an ingest, the event bit set stored with a subscription, the scope's signing secret and
the delivery retry schedule.

A subscription's ``events`` are the terminal states it wants
(:data:`~telha.domain.model.TERMINAL_JOB_STATES`), stored as a bit set so a job's terminal
transaction selects its targets with one ``events & bit`` test on either engine.
"""

from __future__ import annotations

import base64
import random
import secrets
from collections.abc import Sequence
from typing import Any, Protocol

from telha.domain.errors import RequestError
from telha.domain.model import TERMINAL_JOB_STATES, WebhookTarget
from telha.domain.policy import backoff_us

__all__ = [
    "ALL_EVENTS",
    "MAX_URL_CHARS",
    "UrlRules",
    "event_bit",
    "event_names",
    "events_mask",
    "new_secret",
    "parse_webhook_option",
    "retry_at",
    "split_webhook_option",
    "validate_url",
]

#: Longest accepted webhook URL, in characters.
MAX_URL_CHARS = 2048


def event_bit(state: str) -> int:
    """The bit of terminal state ``state`` in a subscription's ``events`` (0 for any other
    state, so a non-terminal state selects no subscription)."""
    return 1 << TERMINAL_JOB_STATES.index(state) if state in TERMINAL_JOB_STATES else 0


#: Every terminal state: a subscription's default.
ALL_EVENTS = sum(1 << i for i in range(len(TERMINAL_JOB_STATES)))


def events_mask(names: Sequence[str], field: str) -> int:
    """The bit set of event names ``names`` (each a terminal state, at least one).

    :raises RequestError: an empty list or an unknown name (``field`` names the input).
    """
    if not names:
        raise RequestError(f"{field} must name at least one of {', '.join(TERMINAL_JOB_STATES)}")
    mask = 0
    for name in names:
        if not isinstance(name, str) or name not in TERMINAL_JOB_STATES:
            raise RequestError(
                f"{field}: unknown event {name!r}; expected {', '.join(TERMINAL_JOB_STATES)}"
            )
        mask |= event_bit(name)
    return mask


def event_names(mask: int) -> list[str]:
    """The terminal states in bit set ``mask``, in :data:`TERMINAL_JOB_STATES` order."""
    return [s for s in TERMINAL_JOB_STATES if mask & event_bit(s)]


class UrlRules(Protocol):
    """Destination rules as :func:`validate_url` uses them: the ``[webhooks]``
    :class:`workers_common.destinations.Destinations` (``WebhooksConfig.rules()``)."""

    def check_url(self, url: str) -> tuple[str, str | None]:
        """``url`` with its host in one spelling, and why it is refused (``None``: it may
        be tried); raises ``ValueError`` when a browser could not parse it."""
        ...


def validate_url(url: object, rules: UrlRules, field: str) -> str:
    """``url`` read as a browser reads it (:func:`workers_common.hosts.parse_url`), with its
    host in its one ASCII spelling, if ``rules`` may allow it: an address literal in any
    spelling is checked now; a name is checked again, resolved, when a delivery connects
    (docs/operations.md, "Webhooks").

    :param field: the input's name in messages (``options.webhook.url``, ``URL``).
    :raises RequestError: not a string, too long, not an ``http``/``https`` URL a browser
        could parse (bad host, port, IDNA label), or refused by ``rules``.
    """
    if not isinstance(url, str) or not url:
        raise RequestError(f"{field} must be a non-empty string")
    if len(url) > MAX_URL_CHARS:
        raise RequestError(f"{field} is longer than {MAX_URL_CHARS} characters")
    try:
        normal, refused = rules.check_url(url)
    except ValueError as exc:
        raise RequestError(f"{field} is not a valid URL: {exc}") from None
    if refused is not None:
        raise RequestError(f"{field} is refused: {refused}")
    return normal


def parse_webhook_option(value: Any, rules: UrlRules) -> WebhookTarget:
    """The target of an ingest's ``options.webhook``: ``{"url": "...", "events": [...]}``,
    ``events`` defaulting to every terminal state; ``url`` checked by :func:`validate_url`.

    :raises RequestError: not an object, an unknown key, a bad URL or event (the message
        names ``options.webhook``).
    """
    field = "options.webhook"
    if not isinstance(value, dict):
        raise RequestError(f'{field} must be an object like {{"url": "https://…"}}')
    unknown = sorted(set(value) - {"url", "events"})
    if unknown:
        raise RequestError(f"{field}: unknown key {unknown[0]!r} (expected url, events)")
    url = validate_url(value.get("url"), rules, f"{field}.url")
    events = value.get("events")
    if events is None:
        return WebhookTarget(url, ALL_EVENTS)
    if not isinstance(events, list):
        raise RequestError(f"{field}.events must be a list of event names")
    return WebhookTarget(url, events_mask(events, f"{field}.events"))


def split_webhook_option(
    options: dict[str, Any], rules: UrlRules
) -> tuple[dict[str, Any], WebhookTarget | None]:
    """An ingest's ``options`` without ``webhook`` (what the worker is given) and the
    target it named, if any.

    :raises RequestError: a bad ``options.webhook`` (:func:`parse_webhook_option`).
    """
    if "webhook" not in options:
        return options, None
    target = parse_webhook_option(options["webhook"], rules)
    return {k: v for k, v in options.items() if k != "webhook"}, target


def new_secret() -> str:
    """A fresh signing secret, ``whsec_`` and 32 random bytes in base64 (the Standard
    Webhooks form)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def retry_at(
    now_us: int, created_at: int, attempts: int, *, base_ms: int, max_s: float, max_age_s: float
) -> int | None:
    """When to try a delivery again after its ``attempts``-th failed attempt (µs): the
    jittered exponential backoff of :func:`telha.domain.policy.backoff_us`; ``None`` (give up)
    when that is past ``created_at + max_age_s``."""
    at = now_us + backoff_us(attempts, base_ms=base_ms, max_s=max_s, rng=random.Random())
    return at if at <= created_at + int(max_age_s * 1_000_000) else None
