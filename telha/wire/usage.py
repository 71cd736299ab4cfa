"""The wire shapes of ``GET /v1/usage`` (docs/rest-api.md, "Usage"); re-exported by
:mod:`telha.wire`."""

from __future__ import annotations

import msgspec

__all__ = ["LimitsOut", "UsageOut"]


class _Out(msgspec.Struct, rename="camel", kw_only=True):
    pass


class LimitsOut(_Out):
    """A scope's limits in ``GET /v1/usage``; ``null``: not limited. ``burst`` is the
    requests a key may make at once (set only with ``requestsPerSecond``).
    ``maxConcurrentIngests`` and ``maxEventStreams`` are the slots the scope may hold at
    once on the replica that answers: its share of ``ingest.max_concurrent`` and
    ``server.max_event_streams`` (never ``null``: the global limit bounds them;
    docs/operations.md, "Fair slots"). ``0`` when an older server did not send them."""

    max_pending_jobs: int | None
    max_stored_bytes: int | None
    requests_per_second: float | None
    burst: int | None
    max_concurrent_ingests: int = 0
    max_event_streams: int = 0


class UsageOut(_Out):
    """``GET /v1/usage``: the key's scope's jobs in state ``pending``, its stored bytes (raw
    uploads plus canonical text), its ``POST /v1/ingest`` requests in progress and its open
    event streams (both on the replica that answers, this request not counted), and its
    limits."""

    pending_jobs: int
    stored_bytes: int
    limits: LimitsOut
    ingests_in_progress: int = 0
    event_streams: int = 0
