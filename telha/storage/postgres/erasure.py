"""GDPR erasure on PostgreSQL (issue 11; the steps are described in
:mod:`telha.domain.erasure`), with the SQLite engine's semantics: every step is one
transaction that locks the erase job's row (the lease fence) and records itself.

PostgreSQL keeps the old version of every updated or deleted row in the table's pages until
VACUUM reclaims it: what an operator runs after an erasure is in migration 0004 and README
("GDPR erasure"). Also here: :func:`purge_stream` for a stream whose content turned out
blocklisted at finalize.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import blake3

from telha.domain.erasure import (
    ERASE_KIND,
    LEFTOVER_CHECKS,
    STEPS,
    VERSION_KEYS,
    Counts,
    ErasePayload,
    NodeRow,
    Versions,
    blockable,
    decode_payload,
    erased_reason,
    parse_step,
    plan_nodes,
    result_body,
    step_detail,
    totals,
)
from telha.domain.model import JobCompletion, LeaseRef, NewJob, Scope
from telha.storage.postgres.base import Conn, PgBase, lock_sources
from telha.storage.postgres.jobs import (
    add_event,
    check_lease,
    complete_tx,
    end_erased,
    enqueue_tx,
    scrub_job,
)

__all__ = ["ErasureMixin", "purge_stream"]

_CLOCK = (
    "UPDATE tx_clock SET tx = greatest(tx + 1,"
    " (extract(epoch FROM clock_timestamp()) * 1000000)::bigint) WHERE id = 1 RETURNING tx"
)


async def purge_stream(conn: Conn, sid: int, source_id: bytes, tx: int) -> None:
    """Delete everything a stream pinned at ``tx`` wrote (its version row, text, nodes, edges,
    spans), after :func:`~telha.storage.postgres.jobs.abandon_stream` gave the versions it
    had closed back their ends."""
    blob_id = await conn.fetchval(
        "DELETE FROM source_versions WHERE scope_id = $1 AND source_id = $2 AND tx = $3"
        " RETURNING blob_id",
        sid,
        source_id,
        tx,
    )
    if blob_id is not None:
        await conn.execute(
            "DELETE FROM blob_chunks WHERE scope_id = $1 AND blob_id = $2", sid, blob_id
        )
    await conn.execute(
        "DELETE FROM span_rows WHERE scope_id = $1 AND source_id = $2 AND source_version_tx = $3",
        sid,
        source_id,
        tx,
    )
    await conn.execute(
        "DELETE FROM nodes WHERE scope_id = $1 AND source_id = $2 AND tx_from = $3",
        sid,
        source_id,
        tx,
    )
    for table, col in (("node_labels", "tx_from"), ("edges", "tx_from"), ("ambiguities", "tx")):
        await conn.execute(f"DELETE FROM {table} WHERE scope_id = $1 AND {col} = $2", sid, tx)


def _versions(rows: Sequence[Any]) -> Versions:
    return {(r[0], r[1]): (r[2], r[3], r[4], r[5]) for r in rows}


async def _erased_versions(conn: Conn, erasure_id: bytes) -> Versions:
    return _versions(
        await conn.fetch(
            f"SELECT {VERSION_KEYS} FROM source_versions WHERE erasure_id = $1 ORDER BY tx",
            erasure_id,
        )
    )


class ErasureMixin(PgBase):
    """Erasure operations of the PostgreSQL engine; see
    :class:`telha.storage.protocol.Storage`."""

    async def has_source(self, scope: Scope, source_id: bytes) -> bool:
        """See :meth:`telha.storage.protocol.Storage.has_source`."""
        sid = await self._scope_id(scope)
        if sid is None:
            return False
        rows = await self._fetch(
            "SELECT EXISTS (SELECT 1 FROM source_versions WHERE scope_id = $1 AND source_id = $2)"
            " OR EXISTS (SELECT 1 FROM jobs WHERE scope_id = $1 AND source_id = $2"
            " AND kind <> $3)",
            sid,
            source_id,
            ERASE_KIND,
        )
        return bool(rows[0][0])

    async def erasure_leftovers(self) -> dict[str, int]:
        """See :meth:`telha.storage.protocol.Storage.erasure_leftovers`."""
        b64 = "convert_from(j.payload, 'UTF8')::jsonb ->> 'content_b64'"
        found = {}
        for name, _, sql in LEFTOVER_CHECKS:
            rows = await self._fetch(sql.replace("{b64}", b64))
            found[name] = int(rows[0][0])
        return found

    async def enqueue_erasure(
        self, scope: Scope, job: NewJob, payload: ErasePayload, *, now_us: int
    ) -> None:
        """See :meth:`telha.storage.protocol.Storage.enqueue_erasure`."""
        sid = await self._ensure_scope(scope)

        async def tx(conn: Conn) -> None:
            await enqueue_tx(conn, sid, job, now_us, dedup=False)
            await conn.execute(
                "INSERT INTO erasures (erasure_id, scope_id, source_id, version_tx, principal,"
                " reason, requested_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                job.job_id, sid, job.source_id, payload.version_tx, payload.principal,
                payload.reason, now_us,
            )  # fmt: skip

        await self._write("enqueue erasure", tx)

    async def erase_step(self, lease: LeaseRef, step: str, *, now_us: int) -> Counts:
        """See :meth:`telha.storage.protocol.Storage.erase_step`."""
        if step not in STEPS:
            raise ValueError(f"unknown erasure step {step!r}")
        steps: dict[str, Callable[..., Awaitable[Counts]]] = {
            "mark": _mark, "jobs": _jobs, "text": _text, "nodes": _nodes, "spans": _spans,
        }  # fmt: skip
        job_id = lease.job_id

        async def tx(conn: Conn) -> Counts:
            await check_lease(conn, lease)
            row = await conn.fetchrow(
                "SELECT scope_id, payload FROM jobs WHERE job_id = $1", job_id
            )
            assert row is not None
            sid, payload = int(row[0]), decode_payload(row[1])
            details = await conn.fetch(
                "SELECT detail FROM job_events WHERE job_id = $1 AND transition = 'erase_step'",
                job_id,
            )
            done = dict(parse_step(r[0]) for r in details)
            if step in done:
                return done[step]
            if step == "finish":
                total = totals(done)
                versions = sorted(await _erased_versions(conn, job_id), key=lambda k: k[1])
                body = result_body(job_id, payload, versions, total, now_us)
                await conn.execute(
                    "UPDATE erasures SET completed_at = $1, result = $2 WHERE erasure_id = $3",
                    now_us,
                    body,
                    job_id,
                )
                await complete_tx(conn, sid, JobCompletion(lease, now_us, body), "erased")
                return total
            counts = await steps[step](conn, sid, job_id, payload, now_us)
            await add_event(conn, job_id, now_us, "erase_step", step_detail(step, counts))
            return counts

        return await self._write(f"erase ({step})", tx)


async def _mark(conn: Conn, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    source = p.source_bytes()
    # Commits of this source wait for the mark: none slips in between the closure and the
    # blocklist.
    await lock_sources(conn, sid, [source])
    if p.version_tx is None:
        found = await conn.fetch(
            f"SELECT {VERSION_KEYS} FROM source_versions WHERE scope_id = $1 AND source_id = $2"
            " AND erased_at IS NULL",
            sid,
            source,
        )
    else:
        found = await conn.fetch(
            f"SELECT {VERSION_KEYS} FROM source_versions WHERE scope_id = $1 AND source_id = $2"
            " AND erased_at IS NULL AND tx = $3 AND canonical_text_hash IS NOT NULL",
            sid,
            source,
            p.version_tx,
        )
    targets = _versions(found)
    while True:  # the closure: every version sharing one of the erased digests
        content = sorted(blockable(v[0] for v in targets.values()))
        canonical = sorted(blockable(v[1] for v in targets.values()))
        more = _versions(
            await conn.fetch(
                f"SELECT {VERSION_KEYS} FROM source_versions WHERE scope_id = $1"
                " AND erased_at IS NULL"
                " AND (content_hash = ANY($2::bytea[]) OR canonical_text_hash = ANY($3::bytea[]))",
                sid,
                content,
                canonical,
            )
        )
        new = {k: v for k, v in more.items() if k not in targets}
        if not new:
            break
        targets.update(new)
    await conn.executemany(
        "UPDATE source_versions SET erased_at = $1, erasure_id = $2, erase_reason = $3"
        " WHERE scope_id = $4 AND source_id = $5 AND tx = $6",
        [(now, job_id, p.reason, sid, s, t) for s, t in targets],
    )
    await conn.executemany(
        "INSERT INTO erasure_blocklist (scope_id, digest, kind, erasure_id, created_at)"
        " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        [(sid, d, "content", job_id, now) for d in content]
        + [(sid, d, "canonical", job_id, now) for d in canonical],
    )
    job_ids = sorted({v[2] for v in targets.values() if v[2] is not None})
    active = await conn.fetch(
        "SELECT job_id FROM jobs WHERE scope_id = $1 AND kind <> $2"
        " AND state IN ('pending', 'leased') AND (source_id = $3"
        " OR content_hash = ANY($4::bytea[]) OR job_id = ANY($5::bytea[]))"
        " ORDER BY job_id FOR UPDATE",
        sid,
        ERASE_KIND,
        source,
        content,
        job_ids,
    )
    for (jid,) in active:
        await end_erased(conn, jid, now, erased_reason(job_id))
    return {"versions": len(targets), "jobs": len(active)}


async def _jobs(conn: Conn, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    versions = await _erased_versions(conn, job_id)
    content = [
        r[0]
        for r in await conn.fetch(
            "SELECT digest FROM erasure_blocklist WHERE erasure_id = $1 AND kind = 'content'",
            job_id,
        )
    ]
    job_ids = sorted({v[2] for v in versions.values() if v[2] is not None})
    jobs = await conn.fetch(
        "SELECT job_id FROM jobs WHERE scope_id = $1 AND kind <> $2"
        " AND (content_hash = ANY($3::bytea[]) OR job_id = ANY($4::bytea[])"
        " OR failure_reason = $5 OR ($6 AND source_id = $7)) ORDER BY job_id FOR UPDATE",
        sid, ERASE_KIND, content, job_ids, erased_reason(job_id), p.version_tx is None,
        p.source_bytes(),
    )  # fmt: skip
    inline = 0
    for (jid,) in jobs:
        inline += await scrub_job(conn, jid)
    raw = await conn.fetchval(
        "SELECT coalesce(sum(size), 0) FROM raw_blobs WHERE scope_id = $1"
        " AND content_hash = ANY($2::bytea[])",
        sid,
        content,
    )
    for table in ("raw_chunks", "raw_blobs"):
        await conn.execute(
            f"DELETE FROM {table} WHERE scope_id = $1 AND content_hash = ANY($2::bytea[])",
            sid,
            content,
        )
    return {"raw_bytes": int(raw), "inline_bytes": inline}


async def _text(conn: Conn, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    versions = await _erased_versions(conn, job_id)
    blobs = sorted({v[3] for v in versions.values() if v[3] is not None})
    total = 0
    for blob_id in blobs:
        idxs = await conn.fetch(
            "SELECT idx FROM blob_chunks WHERE scope_id = $1 AND blob_id = $2 ORDER BY idx",
            sid,
            blob_id,
        )
        for (idx,) in idxs:  # one chunk in memory at a time
            data = await conn.fetchval(
                "DELETE FROM blob_chunks WHERE scope_id = $1 AND blob_id = $2 AND idx = $3"
                " RETURNING data",
                sid,
                blob_id,
                idx,
            )
            total += len(data)
            await conn.execute(
                "INSERT INTO redacted_chunks (scope_id, blob_id, idx, length, digest, erasure_id)"
                " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (scope_id, blob_id, idx) DO UPDATE"
                " SET length = excluded.length, digest = excluded.digest",
                sid, blob_id, idx, len(data), blake3.blake3(data).digest(), job_id,
            )  # fmt: skip
    return {"text_bytes": total}


async def _nodes(conn: Conn, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    erased = set(await _erased_versions(conn, job_id))
    if not erased:
        return {"hidden": 0, "trimmed": 0, "edges": 0}
    sources = [s for s, _ in erased]
    txs = [t for _, t in erased]
    written = await conn.fetch(
        "SELECT n.node_id FROM nodes n JOIN unnest($2::bytea[], $3::bigint[]) AS v (s, t)"
        " ON n.source_id = v.s AND n.tx_from = v.t WHERE n.scope_id = $1",
        sid,
        sources,
        txs,
    )
    touched = {r[0] for r in written}
    linked_rows = await conn.fetch(
        "SELECT r.linked_nodes FROM span_rows r JOIN unnest($2::bytea[], $3::bigint[])"
        " AS v (s, t) ON r.source_id = v.s AND r.source_version_tx = v.t WHERE r.scope_id = $1",
        sid,
        sources,
        txs,
    )
    for (ids,) in linked_rows:
        touched.update(ids[i : i + 16] for i in range(0, len(ids), 16))
    ids = sorted(touched)
    rows = [
        NodeRow._make(tuple(r))
        for r in await conn.fetch(
            "SELECT node_id, tx_from, tx_to, source_id, labels, properties, provenance,"
            " valid_from, valid_to, erased FROM nodes WHERE scope_id = $1"
            " AND node_id = ANY($2::bytea[]) ORDER BY node_id, tx_from FOR UPDATE",
            sid,
            ids,
        )
    ]
    links: dict[bytes, list[tuple[bytes, int, int, int]]] = {}
    async for r in conn.cursor(
        'SELECT source_id, source_version_tx, start, "end", linked_nodes FROM span_rows'
        " WHERE scope_id = $1 AND source_version_tx > $2",
        sid,
        min(txs),
    ):
        if (r[0], r[1]) in erased:
            continue
        linked = r[4]
        for i in range(0, len(linked), 16):
            node = linked[i : i + 16]
            if node in touched:
                links.setdefault(node, []).append((r[0], r[1], r[2], r[3]))
    tx = int(await conn.fetchval(_CLOCK))  # the clock row is locked last
    plan = plan_nodes(sid, tx, erased, rows, links)
    scrub = [(sid, n, t) for n, t in plan.scrub]
    await conn.executemany(
        "UPDATE nodes SET properties = '{}'::bytea, provenance = '[]'::bytea, erased = true"
        " WHERE scope_id = $1 AND node_id = $2 AND tx_from = $3",
        scrub,
    )
    await conn.executemany(
        "DELETE FROM ambiguities WHERE scope_id = $1 AND node_id = $2 AND tx = $3", scrub
    )
    await conn.execute(
        "UPDATE nodes SET tx_to = $1 WHERE scope_id = $2 AND node_id = ANY($3::bytea[])"
        " AND tx_to IS NULL",
        tx,
        sid,
        plan.close,
    )
    await conn.executemany(
        "INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance,"
        " source_id, valid_from, valid_to, erased) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
        " $10)",
        plan.inserts,
    )
    await conn.executemany(
        "INSERT INTO node_labels (scope_id, label, node_id, tx_from) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT DO NOTHING",
        plan.labels,
    )
    edges = await conn.fetch(
        "UPDATE edges SET properties = '{}'::bytea, tx_to = coalesce(tx_to, $1)"
        " WHERE scope_id = $2 AND tx_from = ANY($3::bigint[]) RETURNING 1",
        tx,
        sid,
        txs,
    )
    return {"hidden": plan.hidden, "trimmed": plan.trimmed, "edges": len(edges)}


async def _spans(conn: Conn, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    erased = list(await _erased_versions(conn, job_id))
    deleted = await conn.fetch(
        "DELETE FROM span_rows r USING unnest($2::bytea[], $3::bigint[]) AS v (s, t)"
        " WHERE r.scope_id = $1 AND r.source_id = v.s AND r.source_version_tx = v.t RETURNING 1",
        sid,
        [s for s, _ in erased],
        [t for _, t in erased],
    )
    return {"span_rows": len(deleted)}
