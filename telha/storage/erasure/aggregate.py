"""The erasure aggregate of a store (``store.erasure``; docs/operations.md, "Erasure")."""

from __future__ import annotations

from telha.domain.erasure import STEPS, Counts, ErasePayload, PreviewVersion
from telha.domain.model import LeaseRef, NewJob, Scope
from telha.storage.core.engine import EngineOps
from telha.storage.erasure.steps import (
    enqueue_erasure,
    erase_step,
    erasure_leftovers,
    erasure_preview,
)

__all__ = ["Erasure"]


class Erasure:
    """The erasure aggregate of a store (``store.erasure``; its contract:
    :class:`telha.storage.erasure.role.ErasureStore`), over ``engine``'s runners. A
    component the store composes, not a mixin."""

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine

    async def enqueue(
        self, scope: Scope, job: NewJob, payload: ErasePayload, *, now_us: int
    ) -> None:
        """See :func:`enqueue_erasure`."""
        await self._engine.transaction(
            "enqueue erasure", enqueue_erasure, scope, job, payload, now_us
        )

    async def step(self, lease: LeaseRef, step: str, *, now_us: int) -> Counts:
        """See :func:`erase_step`; after ``finish``, the engine's
        :meth:`~telha.storage.core.engine.EngineOps.erasure_finished`.

        :raises ValueError: an unknown step.
        """
        if step not in STEPS:
            raise ValueError(f"unknown erasure step {step!r}")
        counts = await self._engine.transaction(f"erase ({step})", erase_step, lease, step, now_us)
        if step == "finish":
            await self._engine.erasure_finished()
        return counts

    async def preview(
        self, scope: Scope, source_id: bytes, version_tx: int | None
    ) -> list[PreviewVersion]:
        """See :func:`erasure_preview`."""
        return await self._engine.read(erasure_preview, scope, source_id, version_tx)

    async def leftovers(self) -> dict[str, int]:
        """See :func:`erasure_leftovers`."""
        return await self._engine.read(erasure_leftovers)
