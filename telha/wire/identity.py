"""The wire shapes of a version's identity and of re-projection (docs/rest-api.md,
"Versions and diffs" and "Re-projection"); re-exported by :mod:`telha.wire`."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["OutdatedOut", "ProjectionOut", "ReprojectOut"]


class _Out(msgspec.Struct, rename="camel", kw_only=True):
    pass


class OutdatedOut(_Out):
    """A current version re-projection reads again (or would, in a dry run): why
    (``options`` or ``projection``), its fingerprint (``null``: from before fingerprints),
    the fingerprint a request would expect now, and its job (``null``: a dry run, or the
    bytes are gone)."""

    source_id: str
    name: str
    format: str
    reason: str
    fingerprint: str | None
    expected_fingerprint: str
    job_id: str | None = None


class ReprojectOut(_Out):
    """``POST /v1/reproject``: the outdated current versions (each with its job, unless a
    dry run), those whose raw bytes are gone (listed, not read), and how many are up to
    date."""

    dry_run: bool
    outdated: list[OutdatedOut]
    raw_gone: list[OutdatedOut]
    up_to_date: int


class ProjectionOut(_Out):
    """A version's identity: the worker that read its bytes, its projection version, the
    parser library versions that shaped the output, the format and the effective options
    (defaults filled in)."""

    worker: str
    projection: int
    parsers: dict[str, str]
    format: str
    options: dict[str, Any]
