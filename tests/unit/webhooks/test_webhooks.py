"""The pure webhook rules (:mod:`telha.domain.webhooks`) and the delivery signature
(:func:`telha.webhooks.deliverer.sign_headers`, checked with the ``standardwebhooks`` library)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from telha.config import WebhooksConfig
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
from telha.webhooks.deliverer import sign_headers

HOSTS = WebhooksConfig(allowed_hosts=["127.0.0.1"]).rules()
DEFAULT = WebhooksConfig().rules()


def test_events_are_bits_of_the_terminal_states() -> None:
    assert [event_bit(s) for s in TERMINAL_JOB_STATES] == [1, 2, 4]
    assert event_bit("pending") == event_bit("leased") == 0
    assert event_names(ALL_EVENTS) == list(TERMINAL_JOB_STATES)
    assert event_names(event_bit("dead") | event_bit("cancelled")) == ["dead", "cancelled"]


def test_parse_webhook_option() -> None:
    url = "http://127.0.0.1:8000/hook?x=1"
    assert parse_webhook_option({"url": url}, HOSTS) == WebhookTarget(url, ALL_EVENTS)
    assert parse_webhook_option({"url": url, "events": ["dead"]}, HOSTS).events == 2
    assert parse_webhook_option({"url": "https://8.8.8.8/h"}, DEFAULT).url.startswith("https")
    named = WebhooksConfig(allowed_hosts=["localhost"]).rules()
    assert parse_webhook_option({"url": "https://LocalHost/h"}, named).events == 7
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
        ({"url": "http://256.0.0.1/"}, "not a valid URL"),
        ({"url": "http://xn--zz/"}, "not a valid URL"),
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


#: Every spelling of a refused destination (docs/operations.md, "Webhooks"): each must be
#: answered at request time, with the default rules (nothing listed, private denied).
UNPARSABLE = [
    "http://256.0.0.1/",
    "http://1.2.3.4.5/",
    "http://xn--zz/",
    "http://ｅｘａｍｐｌｅ\u3000.com/",  # a full-width name with an ideographic space
    "http://exa%zzmple.com/",
    "http://[::1/",
    "http://[fe80::1%25eth0]/",
    "http://example.com:0/",
    "http://example.com:99999/",
    "http://example.com:8o/",
    "http://exa mple.com/",
]
REFUSED = [
    "http://0177.0.0.1:9/x",
    "http://127.0.0.1/",
    "http://127.1:8080/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::1]:9/",
    "http://169.254.169.254/latest/meta-data/",
    "http://169.254.43518/",
    "http://１２７．０．０．１/",  # full-width digits and dots: 127.0.0.1
    "http://%31%32%37.0.0.1/",
    "http://10.0.0.1/",
    "http://100.64.0.1/",
    "http://0.0.0.0/",
    "http://224.0.0.1/",
    "http://[fd00::1]/",
]


@pytest.mark.parametrize("url", UNPARSABLE)
def test_unparsable_url_is_refused_naming_the_field(url: str) -> None:
    with pytest.raises(RequestError) as err:
        parse_webhook_option({"url": url}, DEFAULT)
    assert err.value.message.startswith("options.webhook.url is not a valid URL"), err.value


@pytest.mark.parametrize("url", REFUSED)
def test_private_address_in_any_spelling_is_refused(url: str) -> None:
    with pytest.raises(RequestError) as err:
        parse_webhook_option({"url": url}, DEFAULT)
    message = err.value.message
    assert message.startswith("options.webhook.url is refused"), message
    assert "[webhooks] allowed_hosts" in message


def test_spellings_are_stored_normalised() -> None:
    full_width = "http://ｅｘａｍｐｌｅ．ｃｏｍ/h?x=1"
    assert parse_webhook_option({"url": full_width}, DEFAULT).url == "http://example.com/h?x=1"
    assert parse_webhook_option({"url": "https://HOOKS.example.com./a"}, DEFAULT).url == (
        "https://hooks.example.com/a"
    )
    url = "http://127.0.0.1:8000/hook?x=1"
    assert parse_webhook_option({"url": url}, HOSTS).url == url  # already one spelling


def test_allow_list_port_cidr_and_name_entries() -> None:
    rules = WebhooksConfig(
        allowed_hosts=["127.0.0.1:8000", "10.0.0.0/8", "hooks.example.com", "[::1]:9000"]
    ).rules()
    ok = ["http://127.0.0.1:8000/", "http://10.2.3.4:99/", "http://hooks.example.com:1/"]
    ok += ["http://[::1]:9000/", "http://0x7f.1:8000/"]
    for url in ok:
        assert parse_webhook_option({"url": url}, rules).url, url
    for url in ["http://127.0.0.1:8001/", "http://127.0.0.1/", "http://11.0.0.1/"]:
        with pytest.raises(RequestError, match=r"not on \[webhooks\] allowed_hosts"):
            parse_webhook_option({"url": url}, rules)
    # A name no entry lists may still resolve into 10.0.0.0/8: decided when connecting.
    assert parse_webhook_option({"url": "http://other.example.com/"}, rules).url
    only_names = WebhooksConfig(allowed_hosts=["hooks.example.com:443"]).rules()
    with pytest.raises(RequestError, match="not on"):
        parse_webhook_option({"url": "http://hooks.example.com/"}, only_names)
    with pytest.raises(RequestError, match="not on"):
        parse_webhook_option({"url": "https://other.example.com/"}, only_names)
    assert parse_webhook_option({"url": "https://hooks.example.com/x"}, only_names).url
