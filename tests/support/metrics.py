"""Reading a Prometheus text page in tests, with prometheus-client's own parser."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Samples", "parse", "scrape", "value"]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of a Prometheus text page: ``(name, labels) -> value``."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when absent, as for a counter not yet incremented)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(base_url: str) -> Samples:
    """``GET /metrics`` of a server (no key), parsed."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as anon:
        resp = await anon.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    return parse(resp.text)
