"""PostgreSQL's measured fast paths: the hottest operations as one call of a PL/pgSQL
function each (``functions.sql`` beside this module), instead of one round trip per statement
of the general path in :mod:`telha.storage.core`. Each takes the general path's locks in its
order and writes the same rows; ``tests/integration/test_pg_fast_paths.py`` runs the same
cases through both and compares every row written (docs/architecture.md, "The storage
seam")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from telha.domain.errors import StaleLease
from telha.domain.identity import deferred_keys
from telha.domain.model import (
    CommitOutcome,
    Dedup,
    EnqueueOutcome,
    JobCompletion,
    JobRecord,
    NewJob,
    NewVersion,
    Scope,
)
from telha.domain.projection import Projection
from telha.domain.records import job_record
from telha.domain.rows import PENDING_TX, Match, build_rows
from telha.storage.jobs.aggregate import Jobs
from telha.storage.jobs.fair_lease import CANDIDATES
from telha.storage.jobs.reads import JOB_COLS
from telha.storage.postgres.base import PgBase
from telha.storage.postgres.tx import CHANNEL, Conn, PgTx, source_lock_key
from telha.storage.search.index import sync_source
from telha.storage.versions.aggregate import Versions
from telha.storage.webhooks.deliveries import has_webhooks

__all__ = ["FastJobs", "FastVersions"]


class FastJobs(Jobs):
    """:class:`~telha.storage.jobs.aggregate.Jobs` with enqueue and lease as one call each of
    ``pg``'s pooled connections."""

    def __init__(self, pg: PgBase) -> None:
        super().__init__(pg)
        self._pg = pg

    async def enqueue(
        self, scope: Scope, job: NewJob, *, now_us: int, dedup: bool, max_pending: int = 0
    ) -> EnqueueOutcome:
        """:func:`telha.storage.jobs.lifecycle.enqueue_job` as one call of ``telha_enqueue``, its
        own transaction; a job with its own webhook, or held to a pending-jobs quota, takes
        the general path (which stores the webhook, or counts under the quota lock)."""
        if job.webhook is not None or max_pending > 0:
            return await super().enqueue(
                scope, job, now_us=now_us, dedup=dedup, max_pending=max_pending
            )
        sid = await self._pg._scope_id(scope, intern=True)
        assert sid is not None

        args = {
            "p_job_id": job.job_id,
            "p_scope": sid,
            "p_kind": job.kind,
            "p_format": job.format,
            "p_source": job.source_id,
            "p_hash": job.content_hash,
            "p_payload": job.payload,
            "p_now": now_us,
            "p_dedup": dedup,
            "p_detail": None,
            "p_lock_key": source_lock_key(sid, job.source_id),
            "p_channel": CHANNEL,
            "p_name": job.name,
            "p_fingerprint": job.fingerprint,
        }
        sql = _call("deduplicated, job_id, erased", "telha_enqueue", args)

        async def one(conn: Conn) -> EnqueueOutcome:
            row = await conn.fetchrow(sql, *args.values())
            assert row is not None
            return EnqueueOutcome(bool(row[0]), row[1], bool(row[2]))

        outcome = await self._pg._write("enqueue job", one, transaction=False)
        if not outcome.deduplicated and outcome.job_id is not None:
            self._pg.job_events.signal((outcome.job_id,))  # its ``enqueued`` event
        return outcome

    async def lease_next(
        self,
        formats: Sequence[str],
        *,
        scope: Scope | None,
        worker_id: str,
        now_us: int,
        lease_us: int,
    ) -> JobRecord | None:
        """:func:`telha.storage.jobs.lifecycle.lease` as one call of ``telha_lease_fair`` (the
        fair pick of :mod:`telha.storage.jobs.fair_lease`, reading at most its ``CANDIDATES``
        heads, ``SKIP LOCKED``, the lease, its event and the head's turn), its own transaction."""
        if not formats:
            return None
        sid = None
        if scope is not None:
            sid = await self._pg._scope_id(scope)
            if sid is None:
                return None

        args = {
            "p_formats": list(formats),
            "p_now": now_us,
            "p_owner": worker_id,
            "p_deadline": now_us + lease_us,
            "p_scope": sid,
            "p_candidates": CANDIDATES,
        }
        sql = _call(
            JOB_COLS, "telha_lease_fair", args, " j JOIN scopes s ON s.scope_id = j.scope_id"
        )

        async def one(conn: Conn) -> JobRecord | None:
            row = await conn.fetchrow(sql, *args.values())
            return job_record(row) if row is not None else None

        job = await self._pg._write("lease job", one, transaction=False)
        if job is not None:
            self._pg.job_events.signal((job.job_id,))  # its ``leased`` event
        return job


class FastVersions(Versions):
    """:class:`~telha.storage.versions.aggregate.Versions` with the common single-shot commit
    as one call of ``pg``'s pooled connections."""

    def __init__(self, pg: PgBase) -> None:
        super().__init__(pg)
        self._pg = pg

    async def _commit_fast(
        self,
        scope: Scope,
        version: NewVersion,
        projection: Projection,
        canonical_hash: bytes,
        blob_id: bytes,
        dedup: Dedup,
        completion: JobCompletion | None,
    ) -> CommitOutcome | None:
        """A job's single-shot submission without child jobs (submit-time dedup) as one
        call of ``telha_commit_single`` (``functions.sql``), its own transaction, for a source
        with nothing to supersede (no published version, no open rows): the general path's
        locks in its order (job row, source lock, clock row last) and the rows, publish and
        completion :func:`telha.storage.versions.commit.commit` writes for that case — node
        rows with their match keys and no previous ids (the match is empty), the version
        published at its own tx with its root node and changes, the job's stats merged with
        the changes. ``None`` (nothing written) when the case needs the general path: a
        source with a version or an open stream, a stream checkpoint, blocklisted content,
        an explicit node id that exists, a job with a webhook subscription (its deliveries
        are written by the general path, :mod:`telha.storage.webhooks.subscriptions`). With search
        enabled the call and the new version's index rows
        (:func:`telha.storage.search.index.sync_source`) are one transaction.

        :raises StaleLease: the job is not leased under the completion's generation.
        """
        if completion is None or completion.children or dedup is not Dedup.SUBMIT:
            return None
        sid = await self._pg._scope_id(scope, intern=True)
        assert sid is not None
        if await self._pg.read(has_webhooks, sid, completion.lease.job_id):
            return None
        # A source's first version defers its match keys (telha.storage.versions.publish.match).
        keys = projection.match_keys or deferred_keys(projection)
        matched = Match(keys, [None] * len(projection.nodes), {})
        rows = build_rows(
            sid, version.source_id, PENDING_TX, blob_id, projection, {}, match=matched
        )
        changes = rows.changes  # nothing is removed: the source had no current graph
        stats = changes.into_stats(completion.stats)
        detail = f" nodes={len(rows.node_ids)} {changes.detail()}"
        explicit = [n.node_id for n in projection.nodes if n.node_id is not None]
        lease = completion.lease
        args = {
            "p_job": lease.job_id,
            "p_gen": lease.lease_generation,
            "p_keys": [source_lock_key(sid, version.source_id)],
            "p_scope": sid,
            "p_source": version.source_id,
            "p_explicit": explicit,
            "p_now": completion.now_us,
            "p_stats": stats,
            "p_detail": detail,
            "p_version": {
                "name": version.name,
                "format": version.format,
                "content_hash": version.content_hash,
                "canonical_text_hash": canonical_hash,
                "size": version.size,
                "worker": version.worker,
                "job_id": version.job_id,
                "blob_id": blob_id,
                "text_len": len(projection.canonical),
                "root_node_id": rows.root,
                "changes": msgspec.json.encode(changes.as_stats()),
            },
            # One array per table, of the row types whose fields are build_rows's columns.
            "p_chunks": rows.chunks,
            "p_nodes": rows.nodes,
            "p_labels": rows.labels,
            "p_edges": rows.edges,
            "p_spans": rows.spans,
            "p_ambiguities": rows.ambiguities,
        }

        identity = version.identity.decode() if version.identity is not None else None
        own_tx = self._pg.search_enabled or identity is not None

        async def one(conn: Conn) -> tuple[str, int | None]:
            row = await conn.fetchrow(
                _call("outcome, tx", "telha_commit_single", args), *args.values()
            )
            assert row is not None
            if row[0] == "committed" and identity is not None:
                # The version's identity, in the same transaction (a first version: no reason).
                await conn.execute(
                    "UPDATE source_versions SET fingerprint = $1, identity = $2"
                    " WHERE scope_id = $3 AND source_id = $4 AND tx = $5",
                    version.fingerprint, identity, sid, version.source_id, row[1],
                )  # fmt: skip
            if (
                self._pg.search_enabled and row[0] == "committed"
            ):  # the index, in the same transaction
                await sync_source(PgTx(conn, self._pg._scopes), sid, version.source_id)
            return str(row[0]), row[1]

        outcome, tx_time = await self._pg._write("commit version", one, transaction=own_tx)
        if outcome == "stale":
            raise StaleLease("job is not leased under this lease generation")
        if outcome != "committed":
            return None
        self._pg.job_events.signal((lease.job_id,))  # its ``completed`` event
        assert tx_time is not None
        return CommitOutcome(False, int(tx_time), rows.node_ids, rows.edge_ids, changes=changes)


def _call(columns: str, function: str, args: dict[str, Any], tail: str = "") -> str:
    """``SELECT columns FROM function(name => $1, …)tail``: every argument by its name, in
    the order of ``args`` (whose values are then the parameters)."""
    named = ", ".join(f"{name} => ${i}" for i, name in enumerate(args, 1))
    return f"SELECT {columns} FROM {function}({named}){tail}"
