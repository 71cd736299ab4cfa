"""Versions that supersede, written once for both engines (docs/architecture.md, "Versions
and node identity"): the match of a new version's nodes against the source's current graph,
the publish that makes a version the source's current graph, and retiring a source.

A version's rows are written at its transaction time but stay invisible to every read until
the version is **published** (``source_versions.published_tx``): a single shot publishes in
its commit's transaction, a stream at its finalize. The publish, in that same transaction,
closes at the publish tx everything the source's earlier versions asserted that the new one
replaces or no longer asserts — node versions and edges — so a reader sees the old graph or
the new one, never a mix. A node the new version no longer asserts but another source's
current edge touches is not closed: it gets a new version with that source's spans (it
loses only this source's). A stream whose source published a newer version meanwhile
publishes superseded: its rows are closed at their own start (visible at no time).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from telha.domain.erasure import ERASE_KIND, node_ids
from telha.domain.errors import Conflict, NotFound
from telha.domain.identity import (
    DEFERRED,
    INHERITED,
    Candidates,
    assign,
    deferred_keys,
    labels_part,
    match_keys,
    stored_key,
)
from telha.domain.model import Changes
from telha.domain.projection import Projection
from telha.domain.rows import PENDING_TX, Match, VersionRows
from telha.storage.core.sources import note_versions
from telha.storage.core.tx import Tx, any_groups
from telha.storage.search.index import sync_source

__all__ = [
    "Known",
    "RetireOutcome",
    "has_earlier",
    "keep_edges",
    "latest_published",
    "match",
    "publish",
    "retire",
]


_decode = msgspec.json.decode


@dataclass(frozen=True, slots=True)
class Known:
    """What a single shot's commit read of its source, so the match, kept edges, publish
    and archive rule of its transaction do not read it again: ``previous_tx``, the tx (µs)
    of the source's latest published version (``None``: none), read under the source's lock
    (SQLite: the one writer). The single shot's tx is newer than every stored one: no
    version after it is published."""

    previous_tx: int | None

    @property
    def earlier(self) -> bool:
        """Whether the source has a published version before the single shot's."""
        return self.previous_tx is not None


async def _unpublished(tx: Tx, sid: int, source_id: bytes) -> set[int]:
    """The txs of the source's versions not published (open or abandoned streams)."""
    rows = await tx.fetchall(
        "SELECT tx FROM source_versions WHERE scope_id = ? AND source_id = ?"
        " AND published_tx IS NULL",
        sid, source_id,
    )  # fmt: skip
    return {r[0] for r in rows}


async def has_earlier(tx: Tx, sid: int, source_id: bytes, pin: int) -> bool:
    """Whether the source has a published version older than ``pin`` (else it has no rows a
    version at ``pin`` could match or supersede)."""
    row = await tx.fetchone(
        "SELECT 1 FROM source_versions WHERE scope_id = ? AND source_id = ? AND tx < ?"
        " AND published_tx IS NOT NULL LIMIT 1",
        sid, source_id, pin,
    )  # fmt: skip
    return row is not None


async def _version_text(tx: Tx, sid: int, source_id: bytes, at: int) -> bytes:
    """The whole canonical text of the source's version written at ``at``."""
    rows = await tx.fetchall(
        "SELECT c.data FROM source_versions v JOIN blob_chunks c"
        " ON c.scope_id = v.scope_id AND c.blob_id = v.blob_id"
        " WHERE v.scope_id = ? AND v.source_id = ? AND v.tx = ? ORDER BY c.idx",
        sid, source_id, at,
    )  # fmt: skip
    return b"".join(bytes(r[0]) for r in rows)


class _StoredKeys:
    """The match keys of a source's stored rows whose keys were deferred
    (:data:`telha.domain.identity.DEFERRED`; :func:`telha.domain.identity.stored_key`): each
    version's text is read once, each label set decoded once."""

    def __init__(self, tx: Tx, sid: int, source_id: bytes) -> None:
        self._tx, self._sid, self._source_id = tx, sid, source_id
        self._texts: dict[int, bytes] = {}
        self._parts: dict[str, tuple[bytes, bool]] = {}

    async def key(self, tx_from: int, labels: str, props: bytes, prov: bytes) -> bytes | None:
        """The key of the row written at ``tx_from`` with these labels, properties and
        provenance JSON; ``None`` when its provenance is not its version's own."""
        text = self._texts.get(tx_from)
        if text is None:
            text = await _version_text(self._tx, self._sid, self._source_id, tx_from)
            self._texts[tx_from] = text
        part = self._parts.get(labels)
        if part is None:
            part = self._parts[labels] = labels_part(_decode(labels))
        return stored_key(part, bytes(props), _decode(prov), text)


async def _deferred_keys(
    tx: Tx, sid: int, source_id: bytes, rows: list[tuple[bytes, int, str, bytes, bytes]]
) -> dict[tuple[bytes, int], bytes]:
    """The match keys of stored rows ``(node_id, tx_from, labels JSON, properties JSON,
    provenance JSON)`` whose keys were deferred, by ``(node_id, tx_from)``."""
    keys_of = _StoredKeys(tx, sid, source_id)
    keys: dict[tuple[bytes, int], bytes] = {}
    for node_id, tx_from, labels, props, prov in rows:
        key = await keys_of.key(tx_from, labels, props, prov)
        if key is not None:
            keys[(bytes(node_id), tx_from)] = key
    return keys


async def _write_deferred_keys(tx: Tx, sid: int, source_id: bytes) -> None:
    """Store the keys the source's current rows deferred, so the parts of a stream can probe
    them by key: at the first part of a stream (once per source: a stream writes its own
    keys, and a whole version computes its keys when it has an earlier version)."""
    rows = await tx.fetchall(
        "SELECT node_id, tx_from, labels, properties, provenance FROM nodes"
        " WHERE scope_id = ? AND source_id = ? AND match_key = ? AND tx_to IS NULL"
        " AND NOT erased",
        sid, source_id, DEFERRED,
    )  # fmt: skip
    keys = await _deferred_keys(tx, sid, source_id, rows)
    await tx.executemany(
        "UPDATE nodes SET match_key = ? WHERE scope_id = ? AND node_id = ? AND tx_from = ?",
        [(key, sid, node_id, tx_from) for (node_id, tx_from), key in keys.items()],
    )


_Probed = tuple[bytes, bytes, int, str, bytes, int | None, int | None]


async def _probe(
    tx: Tx, sid: int, source_id: bytes, keys: list[bytes], at: Callable[[int], bool]
) -> list[_Probed]:
    """The source's open, not erased node rows whose match key is one of ``keys`` (sorted)
    and whose ``tx_from`` ``at`` accepts: ``(match_key, node_id, tx_from, labels JSON,
    properties JSON, valid_from, valid_to)``, in node-id order.

    Two steps (docs/architecture.md, "Deferred keys"), because a row storing ``INHERITED``
    has its node's key but no entry of its own in the key index: the index alone names the
    nodes (the node id is in its entries: no table row is read), then their open rows are
    read by primary key in node-id order (a version wrote its new nodes in id order, so one
    part's matches sit side by side in the table), each taken if it stores the key or
    ``INHERITED``."""
    key_of: dict[bytes, bytes] = {}
    for cond, params in any_groups(tx, "match_key", keys, "bytea"):
        for key, node_id in await tx.fetchall(
            "SELECT match_key, node_id FROM nodes WHERE scope_id = ? AND source_id = ?"
            f" AND {cond}{tx.dialect.key_index_condition('match_key')}",
            sid, source_id, *params,
        ):  # fmt: skip
            key_of[bytes(node_id)] = bytes(key)
    ids = sorted(key_of)
    found: list[_Probed] = []
    for cond, params in any_groups(tx, "node_id", ids, "bytea"):
        # By primary key (source_id is compared here: a condition on it would plan through
        # nodes_by_source, one more lookup a row).
        for node_id, tx_from, source, stored, labels, props, vfrom, vto in await tx.fetchall(
            "SELECT node_id, tx_from, source_id, match_key, labels, properties, valid_from,"
            f" valid_to FROM nodes WHERE scope_id = ? AND {cond} AND tx_to IS NULL"
            " AND NOT erased",
            sid, *params,
        ):  # fmt: skip
            key = key_of[bytes(node_id)]
            if bytes(source) == source_id and stored in (key, INHERITED) and at(tx_from):
                found.append((key, node_id, tx_from, labels, props, vfrom, vto))
    return found


async def _inherited_keys(
    tx: Tx, sid: int, source_id: bytes, ids: list[bytes]
) -> dict[bytes, bytes]:
    """The keys of the nodes ``ids`` (sorted) whose current rows store ``INHERITED``: the key
    their earlier rows hold, read by primary key (each node's rows side by side)."""
    keys: dict[bytes, bytes] = {}
    for cond, params in any_groups(tx, "node_id", ids, "bytea"):
        for node_id, key in await tx.fetchall(
            f"SELECT node_id, match_key FROM nodes WHERE scope_id = ? AND {cond}"
            " AND source_id = ?",
            sid, *params, source_id,
        ):  # fmt: skip
            if key is not None and key not in (DEFERRED, INHERITED):
                keys[bytes(node_id)] = bytes(key)
    return keys


async def match(
    tx: Tx,
    sid: int,
    source_id: bytes,
    pin: int,
    proj: Projection,
    *,
    whole: bool = False,
    known: Known | None = None,
) -> Match:
    """The ids ``proj``'s nodes take from the source's current graph
    (:mod:`telha.domain.identity`), for a version written at ``pin``. A streamed part's
    earlier parts have claimed some ids already: their rows at ``pin`` carry them.

    ``whole``: ``proj`` is a whole version (a single shot), so the source's current rows are
    read in one scan of its index rather than probed key by key (a part of a stream matches
    a slice of a graph that may be much larger). A whole version that is its source's first
    defers its keys (its rows are written without one): most sources never get a second
    version, and a second one computes them from the stored rows. ``known``: a single
    shot's (:class:`Known`), so whether the source has an earlier version is not read."""
    n = len(proj.nodes)
    earlier = known.earlier if known is not None else await has_earlier(tx, sid, source_id, pin)
    if not earlier:
        keys = deferred_keys(proj) if whole and proj.match_keys is None else match_keys(proj)
        return Match(keys, [None] * n, {})
    keys = match_keys(proj)
    if not whole and pin == PENDING_TX:
        await _write_deferred_keys(tx, sid, source_id)  # a stream's first part
    wanted = sorted({k for k in keys if k is not None})
    if not wanted:
        return Match(keys, [None] * n, {})
    hidden = await _unpublished(tx, sid, source_id) - {pin}
    found: dict[bytes, list[bytes]] = {}
    claimed: set[bytes] = set()
    before: dict[bytes, tuple[str, bytes, int | None, int | None]] = {}
    if whole:
        assert pin == PENDING_TX  # a whole version's rows are built after the match
        rows = await tx.fetchall(
            "SELECT match_key, node_id, tx_from, labels, properties, valid_from, valid_to,"
            " provenance FROM nodes WHERE scope_id = ? AND source_id = ? AND tx_to IS NULL"
            " AND NOT erased",
            sid, source_id,
        )  # fmt: skip
        keys_of = _StoredKeys(tx, sid, source_id)
        # A whole version claims no row at pin; an unpublished version's rows are not current.
        rows = [r for r in rows if r[2] < pin and r[2] not in hidden]
        inherited = await _inherited_keys(
            tx, sid, source_id, sorted(bytes(r[1]) for r in rows if r[0] == INHERITED)
        )
        for key, node_id, tx_from, labels, props, vfrom, vto, prov in rows:
            if key == DEFERRED:
                key = await keys_of.key(tx_from, labels, props, prov)
            elif key == INHERITED:
                key = inherited.get(bytes(node_id))
            if key is not None:
                found.setdefault(key, []).append(node_id)
                before[node_id] = (labels, bytes(props), vfrom, vto)
    else:
        for key, node_id, tx_from, labels, props, vfrom, vto in await _probe(
            tx, sid, source_id, wanted, lambda t: t == pin or (t < pin and t not in hidden)
        ):
            if tx_from == pin:
                claimed.add(node_id)
            else:
                found.setdefault(key, []).append(node_id)
                before[node_id] = (labels, bytes(props), vfrom, vto)
    candidates: Candidates = {
        key: deque(sorted(n for n in ids if n not in claimed)) for key, ids in found.items()
    }
    taken = assign(keys, candidates)
    if not whole:  # a matched node's row inherits its key (INHERITED)
        keys = [k if t is None else INHERITED for k, t in zip(keys, taken, strict=True)]
    return Match(keys, taken, before)


async def _close_own(tx: Tx, sid: int, source_id: bytes, pin: int) -> None:
    """Close every row a version wrote at its own start: visible at no time."""
    for table in ("nodes", "edges"):
        await tx.execute(
            f"UPDATE {table} SET tx_to = tx_from WHERE scope_id = ? AND source_id = ?"
            " AND tx_from = ? AND tx_to IS NULL",
            sid, source_id, pin,
        )  # fmt: skip


async def latest_published(tx: Tx, sid: int, source_id: bytes) -> int | None:
    """The tx (µs) of the source's latest published version, or ``None`` when it has none
    (docs/architecture.md, "Versions and node identity")."""
    row = await tx.fetchone(
        "SELECT tx FROM source_versions WHERE scope_id = ? AND source_id = ?"
        " AND published_tx IS NOT NULL ORDER BY tx DESC LIMIT 1",
        sid, source_id,
    )  # fmt: skip
    return int(row[0]) if row is not None else None


async def _supporter_spans(
    tx: Tx, sid: int, source_id: bytes, node_id: bytes
) -> tuple[int, list[tuple[int, int]]] | None:
    """``(tx, spans)`` of the latest published version of ``source_id`` and its span rows
    linking ``node_id``; ``None`` when it has no published version."""
    latest = await latest_published(tx, sid, source_id)
    if latest is None:
        return None
    rows = await tx.fetchall(
        f'SELECT start, "end", linked_nodes FROM span_rows WHERE scope_id = ? AND source_id = ?'
        f" AND source_version_tx = ? AND {tx.dialect.contains('linked_nodes')}",
        sid, source_id, latest, node_id,
    )  # fmt: skip
    return latest, [(s, e) for s, e, linked in rows if node_id in node_ids(bytes(linked))]


async def _may_keep(tx: Tx, sid: int, source_id: bytes, pin: int, known: Known | None) -> bool:
    """Whether the version written at ``pin`` keeps its unchanged edges open (see
    :func:`keep_edges`): the source has a published version before it (``known``: as a
    single shot's commit read it), and no older version of the source is still being
    written (a live stream's job, pending or leased), whose marks this version's would
    overwrite."""
    earlier = known.earlier if known is not None else await has_earlier(tx, sid, source_id, pin)
    if not earlier:
        return False
    row = await tx.fetchone(
        "SELECT 1 FROM source_versions v JOIN jobs j ON j.job_id = v.job_id"
        " WHERE v.scope_id = ? AND v.source_id = ? AND v.tx < ? AND v.published_tx IS NULL"
        " AND j.state IN ('pending', 'leased') LIMIT 1",
        sid, source_id, pin,
    )  # fmt: skip
    return row is None


async def keep_edges(
    tx: Tx, sid: int, source_id: bytes, rows: VersionRows, known: Known | None = None
) -> None:
    """Kept edges (docs/architecture.md, "Kept edges"): of the edges ``rows`` (a version
    written at ``rows.tx``, or one streamed part of it) would write, those the source's
    current graph has open already — the same id, so the same type, endpoints and
    properties — are marked ``seen_tx = rows.tx`` and dropped from ``rows.edges``: the open
    row goes on, and :func:`publish` closes only the rows the version neither wrote nor
    marked. ``rows.edge_ids`` still lists every edge of the version. Not done (every edge is
    written) when :func:`_may_keep` says no. ``known``: a single shot's (:class:`Known`)."""
    if not rows.edges or not await _may_keep(tx, sid, source_id, rows.tx, known):
        return
    kept: set[bytes] = set()
    ids = [e[1] for e in rows.edges]
    for cond, params in any_groups(tx, "edge_id", ids, "bytea"):
        marked = await tx.fetchall(
            f"UPDATE edges SET seen_tx = ? WHERE scope_id = ? AND {cond} AND source_id = ?"
            " AND tx_to IS NULL AND tx_from < ? RETURNING edge_id",
            rows.tx, sid, *params, source_id, rows.tx,
        )  # fmt: skip
        kept.update(bytes(r[0]) for r in marked)
    if kept:
        rows.edges = [e for e in rows.edges if e[1] not in kept]


async def _close_unsupported(
    tx: Tx,
    sid: int,
    source_id: bytes,
    before: int,
    at: int,
    where: str,
    params: tuple[Any, ...],
) -> tuple[int, list[tuple[Any, ...]]]:
    """Close at ``at`` the source's current node versions written before ``before`` (and
    matching ``where``, its ``params``) that no other source's current edge touches; the
    count closed, and the ``(node_id, labels, properties, valid_from, valid_to)`` of the
    ones such an edge keeps, in id order."""
    touched = (
        "SELECT e.source_id FROM edges e WHERE e.scope_id = nodes.scope_id"
        " AND e.tx_to IS NULL AND e.source_id <> ? AND {end} = nodes.node_id"
    )
    supported = " OR ".join(
        f"EXISTS ({touched.format(end=end)})" for end in ("e.from_id", "e.to_id")
    )
    removed = await tx.execute(
        "UPDATE nodes SET tx_to = ? WHERE scope_id = ? AND source_id = ? AND tx_to IS NULL"
        f" AND tx_from < ? AND NOT erased{where} AND NOT ({supported})",
        at, sid, source_id, before, *params, source_id, source_id,
    )  # fmt: skip
    kept = await tx.fetchall(
        "SELECT node_id, labels, properties, valid_from, valid_to FROM nodes WHERE scope_id = ?"
        f" AND source_id = ? AND tx_to IS NULL AND tx_from < ? AND NOT erased{where}"
        " ORDER BY node_id",
        sid, source_id, before, *params,
    )  # fmt: skip
    return removed, kept


async def _close_dropped(
    tx: Tx, sid: int, source_id: bytes, before: int, at: int, kept_by: int | None = None
) -> int:
    """Close at ``at`` the source's current node versions and edges written before ``before``
    (what a new version did not write again, or everything, for a retire) — except the
    edges the version written at ``kept_by`` marked as its own (:func:`keep_edges`);
    returns how many nodes left the graph. A node another source's current edge touches
    gets a new version at ``at`` carrying that source's spans instead of being closed."""
    not_kept = " AND (seen_tx IS NULL OR seen_tx <> ?)" if kept_by is not None else ""
    await tx.execute(
        "UPDATE edges SET tx_to = ? WHERE scope_id = ? AND source_id = ? AND tx_to IS NULL"
        f" AND tx_from < ?{not_kept}",
        at, sid, source_id, before, *(() if kept_by is None else (kept_by,)),
    )  # fmt: skip
    if kept_by is None:  # a retire: every open row of the source, in one walk
        removed, kept = await _close_unsupported(tx, sid, source_id, before, at, "", ())
    else:
        # A publish: the source's open rows are mostly the new version's own, so they are
        # walked once for the older ones, which are then closed and read by id.
        older = await tx.fetchall(
            "SELECT node_id FROM nodes WHERE scope_id = ? AND source_id = ? AND tx_to IS NULL"
            " AND tx_from < ? AND NOT erased ORDER BY node_id",
            sid, source_id, before,
        )  # fmt: skip
        ids = [bytes(r[0]) for r in older]
        removed, kept = 0, []
        for cond, params in any_groups(tx, "node_id", ids, "bytea"):
            n, some = await _close_unsupported(
                tx, sid, source_id, before, at, f" AND {cond}", params
            )
            removed += n
            kept.extend(some)
    for node_id, labels, props, vfrom, vto in kept:
        edge = await tx.fetchone(
            "SELECT source_id FROM edges WHERE scope_id = ? AND tx_to IS NULL"
            " AND source_id <> ? AND (from_id = ? OR to_id = ?) ORDER BY tx_from DESC LIMIT 1",
            sid, source_id, node_id, node_id,
        )  # fmt: skip
        assert edge is not None
        other = edge[0]
        found = await _supporter_spans(tx, sid, other, node_id)
        prov = b"[]"
        if found is not None:
            stx, spans = found
            prov = msgspec.json.encode([[a, b, stx] for a, b in sorted(spans)])
        await tx.execute(
            "UPDATE nodes SET tx_to = ? WHERE scope_id = ? AND node_id = ? AND tx_to IS NULL"
            " AND tx_from < ?",
            at, sid, node_id, before,
        )  # fmt: skip
        await tx.execute(
            "INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance,"
            " source_id, valid_from, valid_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            sid, node_id, at, labels, props, prov, other, vfrom, vto,
        )  # fmt: skip
        await tx.executemany(
            "INSERT INTO node_labels (scope_id, label, node_id, tx_from) VALUES (?, ?, ?, ?)",
            [(sid, label, node_id, at) for label in msgspec.json.decode(labels)],
        )
    return removed


async def publish(
    tx: Tx,
    sid: int,
    source_id: bytes,
    pin: int,
    at: int,
    changes: Changes,
    root: bytes | None,
    known: Known | None = None,
) -> Changes:
    """Make the version written at ``pin`` its source's current graph at ``at`` (µs; ``pin``
    itself for a single shot, the finalize's tx for a stream): record ``published_tx``,
    its root node and its changes, and close what it replaces (see the module docstring).
    Returns ``changes`` with ``removed`` counted. ``known``: a single shot's
    (:class:`Known`): no newer version, and whether an earlier one exists, are not read;
    the version becomes the one the search index holds without reading it back."""
    newer = None
    if known is None:
        newer = await tx.fetchone(
            "SELECT 1 FROM source_versions WHERE scope_id = ? AND source_id = ? AND tx > ?"
            " AND published_tx IS NOT NULL LIMIT 1",
            sid, source_id, pin,
        )  # fmt: skip
    if newer is not None:
        await _close_own(tx, sid, source_id, pin)
    else:
        earlier = known.earlier if known is not None else await has_earlier(tx, sid, source_id, pin)
        # Earlier versions of the nodes this version wrote again: matched ids and worker
        # ids. A source without an earlier version has nothing matched, so only its worker
        # ids (the rows without a match key, found through nodes_by_key) are looked at.
        worker_ids = f" AND w.match_key IS NULL{tx.dialect.key_index_condition('w.match_key')}"
        only_worker_ids = "" if earlier else worker_ids
        await tx.execute(
            "UPDATE nodes SET tx_to = ? WHERE scope_id = ? AND tx_to IS NULL AND tx_from < ?"
            " AND node_id IN (SELECT w.node_id FROM nodes w WHERE w.scope_id = ?"
            f" AND w.source_id = ? AND w.tx_from = ? AND w.tx_to IS NULL{only_worker_ids})",
            at, sid, pin, sid, source_id, pin,
        )  # fmt: skip
        if earlier:
            changes.removed = await _close_dropped(tx, sid, source_id, pin, at, pin)
    await tx.execute(
        "UPDATE source_versions SET published_tx = ?, root_node_id = ?, changes = ?"
        " WHERE scope_id = ? AND source_id = ? AND tx = ?",
        at, root, msgspec.json.encode(changes.as_stats()), sid, source_id, pin,
    )  # fmt: skip
    await note_versions(tx, sid, source_id, at)
    # A single shot just published is its source's current version (neither retired nor
    # erased: it was written now).
    await sync_source(tx, sid, source_id, current=pin if known is not None else None)
    return changes


@dataclass(frozen=True, slots=True)
class RetireOutcome:
    """A retired source: the retire's ``tx`` (µs) and ``reason``, the version that was
    current (``version_tx``) and how many of the source's node versions the retire closed
    (``nodes_closed``; a node another source still supports keeps a version of its own)."""

    source_id: bytes
    tx: int
    reason: str | None
    version_tx: int
    nodes_closed: int


async def _closed_at(tx: Tx, sid: int, source_id: bytes, at: int) -> int:
    """How many of the source's node versions were closed at ``at``."""
    row = await tx.fetchone(
        "SELECT count(*) FROM nodes WHERE scope_id = ? AND source_id = ? AND tx_to = ?",
        sid, source_id, at,
    )  # fmt: skip
    return int(row[0]) if row is not None else 0


async def retire(
    tx: Tx, sid: int, source_id: bytes, reason: str | None, *, at: int | None = None
) -> RetireOutcome:
    """Retire a source: close everything it alone supports at a new tx and mark its current
    version retired. Retiring again answers the first retire. Its bytes and history stay.
    ``at`` (µs): retire at this tx instead, inside a publish that holds the transaction
    time already (an archive retiring its members, :mod:`telha.storage.versions.members`); that
    hold serialises every write of the source, so no source lock is taken.

    :raises NotFound: the source has no published version.
    :raises Conflict: the source is being erased (an erase job is pending or running), or
        its current version was erased.
    """
    if at is None:
        await tx.lock_sources(sid, (source_id,))
    latest = await tx.fetchone(
        "SELECT tx, retired_tx, retire_reason, erased_at FROM source_versions"
        " WHERE scope_id = ? AND source_id = ? AND published_tx IS NOT NULL"
        " ORDER BY tx DESC LIMIT 1",
        sid, source_id,
    )  # fmt: skip
    if latest is None:
        raise NotFound("no such source")
    version_tx, retired_tx, retired_reason, erased_at = latest
    erasing = await tx.fetchone(
        "SELECT 1 FROM jobs WHERE scope_id = ? AND source_id = ? AND kind = ?"
        " AND state IN ('pending', 'leased') LIMIT 1",
        sid, source_id, ERASE_KIND,
    )  # fmt: skip
    if erasing is not None or erased_at is not None:
        raise Conflict("the source is being erased or was erased; it cannot be retired")
    if retired_tx is not None:
        closed = await _closed_at(tx, sid, source_id, retired_tx)
        return RetireOutcome(source_id, retired_tx, retired_reason, version_tx, closed)
    at = at if at is not None else await tx.next_tx()
    await _close_dropped(tx, sid, source_id, at, at)
    await tx.execute(
        "UPDATE source_versions SET retired_tx = ?, retire_reason = ? WHERE scope_id = ?"
        " AND source_id = ? AND tx = ?",
        at, reason, sid, source_id, version_tx,
    )  # fmt: skip
    await note_versions(tx, sid, source_id, at)
    await sync_source(tx, sid, source_id)
    closed_count = await _closed_at(tx, sid, source_id, at)
    return RetireOutcome(source_id, at, reason, version_tx, closed_count)
