"""The read aggregate of a store (``store.reads``): a scope's source versions, canonical
text, span rows, nodes and edges (now or as of a transaction time), a source's admission
for principals, a version's chunk inputs and text windows, and the diff of two versions,
each one :meth:`~telha.storage.core.engine.EngineOps.read` over :mod:`telha.storage.reads.graph`,
:mod:`telha.storage.reads.acl`, :mod:`telha.storage.reads.text` and
:mod:`telha.storage.reads.diff` (:class:`telha.storage.protocol.ReadStore` is its contract;
docs/rest-api.md, "Routes"). Offsets are bytes of canonical text; times in µs."""

from __future__ import annotations

from telha.domain.acl import Principals, admits
from telha.domain.chunking import MAX_CHUNKED_TEXT_BYTES
from telha.domain.model import Direction, EdgeRecord, NodeVersion, Scope, SourceVersion, SpanRecord
from telha.storage.core.engine import EngineOps
from telha.storage.reads import graph as r
from telha.storage.reads.acl import source_acl
from telha.storage.reads.diff import VersionDiff, version_diff
from telha.storage.reads.text import ChunkInputs, TextWindow, chunk_inputs, text_window

__all__ = ["Reads"]


class Reads:
    """A component the store composes, not a mixin: ``engine`` runs each read."""

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine

    async def has_source(self, scope: Scope, source_id: bytes) -> bool:
        """See :func:`telha.storage.reads.graph.has_source`."""
        return await self._engine.read(r.has_source, scope, source_id)

    async def versions(self, scope: Scope, source_id: bytes) -> list[SourceVersion]:
        """See :func:`telha.storage.reads.graph.source_versions` (every finalized one)."""
        return await self._engine.read(r.source_versions, scope, source_id, False)

    async def text(
        self, scope: Scope, source_id: bytes, tx: int, start: int | None, end: int | None
    ) -> bytes:
        """See :func:`telha.storage.reads.graph.read_text`."""
        return await self._engine.read(r.read_text, scope, source_id, tx, start, end)

    async def span_rows(self, scope: Scope, source_id: bytes, tx: int) -> list[SpanRecord]:
        """See :func:`telha.storage.reads.graph.span_rows`."""
        return await self._engine.read(r.span_rows, scope, source_id, tx)

    async def node(
        self,
        scope: Scope,
        node_id: bytes,
        as_of: int | None,
        principals: tuple[str, ...] | None = None,
    ) -> NodeVersion | None:
        """See :func:`telha.storage.reads.graph.get_node`."""
        return await self._engine.read(r.get_node, scope, node_id, as_of, principals)

    async def nodes(
        self,
        scope: Scope,
        *,
        label: str | None,
        source_id: bytes | None,
        limit: int,
        after: bytes | None,
        as_of: int | None = None,
        principals: tuple[str, ...] | None = None,
    ) -> list[NodeVersion]:
        """See :func:`telha.storage.reads.graph.list_nodes`."""
        return await self._engine.read(
            r.list_nodes, scope, label, source_id, limit, after, as_of, principals
        )

    async def edges(
        self,
        scope: Scope,
        node_id: bytes,
        direction: Direction,
        as_of: int | None = None,
        principals: tuple[str, ...] | None = None,
    ) -> list[EdgeRecord]:
        """See :func:`telha.storage.reads.graph.node_edges`."""
        return await self._engine.read(r.node_edges, scope, node_id, direction, as_of, principals)

    async def admitted(self, scope: Scope, source_id: bytes, principals: Principals | None) -> bool:
        """Whether a request of ``scope`` acting for ``principals`` sees the source
        (:func:`telha.domain.acl.admits` over :func:`telha.storage.reads.acl.source_acl`);
        always ``True`` without principals (no read)."""
        if principals is None:
            return True
        return admits(await self._engine.read(source_acl, scope, source_id), principals)

    async def chunk_inputs(
        self,
        scope: Scope,
        source_id: bytes,
        tx: int,
        max_text_bytes: int = MAX_CHUNKED_TEXT_BYTES,
    ) -> ChunkInputs:
        """See :func:`telha.storage.reads.text.chunk_inputs`."""
        return await self._engine.read(chunk_inputs, scope, source_id, tx, max_text_bytes)

    async def text_window(
        self, scope: Scope, source_id: bytes, tx: int, start: int, end: int
    ) -> TextWindow:
        """See :func:`telha.storage.reads.text.text_window`."""
        return await self._engine.read(text_window, scope, source_id, tx, start, end)

    async def diff(
        self,
        scope: Scope,
        source_id: bytes,
        *,
        from_tx: int | None,
        to_tx: int | None,
        limit: int,
        after: bytes | None,
    ) -> VersionDiff:
        """See :func:`telha.storage.reads.diff.version_diff`."""
        return await self._engine.read(version_diff, scope, source_id, from_tx, to_tx, limit, after)
