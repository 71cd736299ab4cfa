"""The read aggregate's role (docs/rest-api.md, "Routes"): a store's ``reads``. Part of
:class:`telha.storage.protocol.Storage`, which re-exports it."""

from __future__ import annotations

from typing import Protocol

from telha.domain.chunking import MAX_CHUNKED_TEXT_BYTES
from telha.domain.model import (
    Direction,
    EdgeRecord,
    NodeVersion,
    Scope,
    SourceVersion,
    SpanRecord,
)
from telha.storage.reads.diff import VersionDiff
from telha.storage.reads.text import ChunkInputs, TextWindow

__all__ = ["ReadStore"]


class ReadStore(Protocol):
    """Reading what was ingested, within one scope, a store's ``reads``
    (:class:`~telha.storage.reads.aggregate.Reads`): the REST read API, and the Eraser
    resolving what a request names."""

    async def versions(self, scope: Scope, source_id: bytes) -> list[SourceVersion]:
        """All versions of a source, newest first; empty when the source is unknown."""

    async def text(
        self, scope: Scope, source_id: bytes, tx: int, start: int | None, end: int | None
    ) -> bytes:
        """Canonical text bytes ``[start, end)`` of one version (the slice API).

        :raises NotFound: no such version in ``scope``.
        :raises RequestError: range outside the text or not on UTF-8 boundaries.
        """

    async def span_rows(self, scope: Scope, source_id: bytes, tx: int) -> list[SpanRecord]:
        """The span reverse index of one version in document order.

        :raises NotFound: no such version in ``scope``.
        """

    async def node(
        self,
        scope: Scope,
        node_id: bytes,
        as_of: int | None,
        principals: tuple[str, ...] | None = None,
    ) -> NodeVersion | None:
        """The node version current at transaction time ``as_of`` (µs; ``None`` = now);
        with ``principals``, ``None`` when its source's ACL admits none of them."""

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
        """Nodes (current, or as of transaction time ``as_of``) ordered by id, strictly
        after ``after``, at most ``limit``; with ``principals``, of the sources whose ACL
        admits one of them only (docs/rest-api.md, "Principals")."""

    async def edges(
        self,
        scope: Scope,
        node_id: bytes,
        direction: Direction,
        as_of: int | None = None,
        principals: tuple[str, ...] | None = None,
    ) -> list[EdgeRecord]:
        """Edges of a node (current, or as of ``as_of``) whose far endpoint is in the graph
        then (dangling edges are left out), and with ``principals`` of a source whose ACL
        admits one of them."""

    async def admitted(
        self, scope: Scope, source_id: bytes, principals: tuple[str, ...] | None
    ) -> bool:
        """Whether a request of ``scope`` acting for ``principals`` sees the source: always
        without principals; else when the source has no ACL or its ACL names one of them
        (:func:`telha.domain.acl.admits`)."""

    async def chunk_inputs(
        self,
        scope: Scope,
        source_id: bytes,
        tx: int,
        max_text_bytes: int = MAX_CHUNKED_TEXT_BYTES,
    ) -> ChunkInputs:
        """One version's text, span rows and node facts, for retrieval chunks.

        :raises NotFound: no such version in ``scope``.
        :raises ContentErased: the version was erased.
        :raises PayloadTooLarge: its text is over ``max_text_bytes``.
        """

    async def text_window(
        self, scope: Scope, source_id: bytes, tx: int, start: int, end: int
    ) -> TextWindow:
        """The stored chunks of one version holding bytes ``[start, end)`` (clamped to the
        text), with the unit counts of the text before them (offset conversion,
        :mod:`telha.domain.units`).

        :raises NotFound: no such version in ``scope``.
        :raises ContentErased: the version was erased.
        """

    async def has_source(self, scope: Scope, source_id: bytes) -> bool:
        """Whether ``scope`` knows the source at all: a version row (finalized or a stream's
        pinned one) or an ingest job of it."""

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
        """One page of what changed between two published versions of a source
        (:mod:`telha.storage.reads.diff`): at most ``limit`` added, removed or changed nodes
        with ids after ``after``; ``None`` for ``from_tx``/``to_tx`` picks the version
        published before ``to_tx`` / the latest one.

        :raises RequestError: ``from_tx`` is not before ``to_tx``.
        :raises NotFound: no such source, or a tx that is not one of its published versions.
        :raises ContentErased: one of the two versions was erased.
        """
