"""GDPR erasure on SQLite (issue 11; the steps are described in :mod:`telha.domain.erasure`).

Every step is one write transaction on the writer's thread. The database runs with
``secure_delete`` on (every connection, :mod:`telha.storage.sqlite.base`), so deleted and
overwritten content is zeroed in the pages; the erasure ends with
``PRAGMA wal_checkpoint(TRUNCATE)``, so no WAL frame keeps an older page with the erased
bytes either. Also here: the blocklist checks the other write paths make inside their own
transactions (:func:`~telha.storage.sqlite.base.blocked`,
:func:`~telha.storage.sqlite.jobs.end_erased`, :func:`purge_stream`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import anyio
import blake3
import structlog

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
from telha.storage.sqlite.base import SqliteBase, marks
from telha.storage.sqlite.jobs import (
    add_event,
    check_lease,
    complete_tx,
    end_erased,
    enqueue_tx,
    scrub_job,
)

__all__ = ["ErasureMixin", "purge_stream"]

log = structlog.get_logger("telha.storage")


def purge_stream(conn: sqlite3.Connection, sid: int, source_id: bytes, tx: int) -> None:
    """Delete everything a stream pinned at ``tx`` wrote (its version row, text, nodes, edges,
    spans), after :func:`abandon_stream` gave the versions it had closed back their ends: a
    stream whose content turned out blocklisted at finalize leaves nothing."""
    row = conn.execute(
        "SELECT blob_id FROM source_versions WHERE scope_id = ? AND source_id = ? AND tx = ?",
        (sid, source_id, tx),
    ).fetchone()
    if row is not None and row[0] is not None:
        conn.execute("DELETE FROM blob_chunks WHERE scope_id = ? AND blob_id = ?", (sid, row[0]))
    key = (sid, source_id, tx)
    conn.execute("DELETE FROM source_versions WHERE scope_id = ? AND source_id = ? AND tx = ?", key)
    conn.execute(
        "DELETE FROM span_rows WHERE scope_id = ? AND source_id = ? AND source_version_tx = ?", key
    )
    conn.execute("DELETE FROM nodes WHERE scope_id = ? AND source_id = ? AND tx_from = ?", key)
    for table, col in (("node_labels", "tx_from"), ("edges", "tx_from"), ("ambiguities", "tx")):
        conn.execute(f"DELETE FROM {table} WHERE scope_id = ? AND {col} = ?", (sid, tx))


def _erased_versions(conn: sqlite3.Connection, erasure_id: bytes) -> Versions:
    return {
        (s, t): (h, c, j, b)
        for s, t, h, c, j, b in conn.execute(
            f"SELECT {VERSION_KEYS} FROM source_versions WHERE erasure_id = ? ORDER BY tx",
            (erasure_id,),
        )
    }


class ErasureMixin(SqliteBase):
    """Erasure operations of the SQLite engine; see :class:`telha.storage.protocol.Storage`."""

    async def has_source(self, scope: Scope, source_id: bytes) -> bool:
        """See :meth:`telha.storage.protocol.Storage.has_source`."""
        sid = await self._scope_id(scope)
        if sid is None:
            return False
        rows = await self._fetchall(
            "SELECT EXISTS (SELECT 1 FROM source_versions WHERE scope_id = ? AND source_id = ?)"
            " OR EXISTS (SELECT 1 FROM jobs WHERE scope_id = ? AND source_id = ? AND kind <> ?)",
            (sid, source_id, sid, source_id, ERASE_KIND),
        )
        return bool(rows[0][0])

    async def erasure_leftovers(self) -> dict[str, int]:
        """See :meth:`telha.storage.protocol.Storage.erasure_leftovers`."""
        b64 = "json_extract(CAST(j.payload AS TEXT), '$.content_b64')"
        found = {}
        for name, _, sql in LEFTOVER_CHECKS:
            rows = await self._fetchall(sql.replace("{b64}", b64), ())
            found[name] = int(rows[0][0])
        return found

    async def enqueue_erasure(
        self, scope: Scope, job: NewJob, payload: ErasePayload, *, now_us: int
    ) -> None:
        """See :meth:`telha.storage.protocol.Storage.enqueue_erasure`."""

        def tx(conn: sqlite3.Connection) -> None:
            sid = self._tx_scope_id(conn, scope)
            enqueue_tx(conn, sid, job, now_us, dedup=False)
            conn.execute(
                "INSERT INTO erasures (erasure_id, scope_id, source_id, version_tx, principal,"
                " reason, requested_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (job.job_id, sid, job.source_id, payload.version_tx, payload.principal,
                 payload.reason, now_us),
            )  # fmt: skip

        await self._write("enqueue erasure", tx)

    async def erase_step(self, lease: LeaseRef, step: str, *, now_us: int) -> Counts:
        """See :meth:`telha.storage.protocol.Storage.erase_step`."""
        steps: dict[str, Callable[..., Counts]] = {
            "mark": self._mark, "jobs": _jobs, "text": _text, "nodes": self._nodes,
            "spans": _spans,
        }  # fmt: skip
        job_id = lease.job_id

        def tx(conn: sqlite3.Connection) -> Counts:
            check_lease(conn, lease)
            sid, raw = conn.execute(
                "SELECT scope_id, payload FROM jobs WHERE job_id = ?", (job_id,)
            ).fetchone()
            payload = decode_payload(raw)
            done = dict(
                parse_step(d)
                for (d,) in conn.execute(
                    "SELECT detail FROM job_events WHERE job_id = ? AND transition = 'erase_step'",
                    (job_id,),
                )
            )
            if step in done:
                return done[step]
            if step == "finish":
                total = totals(done)
                versions = sorted(_erased_versions(conn, job_id), key=lambda k: k[1])
                body = result_body(job_id, payload, versions, total, now_us)
                conn.execute(
                    "UPDATE erasures SET completed_at = ?, result = ? WHERE erasure_id = ?",
                    (now_us, body, job_id),
                )
                complete_tx(conn, sid, JobCompletion(lease, now_us, body), "erased")
                return total
            counts = steps[step](conn, sid, job_id, payload, now_us)
            add_event(conn, job_id, now_us, "erase_step", step_detail(step, counts))
            return counts

        if step not in STEPS:
            raise ValueError(f"unknown erasure step {step!r}")
        counts = await self._write(f"erase ({step})", tx)
        if step == "finish":
            await self._checkpoint_truncate()
        return counts

    async def _checkpoint_truncate(self) -> None:
        """Copy every WAL frame into the database file and truncate the WAL to zero bytes;
        retried (50 times, 0.1 s apart) while readers hold old snapshots. Each try holds the
        writer lock (so no write lands during it), never the wait between tries: a long
        ``telha check`` snapshot must not stall every write of the service meanwhile (writes
        landing in between carry no erased bytes, and the next try checkpoints them too)."""
        for _ in range(50):
            async with self._write_lock:
                w = self._require_writer()
                async with w.execute("PRAGMA wal_checkpoint(TRUNCATE)") as cur:
                    row = await cur.fetchone()
            if row is not None and row[0] == 0:
                return
            await anyio.sleep(0.1)
        log.warning("erasure_checkpoint_busy", db=str(self.path))

    def _mark(
        self, conn: sqlite3.Connection, sid: int, job_id: bytes, p: ErasePayload, now: int
    ) -> Counts:
        source = p.source_bytes()
        sql = f"SELECT {VERSION_KEYS} FROM source_versions WHERE scope_id = ? AND source_id = ?"
        sql += " AND erased_at IS NULL"
        params: tuple[Any, ...] = (sid, source)
        if p.version_tx is not None:
            sql += " AND tx = ? AND canonical_text_hash IS NOT NULL"
            params += (p.version_tx,)
        targets: Versions = {(s, t): (h, c, j, b) for s, t, h, c, j, b in conn.execute(sql, params)}
        while True:  # the closure: every version sharing one of the erased digests
            content = sorted(blockable(v[0] for v in targets.values()))
            canonical = sorted(blockable(v[1] for v in targets.values()))
            found = conn.execute(
                f"SELECT {VERSION_KEYS} FROM source_versions WHERE scope_id = ?"
                " AND erased_at IS NULL"
                f" AND (content_hash IN ({marks(content)})"
                f" OR canonical_text_hash IN ({marks(canonical)}))",
                (sid, *content, *canonical),
            ).fetchall()
            new = {(s, t): (h, c, j, b) for s, t, h, c, j, b in found if (s, t) not in targets}
            if not new:
                break
            targets.update(new)
        conn.executemany(
            "UPDATE source_versions SET erased_at = ?, erasure_id = ?, erase_reason = ?"
            " WHERE scope_id = ? AND source_id = ? AND tx = ?",
            [(now, job_id, p.reason, sid, s, t) for s, t in targets],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO erasure_blocklist (scope_id, digest, kind, erasure_id,"
            " created_at) VALUES (?, ?, ?, ?, ?)",
            [(sid, d, "content", job_id, now) for d in content]
            + [(sid, d, "canonical", job_id, now) for d in canonical],
        )
        job_ids = sorted({v[2] for v in targets.values() if v[2] is not None})
        active = conn.execute(
            "SELECT job_id FROM jobs WHERE scope_id = ? AND kind <> ? AND state IN"
            f" ('pending', 'leased') AND (source_id = ? OR content_hash IN ({marks(content)})"
            f" OR job_id IN ({marks(job_ids)}))",
            (sid, ERASE_KIND, source, *content, *job_ids),
        ).fetchall()
        for (jid,) in active:
            end_erased(conn, jid, now, erased_reason(job_id))
        return {"versions": len(targets), "jobs": len(active)}

    def _nodes(
        self, conn: sqlite3.Connection, sid: int, job_id: bytes, p: ErasePayload, now: int
    ) -> Counts:
        erased = set(_erased_versions(conn, job_id))
        if not erased:
            return {"hidden": 0, "trimmed": 0, "edges": 0}
        txs = sorted(t for _, t in erased)
        touched = {
            n
            for n, s, t in conn.execute(
                f"SELECT node_id, source_id, tx_from FROM nodes WHERE scope_id = ?"
                f" AND tx_from IN ({marks(txs)})",
                (sid, *txs),
            )
            if (s, t) in erased
        }
        for s, t in erased:
            for (ids,) in conn.execute(
                "SELECT linked_nodes FROM span_rows WHERE scope_id = ? AND source_id = ?"
                " AND source_version_tx = ?",
                (sid, s, t),
            ):
                touched.update(ids[i : i + 16] for i in range(0, len(ids), 16))
        ids = sorted(touched)
        rows: list[NodeRow] = []
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows += [
                NodeRow._make((*r[:9], bool(r[9])))
                for r in conn.execute(
                    "SELECT node_id, tx_from, tx_to, source_id, labels, properties, provenance,"
                    " valid_from, valid_to, erased FROM nodes WHERE scope_id = ?"
                    f" AND node_id IN ({marks(part)})",
                    (sid, *part),
                )
            ]
        links: dict[bytes, list[tuple[bytes, int, int, int]]] = {}
        for s, t, a, b, linked in conn.execute(
            'SELECT source_id, source_version_tx, start, "end", linked_nodes FROM span_rows'
            " WHERE scope_id = ? AND source_version_tx > ?",
            (sid, txs[0]),
        ):
            if (s, t) in erased:
                continue
            for i in range(0, len(linked), 16):
                node = linked[i : i + 16]
                if node in touched:
                    links.setdefault(node, []).append((s, t, a, b))
        tx = self._clock.next()
        plan = plan_nodes(sid, tx, erased, rows, links)
        scrub = [(sid, n, t) for n, t in plan.scrub]
        conn.executemany(
            "UPDATE nodes SET properties = CAST('{}' AS BLOB), provenance = CAST('[]' AS BLOB),"
            " erased = 1 WHERE scope_id = ? AND node_id = ? AND tx_from = ?",
            scrub,
        )
        conn.executemany(
            "DELETE FROM ambiguities WHERE scope_id = ? AND node_id = ? AND tx = ?", scrub
        )
        conn.executemany(
            "UPDATE nodes SET tx_to = ? WHERE scope_id = ? AND node_id = ? AND tx_to IS NULL",
            [(tx, sid, n) for n in plan.close],
        )
        conn.executemany(
            "INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance,"
            " source_id, valid_from, valid_to, erased) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            plan.inserts,
        )
        conn.executemany(
            "INSERT OR IGNORE INTO node_labels (scope_id, label, node_id, tx_from)"
            " VALUES (?, ?, ?, ?)",
            plan.labels,
        )
        edges = conn.execute(
            "UPDATE edges SET properties = CAST('{}' AS BLOB), tx_to = coalesce(tx_to, ?)"
            f" WHERE scope_id = ? AND tx_from IN ({marks(txs)})",
            (tx, sid, *txs),
        ).rowcount
        return {"hidden": plan.hidden, "trimmed": plan.trimmed, "edges": edges}


def _jobs(conn: sqlite3.Connection, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    versions = _erased_versions(conn, job_id)
    content = sorted(
        d
        for (d,) in conn.execute(
            "SELECT digest FROM erasure_blocklist WHERE erasure_id = ? AND kind = 'content'",
            (job_id,),
        )
    )
    job_ids = sorted({v[2] for v in versions.values() if v[2] is not None})
    every = p.version_tx is None
    jobs = conn.execute(
        "SELECT job_id FROM jobs WHERE scope_id = ? AND kind <> ?"
        f" AND (content_hash IN ({marks(content)}) OR job_id IN ({marks(job_ids)})"
        " OR failure_reason = ? OR (? AND source_id = ?))",
        (sid, ERASE_KIND, *content, *job_ids, erased_reason(job_id), every, p.source_bytes()),
    ).fetchall()
    inline = sum(scrub_job(conn, jid) for (jid,) in jobs)
    raw = conn.execute(
        "SELECT coalesce(sum(size), 0) FROM raw_blobs WHERE scope_id = ?"
        f" AND content_hash IN ({marks(content)})",
        (sid, *content),
    ).fetchone()[0]
    for table in ("raw_chunks", "raw_blobs"):
        conn.execute(
            f"DELETE FROM {table} WHERE scope_id = ? AND content_hash IN ({marks(content)})",
            (sid, *content),
        )
    return {"raw_bytes": int(raw), "inline_bytes": inline}


def _text(conn: sqlite3.Connection, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    blobs = sorted({v[3] for v in _erased_versions(conn, job_id).values() if v[3] is not None})
    total = 0
    for blob_id in blobs:
        # One chunk (≤ 1 MiB) in memory at a time, as on PostgreSQL.
        for idx, data in conn.execute(
            "SELECT idx, data FROM blob_chunks WHERE scope_id = ? AND blob_id = ? ORDER BY idx",
            (sid, blob_id),
        ):
            total += len(data)
            conn.execute(
                "INSERT OR REPLACE INTO redacted_chunks (scope_id, blob_id, idx, length, digest,"
                " erasure_id) VALUES (?, ?, ?, ?, ?, ?)",
                (sid, blob_id, idx, len(data), blake3.blake3(data).digest(), job_id),
            )
        conn.execute("DELETE FROM blob_chunks WHERE scope_id = ? AND blob_id = ?", (sid, blob_id))
    return {"text_bytes": total}


def _spans(conn: sqlite3.Connection, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    deleted = 0
    for s, t in _erased_versions(conn, job_id):
        deleted += conn.execute(
            "DELETE FROM span_rows WHERE scope_id = ? AND source_id = ? AND source_version_tx = ?",
            (sid, s, t),
        ).rowcount
    return {"span_rows": deleted}
