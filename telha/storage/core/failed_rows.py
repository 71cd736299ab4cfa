"""Stored rows recorded failed, written once for both engines (docs/architecture.md,
"Supervision and bad rows"; docs/operations.md, "Bad rows"): what
:func:`~telha.storage.core.row_faults.per_row` raised is written here, in a transaction of
its own, so the next pass goes on with the other rows:

- a job (``"job"``: the reaper's expired lease, a job lost with its worker, an erase job's
  step) ends ``dead`` with ``failureReason`` ``"corrupt_row: …"`` and a ``dead`` event; its
  lease and streaming checkpoint are cleared (a checkpoint that does not decode cannot be
  abandoned);
- a search entry (``"search_entry"``: a version the full-text index is being filled with)
  is marked done with its ``failure`` (``search_sources.failure``) and queued as stale (the
  rows written for it so far are deleted, no search answers it); it is not tried again until
  its source gets a new current version, and ``telha check`` lists it (``search_index``);
- a retention job (``"retention_job"``) or raw blob (``"raw_blob"``) is left as it is:
  nothing to write, the pass skips it (:mod:`telha.storage.retention.passes`).
"""

from __future__ import annotations

import structlog

from telha.domain.ids import id_str
from telha.domain.policy import format_reason
from telha.domain.row_faults import FAULT_KIND, RowFault
from telha.storage.core.engine import EngineOps
from telha.storage.core.tx import Rollback, Tx
from telha.storage.jobs.lifecycle import end_dead

__all__ = ["fail_row", "key_text", "note", "record"]

log = structlog.get_logger("telha.storage")


async def _dead_letter(tx: Tx, job_id: bytes, reason: str, now_us: int) -> bool:
    """A job whose row cannot be processed ends ``dead`` (unless it ended already)."""
    row = await tx.fetchone(f"SELECT state FROM jobs WHERE job_id = ?{tx.for_update}", job_id)
    if row is None or row[0] not in ("pending", "leased"):
        raise Rollback(False)
    await end_dead(tx, job_id, now_us, reason)
    return True


async def _fail_entry(tx: Tx, key: tuple[int, bytes, int], reason: str) -> bool:
    """A search entry that cannot be filled: its rows written so far go, it is marked done
    with its ``failure`` (unless its source moved on to another version meanwhile)."""
    sid, source_id, version_tx = key
    changed = await tx.execute(
        "UPDATE search_sources SET done = true, failure = ? WHERE scope_id = ?"
        " AND source_id = ? AND version_tx = ? AND NOT done",
        reason, sid, source_id, version_tx,
    )  # fmt: skip
    if not changed:
        raise Rollback(False)
    await tx.execute(
        "INSERT INTO search_stale (scope_id, source_id, version_tx) VALUES (?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        sid, source_id, version_tx,
    )  # fmt: skip
    return True


async def fail_row(tx: Tx, fault: RowFault, now_us: int) -> bool:
    """Record ``fault``'s row failed (module docstring); ``False`` when there was nothing
    to record (the row changed meanwhile, or a retention job: left as it is)."""
    if fault.what == "job" and isinstance(fault.key, bytes):
        return await _dead_letter(tx, fault.key, format_reason(FAULT_KIND, fault.reason), now_us)
    if fault.what == "search_entry" and isinstance(fault.key, tuple):
        sid, source_id, version_tx = fault.key
        return await _fail_entry(tx, (int(sid), bytes(source_id), int(version_tx)), fault.reason)
    return False


def note(fault: RowFault) -> None:
    """Log ``fault`` (``row_failed``) where nothing is recorded in the store: the row is
    left as it is and passed by."""
    log.warning(
        "row_failed", what=fault.what, key=key_text(fault.key), reason=fault.reason,
        recorded=False,
    )  # fmt: skip


async def record(ops: EngineOps, fault: RowFault, now_us: int) -> bool:
    """:func:`fail_row` in one transaction of ``ops``, logged ``row_failed`` (what, key,
    reason, whether anything was written)."""
    done = await ops.transaction("record a failed row", fail_row, fault, now_us)
    log.warning(
        "row_failed", what=fault.what, key=key_text(fault.key), reason=fault.reason,
        recorded=done,
    )  # fmt: skip
    return done


def key_text(key: object) -> str:
    """A row key for a log line: a 16-byte id as its UUID, other bytes in hex, else
    ``repr``."""
    if isinstance(key, bytes):
        return id_str(key) if len(key) == 16 else key.hex()
    if isinstance(key, tuple):
        return "(" + ", ".join(key_text(k) for k in key) + ")"
    return repr(key)
