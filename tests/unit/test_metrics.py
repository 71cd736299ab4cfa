"""The metrics registry on its own: bounded worker-stat series, job gauges that drop to 0,
channel statistics read at scrape time."""

from __future__ import annotations

import anyio
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from telha.metrics import MAX_WORKER_STATS, Metrics


def _samples(m: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(m.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_worker_stats_numeric_only_and_bounded() -> None:
    m = Metrics()
    m.worker_stats("ingest:csv", {"rows": 10, "ratio": 0.5, "ok": True, "name": "x", "bad-name": 1})
    out = _samples(m)
    assert (
        out[("telha_worker_stat_sum", frozenset({("kind", "ingest:csv"), ("stat", "rows")}))] == 10
    )
    assert (
        "telha_worker_stat_count",
        frozenset({("kind", "ingest:csv"), ("stat", "ok")}),
    ) not in out
    assert out[("telha_worker_stats_dropped_total", frozenset())] == 1  # "bad-name"
    m.worker_stats("ingest:csv", {f"s{i}": 1 for i in range(MAX_WORKER_STATS + 10)})
    series = {k for k in _samples(m) if k[0] == "telha_worker_stat_count"}
    assert len(series) == MAX_WORKER_STATS


def test_job_gauges_report_zero_once_a_kind_drains() -> None:
    m = Metrics()
    m.set_job_counts({("ingest:text", "pending"): 3, ("ingest:text", "leased"): 1})
    m.set_job_counts({})
    out = _samples(m)
    assert out[("telha_jobs", frozenset({("kind", "ingest:text"), ("state", "pending")}))] == 0
    assert out[("telha_jobs", frozenset({("kind", "ingest:text"), ("state", "leased")}))] == 0


def test_channel_statistics_are_read_at_scrape_time() -> None:
    send, recv = anyio.create_memory_object_stream[int](4)
    with send, recv:
        m = Metrics()
        m.watch_channels(lambda: {"test.chan": recv.statistics()})
        send.send_nowait(1)
        send.send_nowait(2)
        out = _samples(m)
    label = frozenset({("channel", "test.chan")})
    assert out[("telha_channel_items", label)] == 2
    assert out[("telha_channel_capacity", label)] == 4
    assert out[("telha_channel_waiting_senders", label)] == 0


def test_request_dedup_counts_no_bytes() -> None:
    m = Metrics()
    m.ingest_accepted("text", "enqueued", 100)
    m.ingest_accepted("text", "deduplicated", 100)
    out = _samples(m)
    assert out[("telha_ingested_bytes_total", frozenset({("format", "text")}))] == 100
    hits = frozenset({("stage", "request"), ("kind", "ingest:text")})
    assert out[("telha_dedup_hits_total", hits)] == 1
