"""What changed between two published versions of one source (docs/rest-api.md, "Versions
and diffs"), written once for both engines.

A version's graph is the node rows its source wrote at the version's tx that are not
hidden by an erasure: every node of a version gets a row at its tx (see
:func:`telha.domain.rows.build_rows`), whether it is new, changed or matched unchanged. So
two versions compare row against row by node id: ``added`` are ids only in ``to``,
``removed`` ids only in ``from``, ``changed`` ids in both whose labels or properties differ
(the stored JSON, byte for byte, as the match compares them), ``unchanged`` the rest —
counted, not listed. Provenance is not compared: an unchanged node's spans point into its
own version's text.

A page's ids and the unchanged count come from the dialect
(:meth:`~telha.storage.core.dialect.Dialect.diff_page`,
:meth:`~telha.storage.core.dialect.Dialect.diff_unchanged`). On SQLite a page walks the ids
of ``to`` and of ``from`` in order, each version in its two halves
(:meth:`~telha.storage.core.dialect.Dialect.version_halves`: open rows through ``nodes_by_source``,
closed ones through ``closed_nodes_by_version``; both index entries end with the node id),
with one primary-key probe into the other version per row, and stops at ``limit``: a page
costs what it lists plus the unchanged ids it skips, and an open half also skips the
source's open rows of other versions. On PostgreSQL a page groups both
versions' rows by node id in one scan of ``nodes_by_source_tx``, with no join: its planner,
on statistics not yet refreshed after a large version is written, would probe one
version's rows once per row of the other (quadratic) for the anti-join. ``unchanged`` is
counted over both versions on every page.
"""

from __future__ import annotations

from dataclasses import dataclass

from telha.domain.errors import ContentErased, NotFound, RequestError
from telha.domain.model import NodeVersion, Scope
from telha.domain.records import node_record
from telha.storage.core.tx import Tx
from telha.storage.reads.graph import NODE_COLS
from telha.storage.versions.publish import latest_published

__all__ = ["VersionDiff", "version_diff"]

#: Stands for "no version" as ``from``: no node row has this tx.
_NOTHING = -1


@dataclass(frozen=True, slots=True)
class VersionDiff:
    """One page of the diff of version ``from_tx`` (µs; ``None``: no earlier version, every
    node is added) and version ``to_tx`` of a source: each list in node id order,
    ``changed`` as ``(before, after)`` pairs, ``unchanged`` counted over the whole diff (the
    same on every page), ``next_after`` the last id of this page when more follow (else
    ``None``)."""

    from_tx: int | None
    to_tx: int
    added: list[NodeVersion]
    removed: list[NodeVersion]
    changed: list[tuple[NodeVersion, NodeVersion]]
    unchanged: int
    next_after: bytes | None


async def _published(tx: Tx, sid: int, source_id: bytes, at: int, what: str) -> None:
    """Check that ``at`` is a published, not erased, version of the source.

    :raises NotFound: it is not a published version of the source.
    :raises ContentErased: it was erased.
    """
    row = await tx.fetchone(
        "SELECT erased_at, erase_reason FROM source_versions WHERE scope_id = ?"
        " AND source_id = ? AND tx = ? AND published_tx IS NOT NULL",
        sid, source_id, at,
    )  # fmt: skip
    if row is None:
        raise NotFound(f"{what}={at} is not a version of this source")
    if row[0] is not None:
        raise ContentErased(f"source version {at} ({what}) was erased: {row[1]}")


async def _pick(
    tx: Tx, sid: int, source_id: bytes, from_tx: int | None, to_tx: int | None
) -> tuple[int | None, int]:
    """``(from, to)``: the given versions, checked, or the defaults (``to`` the latest
    published version, ``from`` the one published before ``to``, if any)."""
    if to_tx is None:
        to_tx = await latest_published(tx, sid, source_id)
        if to_tx is None:
            raise NotFound("no such source")
        if from_tx is not None and from_tx >= to_tx:
            raise RequestError(f"from ({from_tx}) must be before to ({to_tx})")
    await _published(tx, sid, source_id, to_tx, "to")
    if from_tx is None:
        row = await tx.fetchone(
            "SELECT tx FROM source_versions WHERE scope_id = ? AND source_id = ?"
            " AND published_tx IS NOT NULL AND tx < ? ORDER BY tx DESC LIMIT 1",
            sid, source_id, to_tx,
        )  # fmt: skip
        from_tx = int(row[0]) if row is not None else None
    if from_tx is not None:
        await _published(tx, sid, source_id, from_tx, "from")
    return from_tx, to_tx


async def version_diff(
    tx: Tx,
    scope: Scope,
    source_id: bytes,
    from_tx: int | None,
    to_tx: int | None,
    limit: int,
    after: bytes | None,
) -> VersionDiff:
    """The page of the diff of versions ``from_tx`` and ``to_tx`` (µs; ``None``: the
    defaults, see :func:`_pick`) that lists at most ``limit`` nodes with ids strictly after
    ``after``.

    :raises RequestError: ``from_tx`` is not before ``to_tx``.
    :raises NotFound: no such source in ``scope``, or ``from_tx``/``to_tx`` is not one of
        its published versions.
    :raises ContentErased: one of the two versions was erased.
    """
    if from_tx is not None and to_tx is not None and from_tx >= to_tx:
        raise RequestError(f"from ({from_tx}) must be before to ({to_tx})")
    sid = await tx.known_scope_id(scope)
    if sid is None:
        raise NotFound("no such source")
    picked_from, picked_to = await _pick(tx, sid, source_id, from_tx, to_tx)
    old = _NOTHING if picked_from is None else picked_from
    start = after or b""
    sql, params = tx.dialect.diff_page(sid, source_id, old, picked_to, start, limit + 1)
    page = await tx.fetchall(sql, *params)
    ids = [r[0] for r in page]
    more = len(ids) > limit
    ids = ids[:limit]
    before: dict[bytes, NodeVersion] = {}
    after_rows: dict[bytes, NodeVersion] = {}
    if ids:
        cond, params = tx.dialect.any("n.node_id", ids, "bytea")
        rows = await tx.fetchall(
            f"SELECT {NODE_COLS} FROM nodes n WHERE n.scope_id = ? AND n.source_id = ?"
            f" AND n.tx_from IN (?, ?) AND NOT n.erased AND {cond}",
            sid, source_id, old, picked_to, *params,
        )  # fmt: skip
        for row in rows:
            node = node_record(row)
            (after_rows if node.tx_from == picked_to else before)[node.node_id] = node
    added, removed, changed = [], [], []
    for node_id in ids:
        new, was = after_rows.get(node_id), before.get(node_id)
        if new is not None and was is not None:
            changed.append((was, new))
        elif new is not None:
            added.append(new)
        elif was is not None:
            removed.append(was)
    unchanged = 0
    for sql, params in tx.dialect.diff_unchanged(sid, source_id, old, picked_to):
        counted = await tx.fetchone(sql, *params)
        unchanged += int(counted[0]) if counted else 0
    return VersionDiff(
        picked_from, picked_to, added, removed, changed,
        unchanged, ids[-1] if more else None,
    )  # fmt: skip
