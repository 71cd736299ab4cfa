"""``erasure``: the erasure check of ``telha check``: no erased digest's
bytes remain anywhere the store can look.

Kept engine-neutral: the store counts the leftovers
(:meth:`telha.storage.erasure.role.ErasureStore.leftovers`, one count per entry of
:data:`telha.domain.erasure.LEFTOVER_CHECKS`, over every scope); this module turns them into
findings. The counts are read beside the snapshot the other checks share, not inside it.
"""

from __future__ import annotations

from telha.check.context import CheckContext
from telha.domain.erasure import LEFTOVER_CHECKS

__all__ = ["ErasureLeftovers"]

NAME = "erasure"


class ErasureLeftovers:
    """The ``erasure`` check: one item checked per kind of leftover, one violation per kind
    found — subject the kind (``span_rows``), detail how many rows and what they are — over
    every scope: versions holding a blocklisted digest yet not erased, canonical text chunks
    of erased versions, raw upload chunks and job payloads with blocklisted or erased content,
    span rows of erased versions, node versions and edges they wrote unscrubbed."""

    names: tuple[str, ...] = (NAME,)

    async def run(self, ctx: CheckContext) -> None:
        """Count the leftovers through ``ctx.store`` (skipped without one).

        :raises telha.domain.errors.StorageError: the store cannot be read.
        """
        if ctx.store is None:
            return
        counts = await ctx.store.erasure.leftovers()
        for name, description, _ in LEFTOVER_CHECKS:
            ctx.report.count(NAME)
            if counts.get(name):
                ctx.report.add(NAME, name, f"{counts[name]} {description}")
