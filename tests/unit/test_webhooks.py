"""The pure webhook rules (:mod:`telha.domain.webhooks`) and the delivery signature
(:func:`telha.deliverer.sign_headers`, checked with the ``standardwebhooks`` library)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from telha.deliverer import sign_headers
from telha.domain.errors import RequestError
from telha.domain.model import TERMINAL_JOB_STATES, WebhookTarget
from telha.domain.webhooks import (
    ALL_EVENTS,
    event_bit,
    event_names,
    new_secret,
    parse_webhook_option,
    retry_at,
    split_webhook_option,
)

HOSTS = ["127.0.0.1"]


def test_events_are_bits_of_the_terminal_states() -> None:
    assert [event_bit(s) for s in TERMINAL_JOB_STATES] == [1, 2, 4]
    assert event_bit("pending") == event_bit("leased") == 0
    assert event_names(ALL_EVENTS) == list(TERMINAL_JOB_STATES)
    assert event_names(event_bit("dead") | event_bit("cancelled")) == ["dead", "cancelled"]


def test_parse_webhook_option() -> None:
    url = "http://127.0.0.1:8000/hook?x=1"
    assert parse_webhook_option({"url": url}, HOSTS) == WebhookTarget(url, ALL_EVENTS)
    assert parse_webhook_option({"url": url, "events": ["dead"]}, HOSTS).events == 2
    assert parse_webhook_option({"url": "https://127.0.0.1/h"}, []).url.startswith("https")
    assert parse_webhook_option({"url": "https://LocalHost/h"}, ["localhost"]).events == 7
    options, target = split_webhook_option({"webhook": {"url": url}, "sheet": "a"}, HOSTS)
    assert options == {"sheet": "a"} and target is not None
    assert split_webhook_option({"sheet": "a"}, HOSTS) == ({"sheet": "a"}, None)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("http://127.0.0.1/", "must be an object"),
        ({}, "url must be a non-empty string"),
        ({"url": 5}, "url must be a non-empty string"),
        ({"url": "ftp://127.0.0.1/"}, "http or https"),
        ({"url": "file:///etc/passwd"}, "http or https"),
        ({"url": "http:///nohost"}, "no host"),
        ({"url": "http://127.0.0.1:99999/"}, "not a valid URL"),
        ({"url": "http://127.0.0.2/"}, "allowed_hosts"),
        ({"url": "http://127.0.0.1/" + "x" * 2048}, "longer than"),
        ({"url": "http://127.0.0.1/", "events": "dead"}, "must be a list"),
        ({"url": "http://127.0.0.1/", "events": []}, "at least one"),
        ({"url": "http://127.0.0.1/", "events": ["leased"]}, "unknown event"),
        ({"url": "http://127.0.0.1/", "headers": {}}, "unknown key"),
    ],
)
def test_bad_webhook_option(value: object, needle: str) -> None:
    with pytest.raises(RequestError) as err:
        parse_webhook_option(value, HOSTS)
    assert "options.webhook" in err.value.message and needle in err.value.message


def test_retry_schedule_backs_off_then_gives_up() -> None:
    created, now = 1_000_000_000, 1_000_000_000
    kw = {"base_ms": 1000, "max_s": 60.0, "max_age_s": 3600.0}
    delays = [retry_at(now, created, n, **kw) for n in range(1, 12)]
    assert all(d is not None for d in delays)
    # Equal jitter: within [d/2, d] of base · 2^(n-1), capped at max_s.
    for n, at in enumerate(delays, start=1):
        d = min(60_000_000, 1_000_000 << (n - 1))
        assert at is not None and d // 2 <= at - now <= d
    # Past max_age_s from the job's end: give up.
    assert retry_at(created + 3600 * 1_000_000 - 10, created, 3, **kw) is None


def test_signature_verifies_with_standardwebhooks() -> None:
    secret = new_secret()
    assert secret.startswith("whsec_") and new_secret() != secret
    body = b'{"jobId":"x","state":"completed"}'
    headers = sign_headers(secret, "msg-1", body, datetime.now(UTC))
    assert Webhook(secret).verify(body, headers) == {"jobId": "x", "state": "completed"}
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body + b" ", headers)
