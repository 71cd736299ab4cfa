"""The erasure aggregate's role (docs/operations.md, "Erasure"): a store's ``erasure``.
Part of :class:`telha.storage.protocol.Storage`, which re-exports it."""

from __future__ import annotations

from typing import Protocol

from telha.domain.erasure import ErasePayload, PreviewVersion
from telha.domain.model import LeaseRef, NewJob, Scope

__all__ = ["ErasureStore"]


class ErasureStore(Protocol):
    """GDPR erasure (:mod:`telha.domain.erasure`), a store's ``erasure``
    (:class:`~telha.storage.erasure.aggregate.Erasure`): the erase job and its audit row, then
    its steps, one transaction each; what an erasure would erase; what erasures left."""

    async def enqueue(
        self, scope: Scope, job: NewJob, payload: ErasePayload, *, now_us: int
    ) -> None:
        """Insert an erase job (kind ``erase``, pending) and its audit row (who, what, when,
        why; no content) in one transaction."""

    async def step(self, lease: LeaseRef, step: str, *, now_us: int) -> dict[str, int]:
        """Run one step of the erase job held under ``lease`` (one of
        :data:`telha.domain.erasure.STEPS`) in one transaction that also records it (an
        ``erase_step`` event with its counts); a step already recorded is not run again and
        returns its recorded counts. ``finish`` completes the job with the result as its
        ``stats`` (and on SQLite then truncates the WAL).

        :raises StaleLease: the lease is not current.
        :raises ValueError: an unknown step.
        """

    async def preview(
        self, scope: Scope, source_id: bytes, version_tx: int | None
    ) -> list[PreviewVersion]:
        """What erasing ``source_id`` (or its version ``version_tx``) would erase now, writing
        nothing: each version of the closure over shared digests with its source's name and
        the node versions it wrote (:func:`telha.storage.erasure.steps.erasure_preview`)."""

    async def leftovers(self) -> dict[str, int]:
        """Rows, across every scope, that an erasure should have removed or scrubbed and that
        are still there: ``{name: count}`` for each of
        :data:`telha.domain.erasure.LEFTOVER_CHECKS` (all 0 when nothing erased remains)."""
