"""The connection-level entry point of :func:`telha.storage.core.erasure.purge_stream` that
:mod:`telha.storage.postgres.streams` calls inside its own transaction. Erasure itself is
:mod:`telha.storage.core.erasure`; this module goes once the stream operations run over a
:class:`~telha.storage.core.tx.Tx` and call the core function."""

from __future__ import annotations

from telha.storage.core import erasure
from telha.storage.postgres.tx import Conn, PgTx

__all__ = ["purge_stream"]


async def purge_stream(conn: Conn, sid: int, source_id: bytes, tx: int) -> None:
    """See :func:`telha.storage.core.erasure.purge_stream`."""
    await erasure.purge_stream(PgTx(conn, {}), sid, source_id, tx)
