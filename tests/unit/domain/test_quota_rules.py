"""The pure quota rules (:mod:`telha.domain.quotas`): the token bucket on an injected clock
(a burst, then one request per 1/rate seconds, the wait it answers, refilling to its size
only), ``telha scope set`` values (numbers >= 0, integers where counts, ``default``, refused
with the key named), and a scope's own values over the defaults; the ``[quotas]`` config keys
are refused below 0 with their dotted name; the slot shares default to half the global limit,
rounded up."""

from __future__ import annotations

import math

import pytest

from telha.config import ConfigError, load_config
from telha.domain.quotas import LIMIT_KEYS, Limits, TokenBucket, default_limits, parse_limit


def test_a_bucket_admits_its_burst_then_one_per_interval() -> None:
    bucket = TokenBucket(rate=2.0, size=3, now_s=100.0)
    assert [bucket.take(100.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(100.0) == pytest.approx(0.5)  # the next token in 1/rate s
    assert bucket.take(100.25) == pytest.approx(0.25)  # nothing was taken meanwhile
    assert bucket.take(100.5) == 0.0
    assert bucket.take(100.5) == pytest.approx(0.5)
    # A long pause refills to the size, never beyond.
    assert [bucket.take(1000.0) for _ in range(4)][:3] == [0.0, 0.0, 0.0]
    assert bucket.take(1000.0) > 0
    # A clock that goes backwards adds nothing.
    assert bucket.take(999.0) > 0


def test_a_slow_rate_waits_longer_than_a_second() -> None:
    bucket = TokenBucket(rate=0.25, size=1, now_s=0.0)
    assert bucket.take(0.0) == 0.0
    assert bucket.take(0.0) == pytest.approx(4.0)
    assert bucket.take(3.0) == pytest.approx(1.0)
    assert bucket.take(4.0) == 0.0


def test_limits_with_a_scopes_own_values() -> None:
    defaults = Limits(max_pending_jobs=100, requests_per_second=5.0)
    own = defaults.with_overrides({"max_pending_jobs": 3.0, "burst": 7.0, "other": 1.0})
    assert own == Limits(max_pending_jobs=3, requests_per_second=5.0, burst=7)
    assert isinstance(own.max_pending_jobs, int)
    assert own.bucket_size == 7
    assert Limits(requests_per_second=2.5).bucket_size == 3  # the rate rounded up
    assert Limits(requests_per_second=0.2).bucket_size == 1
    assert Limits() == Limits().with_overrides({})


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("max_pending_jobs", "10", 10.0),
        ("max_pending_jobs", "0", 0.0),
        ("max_stored_bytes", "10737418240", 10737418240.0),
        ("requests_per_second", "2.5", 2.5),
        ("burst", "default", None),
        ("max_concurrent_ingests", "3", 3.0),
        ("max_event_streams", "0", 0.0),
    ],
)
def test_scope_set_values(key: str, value: str, expected: float | None) -> None:
    assert parse_limit(key, value) == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_pending_jobs", "-1"),
        ("max_pending_jobs", "1.5"),
        ("burst", "lots"),
        ("requests_per_second", "nan"),
        ("requests_per_second", "inf"),
        ("requests_per_second", "-0.5"),
        ("max_stored_bytes", str(2**60)),
        ("max_concurrent_ingests", "1.5"),
        ("max_event_streams", "-2"),
    ],
)
def test_scope_set_refuses_bad_values_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=key):
        parse_limit(key, value)


def test_scope_set_refuses_an_unknown_key() -> None:
    with pytest.raises(ValueError, match="max_things"):
        parse_limit("max_things", "1")
    assert set(LIMIT_KEYS) == {
        "max_pending_jobs",
        "max_stored_bytes",
        "requests_per_second",
        "burst",
        "max_concurrent_ingests",
        "max_event_streams",
    }


def test_quota_config_defaults_and_bad_values() -> None:
    cfg, _ = load_config(None, environ={})
    assert (cfg.quotas.max_pending_jobs, cfg.quotas.requests_per_second) == (0, 0.0)
    env = {"TELHA_QUOTAS__REQUESTS_PER_SECOND": "7", "TELHA_QUOTAS__BURST": "9"}
    cfg, _ = load_config(None, environ=env)
    assert math.isclose(cfg.quotas.requests_per_second, 7.0) and cfg.quotas.burst == 9
    with pytest.raises(ConfigError) as caught:
        load_config(None, environ={"TELHA_QUOTAS__MAX_STORED_BYTES": "-5"})
    assert caught.value.key == "quotas.max_stored_bytes"
    with pytest.raises(ConfigError) as caught:
        load_config(None, environ={"TELHA_QUOTAS__MAX_BYTES": "5"})
    assert caught.value.key == "quotas.max_bytes"


def test_slot_shares_default_to_half_the_global_limit() -> None:
    cfg, _ = load_config(None, environ={})
    assert (cfg.quotas.max_concurrent_ingests, cfg.quotas.max_event_streams) == (None, None)
    limits = default_limits(cfg.quotas, ingest_slots=16, event_streams=1000)
    assert (limits.max_concurrent_ingests, limits.max_event_streams) == (8, 500)
    odd = default_limits(cfg.quotas, ingest_slots=5, event_streams=1)
    assert (odd.max_concurrent_ingests, odd.max_event_streams) == (3, 1)  # rounded up
    # [quotas] sets every scope's share; 0 is every slot; a scope's own value wins.
    env = {"TELHA_QUOTAS__MAX_CONCURRENT_INGESTS": "2", "TELHA_QUOTAS__MAX_EVENT_STREAMS": "0"}
    cfg, _ = load_config(None, environ=env)
    limits = default_limits(cfg.quotas, ingest_slots=16, event_streams=1000)
    assert (limits.max_concurrent_ingests, limits.max_event_streams) == (2, 0)
    own = limits.with_overrides({"max_concurrent_ingests": 5.0})
    assert own.max_concurrent_ingests == 5 and isinstance(own.max_concurrent_ingests, int)
    for key in ("max_concurrent_ingests", "max_event_streams"):
        with pytest.raises(ConfigError) as caught:
            load_config(None, environ={f"TELHA_QUOTAS__{key.upper()}": "-1"})
        assert caught.value.key == f"quotas.{key}"
