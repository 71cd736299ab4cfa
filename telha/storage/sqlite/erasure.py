"""The synchronous entry point of :func:`telha.storage.core.erasure.purge_stream` that
:mod:`telha.storage.sqlite.streams` calls inside its own write transaction. Erasure itself is
:mod:`telha.storage.core.erasure`; this module goes once the stream operations run over a
:class:`~telha.storage.core.tx.Tx` and call the core function."""

from __future__ import annotations

import sqlite3

from telha.domain.model import Scope
from telha.storage.core import erasure
from telha.storage.core.tx import drive
from telha.storage.sqlite.tx import SqliteTx

__all__ = ["purge_stream"]


def _no_scope(conn: sqlite3.Connection, scope: Scope) -> int | None:
    raise AssertionError("purge_stream reads no scope")


def purge_stream(conn: sqlite3.Connection, sid: int, source_id: bytes, tx: int) -> None:
    """See :func:`telha.storage.core.erasure.purge_stream` (on the writer's thread)."""
    drive(erasure.purge_stream(SqliteTx(conn, known=_no_scope), sid, source_id, tx))
