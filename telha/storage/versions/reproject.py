"""What re-projection reads (docs/rest-api.md, "Re-projection"), written once for both
engines: a scope's current versions a page at a time, with what is needed to decide whether
each is outdated (its identity) and to read its bytes again (its job's payload, whether its
raw upload is stored). Erased and retired sources are not current, so never listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from telha.domain.model import Scope
from telha.storage.core.tx import Tx

__all__ = ["ReprojectRow", "current_versions"]


@dataclass(frozen=True, slots=True)
class ReprojectRow:
    """A source's current version as re-projection sees it.

    :ivar payload: its job's ``IngestJobPayload`` JSON (``None``: no job, or it is gone).
    :ivar raw_stored: its raw bytes are stored complete (an upload's ``content_ref``).
    """

    source_id: bytes
    name: str
    format: str
    content_hash: bytes
    size: int
    fingerprint: bytes | None
    identity: bytes | None
    payload: bytes | None
    raw_stored: bool


async def current_versions(
    tx: Tx,
    scope: Scope,
    fmt: str | None,
    source_id: bytes | None,
    after: bytes,
    limit: int,
) -> list[ReprojectRow]:
    """Up to ``limit`` current versions of ``scope`` (source state ``current``) with a
    source id above ``after``, in source id order; only format ``fmt`` and source
    ``source_id`` when given."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    where = ""
    params: list[object] = [sid, after]
    if fmt is not None:
        where += " AND s.format = ?"
        params.append(fmt)
    if source_id is not None:
        where += " AND s.source_id = ?"
        params.append(source_id)
    rows = await tx.fetchall(
        "SELECT v.source_id, v.name, v.format, v.content_hash, v.size, v.fingerprint,"
        " v.identity, j.payload, (SELECT r.complete FROM raw_blobs r"
        " WHERE r.scope_id = v.scope_id AND r.content_hash = v.content_hash)"
        " FROM sources s JOIN source_versions v ON v.scope_id = s.scope_id"
        " AND v.source_id = s.source_id AND v.tx = s.latest_tx"
        " LEFT JOIN jobs j ON j.job_id = v.job_id"
        f" WHERE s.scope_id = ? AND s.state = 'current' AND s.source_id > ?{where}"
        f" ORDER BY s.source_id LIMIT {int(limit)}",
        *params,
    )
    return [_row(r) for r in rows]


def _row(r: Any) -> ReprojectRow:
    return ReprojectRow(
        bytes(r[0]), r[1], r[2], bytes(r[3]), int(r[4]),
        bytes(r[5]) if r[5] is not None else None,
        r[6].encode() if isinstance(r[6], str) else r[6],
        bytes(r[7]) if r[7] is not None else None,
        bool(r[8]),
    )  # fmt: skip
