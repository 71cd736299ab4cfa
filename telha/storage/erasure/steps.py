"""GDPR erasure, written once for both engines (docs/operations.md; the steps and
their rules are described in :mod:`telha.domain.erasure`, which also holds the pure parts:
the node plan, the counts, the result).

Every step is one transaction that locks the erase job's row (the lease fence,
:func:`~telha.storage.jobs.lifecycle.check_lease`) and records itself (an ``erase_step`` event with
its counts): a recorded step is not run again and answers its recorded counts. On
PostgreSQL the ``mark`` step also holds the erased source's advisory lock, so no commit of
the source slips in between the closure and the blocklist, and the steps lock the job and
node rows they rewrite (in id order); on SQLite the single writer serialises the same steps.

Reads that may be long hold one bounded page in memory at a time: span rows are read in
primary key order, :data:`_PAGE` rows a statement; canonical text one chunk (≤ 1 MiB) at a
time. After ``finish`` an engine may clean up outside the transaction
(:meth:`~telha.storage.core.engine.EngineOps.erasure_finished`: SQLite truncates its WAL,
so no WAL frame keeps an older page holding erased bytes).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any

import blake3

from telha.domain.erasure import (
    ERASE_KIND,
    LEFTOVER_CHECKS,
    VERSION_KEYS,
    Counts,
    ErasePayload,
    NodeRow,
    PreviewVersion,
    Versions,
    blockable,
    decode_payload,
    erased_reason,
    node_ids,
    parse_step,
    plan_nodes,
    result_body,
    step_detail,
    totals,
)
from telha.domain.model import JobCompletion, LeaseRef, NewJob, Scope
from telha.storage.core.row_faults import per_row
from telha.storage.core.sources import note_versions
from telha.storage.core.tx import Tx
from telha.storage.jobs.lifecycle import (
    add_event,
    check_lease,
    complete,
    end_erased,
    enqueue,
    scrub_job,
)
from telha.storage.search.index import drop_stale, purge_erased, sync_source

__all__ = [
    "enqueue_erasure",
    "erase_step",
    "erased_versions",
    "erasure_leftovers",
    "erasure_preview",
]

#: Ids one ``IN``/``ANY`` list names at most (SQLite's parameter limit stays far away).
_BATCH = 500
#: Span rows one statement of a scan reads.
_PAGE = 1000

#: One step: ``step(tx, scope_id, erasure_id, payload, now_us) -> counts``.
Step = Callable[[Tx, int, bytes, ErasePayload, int], Coroutine[Any, Any, Counts]]


def _versions(rows: Sequence[Sequence[Any]]) -> Versions:
    """Rows selected as :data:`~telha.domain.erasure.VERSION_KEYS`, keyed by version."""
    return {(r[0], r[1]): (r[2], r[3], r[4], r[5]) for r in rows}


async def erased_versions(tx: Tx, erasure_id: bytes) -> Versions:
    """The versions an erasure marked (oldest first)."""
    return _versions(
        await tx.fetchall(
            f"SELECT {VERSION_KEYS} FROM source_versions WHERE erasure_id = ? ORDER BY tx",
            erasure_id,
        )
    )


async def _span_rows(
    tx: Tx, sid: int, where: str, *params: Any
) -> AsyncIterator[tuple[bytes, int, int, int, bytes]]:
    """``(source_id, tx, start, end, linked_nodes)`` of the scope's span rows matching
    ``where`` (SQL after ``AND``), in primary key order, :data:`_PAGE` rows a statement."""
    after: tuple[Any, ...] = ()
    while True:
        key = ' AND (source_id, source_version_tx, start, "end") > (?, ?, ?, ?)' if after else ""
        rows = await tx.fetchall(
            'SELECT source_id, source_version_tx, start, "end", linked_nodes FROM span_rows'
            f" WHERE scope_id = ? AND {where}{key}"
            f' ORDER BY source_id, source_version_tx, start, "end" LIMIT {_PAGE}',
            sid, *params, *after,
        )  # fmt: skip
        for r in rows:
            yield r[0], int(r[1]), int(r[2]), int(r[3]), r[4]
        if len(rows) < _PAGE:
            return
        after = tuple(rows[-1][:4])


# -- reads ---------------------------------------------------------------------------------


async def _closure(tx: Tx, sid: int, source: bytes, version_tx: int | None) -> Versions:
    """The versions an erasure of ``source`` (or of its version ``version_tx``) covers: those
    not erased yet, plus every version of the scope sharing one of their digests (same bytes,
    same personal data), until nothing new is found."""
    sql = f"SELECT {VERSION_KEYS} FROM source_versions WHERE scope_id = ? AND source_id = ?"
    sql += " AND erased_at IS NULL"
    params: tuple[Any, ...] = (sid, source)
    if version_tx is not None:
        sql += " AND tx = ? AND canonical_text_hash IS NOT NULL"
        params += (version_tx,)
    targets = _versions(await tx.fetchall(sql, *params))
    while True:
        content = sorted(blockable(v[0] for v in targets.values()))
        canonical = sorted(blockable(v[1] for v in targets.values()))
        by_content, cparams = tx.dialect.any("content_hash", content, "bytea")
        by_canonical, kparams = tx.dialect.any("canonical_text_hash", canonical, "bytea")
        found = await tx.fetchall(
            f"SELECT {VERSION_KEYS} FROM source_versions WHERE scope_id = ?"
            f" AND erased_at IS NULL AND ({by_content} OR {by_canonical})",
            sid, *cparams, *kparams,
        )  # fmt: skip
        new = {k: v for k, v in _versions(found).items() if k not in targets}
        if not new:
            return targets
        targets.update(new)


async def source_names(tx: Tx, sid: int, sources: Sequence[bytes]) -> dict[bytes, str]:
    """``source_id → name`` of ``sources`` (the name of each one's latest version row)."""
    names: dict[bytes, str] = {}
    for i in range(0, len(sources), _BATCH):
        by_id, params = tx.dialect.any("source_id", list(sources[i : i + _BATCH]), "bytea")
        rows = await tx.fetchall(
            f"SELECT source_id, name FROM source_versions WHERE scope_id = ? AND {by_id}"
            " ORDER BY tx",
            sid, *params,
        )  # fmt: skip
        names.update((r[0], str(r[1])) for r in rows)
    return names


async def erasure_preview(
    tx: Tx, scope: Scope, source_id: bytes, version_tx: int | None
) -> list[PreviewVersion]:
    """What erasing ``source_id`` (or its version ``version_tx``) would erase now, without
    writing: every version of the closure (:func:`_closure`) with its source's name and the
    node versions it wrote, ordered by source id then tx. Empty for an unknown scope or a
    source with nothing left to erase."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    targets = sorted(await _closure(tx, sid, source_id, version_tx))
    names = await source_names(tx, sid, sorted({s for s, _ in targets}))
    out = []
    for s, t in targets:
        count = 0
        for half in tx.dialect.version_halves():
            row = await tx.fetchone(
                "SELECT count(*) FROM nodes WHERE scope_id = ? AND source_id = ? AND tx_from = ?"
                + half,
                sid, s, t,
            )  # fmt: skip
            count += int(row[0]) if row else 0
        out.append(PreviewVersion(s, t, names.get(s, ""), count))
    return out


async def erasure_leftovers(tx: Tx) -> dict[str, int]:
    """``{name: count}`` of each :data:`~telha.domain.erasure.LEFTOVER_CHECKS` entry, across
    every scope (all 0 when nothing erased remains)."""
    b64 = tx.dialect.json_text_field("j.payload", "content_b64")
    found = {}
    for name, _, sql in LEFTOVER_CHECKS:
        row = await tx.fetchone(sql.replace("{b64}", b64))
        found[name] = int(row[0]) if row is not None else 0
    return found


# -- writes --------------------------------------------------------------------------------


async def enqueue_erasure(
    tx: Tx, scope: Scope, job: NewJob, payload: ErasePayload, now_us: int
) -> None:
    """Insert the erase job (pending, its ``enqueued`` event, a wake-up) and its audit row
    (who, what, when, why; never content)."""
    sid = await tx.scope_id(scope)
    await enqueue(tx, sid, job, now_us, dedup=False)
    await tx.execute(
        "INSERT INTO erasures (erasure_id, scope_id, source_id, version_tx, principal,"
        " reason, requested_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        job.job_id, sid, job.source_id, payload.version_tx, payload.principal, payload.reason,
        now_us,
    )  # fmt: skip


async def erase_step(tx: Tx, lease: LeaseRef, step: str, now_us: int) -> Counts:
    """One step of the erase job held under ``lease`` (one of
    :data:`~telha.domain.erasure.STEPS`) and its ``erase_step`` event; a recorded step
    answers its recorded counts. ``finish`` writes the audit row's result and completes the
    job with it as ``stats``; it answers every step's counts.

    :raises StaleLease: the lease is not current.
    :raises RowFault: the job's stored rows cannot be processed (its payload does not
        decode, a step meets a value it cannot read): nothing was written
        (docs/architecture.md, "Supervision and bad rows").
    """
    job_id = lease.job_id
    await check_lease(tx, lease)
    with per_row(tx, "job", job_id, f"step {step}"):
        row = await tx.fetchone("SELECT scope_id, payload FROM jobs WHERE job_id = ?", job_id)
        assert row is not None
        sid, payload = int(row[0]), decode_payload(row[1])
        details = await tx.fetchall(
            "SELECT detail FROM job_events WHERE job_id = ? AND transition = 'erase_step'", job_id
        )
        done = dict(parse_step(d) for (d,) in details)
        if step in done:
            return done[step]
        if step == "finish":
            total = totals(done)
            versions = sorted(await erased_versions(tx, job_id), key=lambda k: k[1])
            names = await source_names(tx, sid, sorted({s for s, _ in versions}))
            body = result_body(job_id, payload, versions, total, now_us, names)
            await tx.execute(
                "UPDATE erasures SET completed_at = ?, result = ? WHERE erasure_id = ?",
                now_us, body, job_id,
            )  # fmt: skip
            await complete(tx, sid, JobCompletion(lease, now_us, body), "erased")
            return total
        counts = await _STEPS[step](tx, sid, job_id, payload, now_us)
        await add_event(tx, job_id, now_us, "erase_step", step_detail(step, counts))
        return counts


async def _mark(tx: Tx, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    """Mark the erased versions (the closure over shared digests), blocklist their digests,
    end the active jobs of the source or of those digests ``dead``."""
    source = p.source_bytes()
    # Commits of this source wait for the mark: none slips in between the closure and the
    # blocklist.
    await tx.lock_sources(sid, (source,))
    targets = await _closure(tx, sid, source, p.version_tx)
    content = sorted(blockable(v[0] for v in targets.values()))
    canonical = sorted(blockable(v[1] for v in targets.values()))
    await tx.executemany(
        "UPDATE source_versions SET erased_at = ?, erasure_id = ?, erase_reason = ?"
        " WHERE scope_id = ? AND source_id = ? AND tx = ?",
        [(now, job_id, p.reason, sid, s, t) for s, t in targets],
    )
    for erased_source in sorted({s for s, _ in targets}):
        await note_versions(tx, sid, erased_source, now)
        await sync_source(tx, sid, erased_source)
        await drop_stale(tx, sid, erased_source)  # erased words leave the index now
    if tx.search:
        await purge_erased(tx)  # words of erased versions indexed earlier, superseded since
    await tx.executemany(
        "INSERT INTO erasure_blocklist (scope_id, digest, kind, erasure_id, created_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [(sid, d, "content", job_id, now) for d in content]
        + [(sid, d, "canonical", job_id, now) for d in canonical],
    )
    job_ids = sorted({v[2] for v in targets.values() if v[2] is not None})
    by_hash, hparams = tx.dialect.any("content_hash", content, "bytea")
    by_id, iparams = tx.dialect.any("job_id", job_ids, "bytea")
    active = await tx.fetchall(
        "SELECT job_id FROM jobs WHERE scope_id = ? AND kind <> ?"
        f" AND state IN ('pending', 'leased') AND (source_id = ? OR {by_hash} OR {by_id})"
        f" ORDER BY job_id{tx.for_update}",
        sid, ERASE_KIND, source, *hparams, *iparams,
    )  # fmt: skip
    for (jid,) in active:
        await end_erased(tx, jid, now, erased_reason(job_id))
    return {"versions": len(targets), "jobs": len(active)}


async def _jobs(tx: Tx, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    """Delete the raw uploads of the erased content digests; empty the inline content of
    every job of them (of the erased versions, ended by this erasure, or — erasing every
    version — of the source)."""
    versions = await erased_versions(tx, job_id)
    rows = await tx.fetchall(
        "SELECT digest FROM erasure_blocklist WHERE erasure_id = ? AND kind = 'content'", job_id
    )
    content = sorted(d for (d,) in rows)
    job_ids = sorted({v[2] for v in versions.values() if v[2] is not None})
    by_hash, hparams = tx.dialect.any("content_hash", content, "bytea")
    by_id, iparams = tx.dialect.any("job_id", job_ids, "bytea")
    jobs = await tx.fetchall(
        f"SELECT job_id FROM jobs WHERE scope_id = ? AND kind <> ? AND ({by_hash} OR {by_id}"
        f" OR failure_reason = ? OR (? AND source_id = ?)) ORDER BY job_id{tx.for_update}",
        sid, ERASE_KIND, *hparams, *iparams, erased_reason(job_id), p.version_tx is None,
        p.source_bytes(),
    )  # fmt: skip
    inline = 0
    for (jid,) in jobs:
        inline += await scrub_job(tx, jid)
    raw = await tx.fetchone(
        f"SELECT coalesce(sum(size), 0) FROM raw_blobs WHERE scope_id = ? AND {by_hash}",
        sid, *hparams,
    )  # fmt: skip
    for table in ("raw_chunks", "raw_blobs"):
        await tx.execute(f"DELETE FROM {table} WHERE scope_id = ? AND {by_hash}", sid, *hparams)
    return {"raw_bytes": int(raw[0]) if raw is not None else 0, "inline_bytes": inline}


async def _text(tx: Tx, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    """Replace the erased versions' canonical text chunks with redaction records (length
    and BLAKE3, no bytes), one chunk in memory at a time."""
    versions = await erased_versions(tx, job_id)
    total = 0
    for blob_id in sorted({v[3] for v in versions.values() if v[3] is not None}):
        idxs = await tx.fetchall(
            "SELECT idx FROM blob_chunks WHERE scope_id = ? AND blob_id = ? ORDER BY idx",
            sid, blob_id,
        )  # fmt: skip
        for (idx,) in idxs:
            row = await tx.fetchone(
                "DELETE FROM blob_chunks WHERE scope_id = ? AND blob_id = ? AND idx = ?"
                " RETURNING data",
                sid, blob_id, idx,
            )  # fmt: skip
            assert row is not None
            data = bytes(row[0])
            total += len(data)
            await tx.execute(
                "INSERT INTO redacted_chunks (scope_id, blob_id, idx, length, digest, erasure_id)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scope_id, blob_id, idx) DO UPDATE"
                " SET length = excluded.length, digest = excluded.digest",
                sid, blob_id, idx, len(data), blake3.blake3(data).digest(), job_id,
            )  # fmt: skip
    return {"text_bytes": total}


async def _superseded(tx: Tx, sid: int, sources: set[bytes]) -> frozenset[tuple[bytes, int]]:
    """``(source_id, tx)`` of the published versions of ``sources`` that a later published
    version of the same source superseded."""
    found: set[tuple[bytes, int]] = set()
    ordered = sorted(sources)
    for i in range(0, len(ordered), _BATCH):
        by_source, params = tx.dialect.any("v.source_id", ordered[i : i + _BATCH], "bytea")
        rows = await tx.fetchall(
            "SELECT v.source_id, v.tx FROM source_versions v WHERE v.scope_id = ?"
            f" AND {by_source} AND v.published_tx IS NOT NULL AND EXISTS (SELECT 1"
            " FROM source_versions w WHERE w.scope_id = v.scope_id AND w.source_id = v.source_id"
            " AND w.tx > v.tx AND w.published_tx IS NOT NULL)",
            sid, *params,
        )  # fmt: skip
        found.update((bytes(s), t) for s, t in rows)
    return frozenset(found)


async def _nodes(tx: Tx, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    """Scrub, hide or trim the nodes the erased versions wrote or linked
    (:func:`~telha.domain.erasure.plan_nodes`) at a new transaction time; scrub and close
    the edges they wrote."""
    erased = set(await erased_versions(tx, job_id))
    if not erased:
        return {"hidden": 0, "trimmed": 0, "edges": 0}
    txs = sorted({t for _, t in erased})
    by_source, sparams = tx.dialect.any("source_id", sorted({s for s, _ in erased}), "bytea")
    by_tx, tparams = tx.dialect.any("tx_from", txs, "bigint")
    touched: set[bytes] = set()
    for half in tx.dialect.version_halves():
        written = await tx.fetchall(
            "SELECT node_id, source_id, tx_from FROM nodes"
            f" WHERE scope_id = ? AND {by_source} AND {by_tx}{half}",
            sid, *sparams, *tparams,
        )  # fmt: skip
        touched.update(n for n, s, t in written if (s, t) in erased)
    version = "source_id = ? AND source_version_tx = ?"
    for s, t in sorted(erased):
        async for *_, linked in _span_rows(tx, sid, version, s, t):
            touched.update(node_ids(linked))
    ids = sorted(touched)
    rows: list[NodeRow] = []
    for i in range(0, len(ids), _BATCH):  # every version of each, locked in id order
        by_id, iparams = tx.dialect.any("node_id", ids[i : i + _BATCH], "bytea")
        found = await tx.fetchall(
            "SELECT node_id, tx_from, tx_to, source_id, labels, properties, provenance,"
            f" valid_from, valid_to, erased FROM nodes WHERE scope_id = ? AND {by_id}"
            f" ORDER BY node_id, tx_from{tx.for_update}",
            sid, *iparams,
        )  # fmt: skip
        rows += [NodeRow._make((*r[:9], bool(r[9]))) for r in found]
    links: dict[bytes, list[tuple[bytes, int, int, int]]] = {}
    async for s, t, a, b, linked in _span_rows(tx, sid, "source_version_tx > ?", txs[0]):
        if (s, t) in erased:
            continue
        for node in node_ids(linked):
            if node in touched:
                links.setdefault(node, []).append((s, t, a, b))
    stale = await _superseded(tx, sid, {r.source_id for r in rows if r.source_id is not None})
    at = await tx.next_tx()  # PostgreSQL: the clock row is locked last
    plan = plan_nodes(sid, at, erased, rows, links, stale)
    scrub = [(b"{}", b"[]", True, sid, n, t) for n, t in plan.scrub]
    await tx.executemany(
        "UPDATE nodes SET properties = ?, provenance = ?, erased = ?"
        " WHERE scope_id = ? AND node_id = ? AND tx_from = ?",
        scrub,
    )
    await tx.executemany(
        "DELETE FROM ambiguities WHERE scope_id = ? AND node_id = ? AND tx = ?",
        [r[3:] for r in scrub],
    )
    for i in range(0, len(plan.close), _BATCH):
        by_id, iparams = tx.dialect.any("node_id", plan.close[i : i + _BATCH], "bytea")
        await tx.execute(
            f"UPDATE nodes SET tx_to = ? WHERE scope_id = ? AND {by_id} AND tx_to IS NULL",
            at, sid, *iparams,
        )  # fmt: skip
    await tx.executemany(
        "INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance,"
        " source_id, valid_from, valid_to, erased) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        plan.inserts,
    )
    await tx.executemany(
        "INSERT INTO node_labels (scope_id, label, node_id, tx_from) VALUES (?, ?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        plan.labels,
    )
    await _rehome_kept(tx, sid, txs)
    edges = await tx.execute(
        "UPDATE edges SET properties = ?, tx_to = coalesce(tx_to, ?)"
        f" WHERE scope_id = ? AND {by_tx}",
        b"{}", at, sid, *tparams,
    )  # fmt: skip
    return {"hidden": plan.hidden, "trimmed": plan.trimmed, "edges": edges}


async def _rehome_kept(tx: Tx, sid: int, txs: list[int]) -> None:
    """Kept edges (docs/architecture.md, "Kept edges"): an open edge row an erased version
    wrote that a later, not erased, version of its source kept (its mark, ``seen_tx``) is
    that version's edge too: it gets a row of its own at the marking version's tx before the
    erased version's row is scrubbed and closed, so erasing an old version never takes an
    edge out of a later version's graph."""
    by_tx, tparams = tx.dialect.any("e.tx_from", txs, "bigint")
    by_seen, sparams = tx.dialect.any("e.seen_tx", txs, "bigint")
    await tx.execute(
        "INSERT INTO edges (scope_id, edge_id, tx_from, type, from_id, to_id, properties,"
        " source_id) SELECT e.scope_id, e.edge_id, e.seen_tx, e.type, e.from_id, e.to_id,"
        f" e.properties, e.source_id FROM edges e WHERE e.scope_id = ? AND {by_tx}"
        f" AND e.tx_to IS NULL AND e.seen_tx IS NOT NULL AND NOT {by_seen}"
        " ON CONFLICT DO NOTHING",
        sid, *tparams, *sparams,
    )  # fmt: skip


async def _spans(tx: Tx, sid: int, job_id: bytes, p: ErasePayload, now: int) -> Counts:
    """Delete the erased versions' span rows."""
    deleted = 0
    for s, t in await erased_versions(tx, job_id):
        deleted += await tx.execute(
            "DELETE FROM span_rows WHERE scope_id = ? AND source_id = ? AND source_version_tx = ?",
            sid, s, t,
        )  # fmt: skip
    return {"span_rows": deleted}


_STEPS: dict[str, Step] = {
    "mark": _mark, "jobs": _jobs, "text": _text, "nodes": _nodes, "spans": _spans,
}  # fmt: skip
