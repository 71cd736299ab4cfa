"""Archive members across an archive's versions, written once for both engines
(docs/architecture.md, "Versions and node identity"): a new version of an archive retires
the member sources of the files it no longer contains.

**How members are represented.** An archive's version (the code worker's ``.zip``/``.tar``
fan-out, docs/formats.md) holds a ``MANIFEST`` node with one ``CONTAINS`` edge per member to
the ``FILE`` node id that member's own job mints; each member is a child job (its
``enqueued`` event says ``parent=<the archive's job id>``) and so its own source, whose
version writes that ``FILE`` node. A child source is not superseded by its parent: only
this rule reaches across.

**The rule.** When a version of a source is published and the source's previous published
version held a ``MANIFEST``, every ``FILE`` node that manifest ``CONTAINS`` and the new
version's ``CONTAINS`` edges no longer reach is looked up; a current one written by another
source that was enqueued as a child of one of this source's jobs has that member source
retired (:func:`telha.storage.versions.publish.retire`, reason :data:`REASON`) at the publish's
tx, in the publish's transaction: the old members leave the current graph exactly when the
new manifest becomes current, and stay readable ``asOf`` before. A member being erased,
erased or already retired is left alone. A version published superseded (a newer one was
published first) retires nothing.

**A member applied late.** A member job still pending when its archive's newer version
dropped its file has no ``FILE`` to find then; when its version is published, the member
looks at its parent: if the parent source's current version is no longer the one whose job
enqueued it, is an archive, and its manifest no longer ``CONTAINS`` the member's root, the
member is retired right after its own publish, at the next tx, in the same transaction (its
source is locked already).
"""

from __future__ import annotations

import uuid

import msgspec

from telha.domain.errors import Conflict, NotFound
from telha.domain.ids import id_str
from telha.storage.core.tx import Tx, any_groups
from telha.storage.versions.publish import Known, retire

__all__ = [
    "ARCHIVE_LABEL",
    "MEMBER_EDGE",
    "MEMBER_LABEL",
    "REASON",
    "after_publish",
    "retire_late_member",
    "retire_members",
]

#: The label of an archive version's manifest node.
ARCHIVE_LABEL = "MANIFEST"
#: The label of a member's node, the target of a manifest's edge.
MEMBER_LABEL = "FILE"
#: The type of a manifest's edge to a member.
MEMBER_EDGE = "CONTAINS"
#: The retire reason a member retired by its archive's new version gets.
REASON = "no longer in its archive"


async def _previous(tx: Tx, sid: int, source_id: bytes, pin: int) -> int | None:
    """The tx of the source's latest published version before ``pin``, or ``None`` (also
    when a version after ``pin`` is published: the version at ``pin`` published
    superseded)."""
    row = await tx.fetchone(
        "SELECT tx FROM source_versions WHERE scope_id = ? AND source_id = ? AND tx <> ?"
        " AND published_tx IS NOT NULL ORDER BY tx DESC LIMIT 1",
        sid, source_id, pin,
    )  # fmt: skip
    return int(row[0]) if row is not None and row[0] < pin else None


async def _targets(
    tx: Tx, sid: int, source_id: bytes, version: int, froms: list[bytes]
) -> set[bytes]:
    """``to_id`` of the ``CONTAINS`` edges of the source's published version at ``version``
    (from ``froms`` only, when given): the source's edges in the graph as of that version's
    publish — the ones it wrote and the ones it kept open from an earlier version
    (docs/architecture.md, "Kept edges")."""
    row = await tx.fetchone(
        "SELECT published_tx FROM source_versions WHERE scope_id = ? AND source_id = ?"
        " AND tx = ?",
        sid, source_id, version,
    )  # fmt: skip
    at = int(row[0]) if row is not None and row[0] is not None else version
    rows = await tx.fetchall(
        "SELECT e.from_id, e.to_id FROM edges e WHERE e.scope_id = ? AND e.tx_from IN"
        " (SELECT v.tx FROM source_versions v WHERE v.scope_id = ? AND v.source_id = ?"
        " AND v.tx <= ? AND v.published_tx <= ?)"
        " AND e.source_id = ? AND e.type = ? AND (e.tx_to IS NULL OR e.tx_to > ?)",
        sid, sid, source_id, version, at, source_id, MEMBER_EDGE, at,
    )  # fmt: skip
    return {bytes(to) for frm, to in rows if not froms or bytes(frm) in froms}


async def _manifests(tx: Tx, sid: int, source_id: bytes, version: int) -> list[bytes]:
    """The ``MANIFEST`` node ids the source's version at ``version`` wrote."""
    rows = await tx.fetchall(
        "SELECT n.node_id FROM node_labels l JOIN nodes n ON n.scope_id = l.scope_id"
        " AND n.node_id = l.node_id AND n.tx_from = l.tx_from WHERE l.scope_id = ?"
        " AND l.label = ? AND l.tx_from = ? AND n.source_id = ?",
        sid, ARCHIVE_LABEL, version, source_id,
    )  # fmt: skip
    return [bytes(r[0]) for r in rows]


async def _writers(tx: Tx, sid: int, source_id: bytes, node_ids: list[bytes]) -> set[bytes]:
    """The sources (other than ``source_id``) whose current ``FILE`` node versions are among
    ``node_ids``."""
    found: set[bytes] = set()
    for cond, params in any_groups(tx, "node_id", node_ids, "bytea"):
        rows = await tx.fetchall(
            "SELECT source_id, labels FROM nodes WHERE scope_id = ? AND tx_to IS NULL"
            f" AND NOT erased AND source_id IS NOT NULL AND source_id <> ? AND {cond}",
            sid, source_id, *params,
        )  # fmt: skip
        for writer, labels in rows:
            if MEMBER_LABEL in msgspec.json.decode(labels):
                found.add(bytes(writer))
    return found


async def _children_of(tx: Tx, sid: int, source_id: bytes) -> set[str]:
    """The ``enqueued`` event details a child job of one of the source's jobs carries."""
    rows = await tx.fetchall(
        "SELECT job_id FROM source_versions WHERE scope_id = ? AND source_id = ?"
        " AND job_id IS NOT NULL",
        sid, source_id,
    )  # fmt: skip
    return {f"parent={id_str(bytes(r[0]))}" for r in rows}


async def _is_child(tx: Tx, sid: int, member: bytes, parents: set[str]) -> bool:
    """Whether a version of ``member`` came from a job enqueued as a child of one of
    ``parents`` (``parent=<job id>`` event details)."""
    rows = await tx.fetchall(
        "SELECT e.detail FROM source_versions v JOIN job_events e ON e.job_id = v.job_id"
        " WHERE v.scope_id = ? AND v.source_id = ? AND e.transition = 'enqueued'",
        sid, member,
    )  # fmt: skip
    return any(r[0] in parents for r in rows)


async def retire_members(
    tx: Tx, sid: int, source_id: bytes, pin: int, at: int, known: Known | None = None
) -> list[bytes]:
    """After the version of ``source_id`` written at ``pin`` was published at ``at`` (µs), in
    the same transaction: retire at ``at`` the member sources of the files the previous
    version's manifest held and this version no longer does (module docstring). Returns
    the retired sources' ids, sorted. A source that is no archive costs one primary-key
    probe (none for a single shot, whose commit read its previous version: ``known``), and
    one of the scope's ``MANIFEST`` labels when it has an earlier version."""
    if known is not None:
        previous = known.previous_tx
    else:
        previous = await _previous(tx, sid, source_id, pin)
    if previous is None:
        return []
    manifests = await _manifests(tx, sid, source_id, previous)
    if not manifests:
        return []
    gone = await _targets(tx, sid, source_id, previous, manifests)
    gone -= await _targets(tx, sid, source_id, pin, [])
    if not gone:
        return []
    writers = await _writers(tx, sid, source_id, sorted(gone))
    if not writers:
        return []
    parents = await _children_of(tx, sid, source_id)
    retired: list[bytes] = []
    for member in sorted(writers):
        if not await _is_child(tx, sid, member, parents):
            continue  # the same FILE id from a source that is not this archive's member
        try:
            await retire(tx, sid, member, REASON, at=at)
        except (NotFound, Conflict):
            continue  # being erased or erased: the erasure removes it
        retired.append(member)
    return retired


async def retire_late_member(
    tx: Tx,
    sid: int,
    source_id: bytes,
    job_id: bytes | None,
    root: bytes | None,
    *,
    child: bool = True,
) -> bool:
    """After the version of ``source_id`` its job ``job_id`` wrote (root node ``root``) was
    published, in the same transaction, which holds the source's lock: retire the source at
    a new tx when it is an archive's member its archive dropped meanwhile (module
    docstring). Returns whether it was retired. A job that is no child costs one
    primary-key probe, or none when the caller read the job's row (``child=False``: its
    ``parent_job_id`` is ``NULL``, so its ``enqueued`` event names no parent)."""
    if job_id is None or root is None or not child:
        return False
    event = await tx.fetchone(
        "SELECT detail FROM job_events WHERE job_id = ? AND transition = 'enqueued'"
        " ORDER BY seq LIMIT 1",
        job_id,
    )  # fmt: skip
    detail = str(event[0]) if event is not None and event[0] is not None else ""
    if not detail.startswith("parent="):
        return False
    parent_job = uuid.UUID(detail.removeprefix("parent=")).bytes
    parent = await tx.fetchone("SELECT source_id FROM jobs WHERE job_id = ?", parent_job)
    if parent is None:
        return False
    archive = bytes(parent[0])
    latest = await tx.fetchone(
        "SELECT tx, job_id FROM source_versions WHERE scope_id = ? AND source_id = ?"
        " AND published_tx IS NOT NULL ORDER BY tx DESC LIMIT 1",
        sid, archive,
    )  # fmt: skip
    if latest is None or latest[1] is None or bytes(latest[1]) == parent_job:
        return False
    manifests = await _manifests(tx, sid, archive, latest[0])
    if not manifests or root in await _targets(tx, sid, archive, latest[0], manifests):
        return False
    try:
        await retire(tx, sid, source_id, REASON)
    except (NotFound, Conflict):
        return False
    return True


async def after_publish(
    tx: Tx,
    sid: int,
    source_id: bytes,
    job_id: bytes | None,
    root: bytes | None,
    pin: int,
    at: int,
    *,
    known: Known | None = None,
    child: bool = True,
) -> None:
    """What a publish of the version of ``source_id`` written at ``pin`` (by job ``job_id``,
    root node ``root``) at ``at`` does to archive members, in its transaction:
    :func:`retire_members`, then :func:`retire_late_member` (``known``, ``child``: what a
    single shot's commit read already, see there)."""
    await retire_members(tx, sid, source_id, pin, at, known)
    await retire_late_member(tx, sid, source_id, job_id, root, child=child)
