"""``chunk_hashes``: every finalized version's stored canonical text re-hashes (BLAKE3) to its
``canonicalTextHash`` (canonical text is stored in chunks of exactly 1 MiB, the last
one shorter, indexes 0, 1, …; their total is the version's ``text_len``). Erased versions are
left to the ``erasure`` check.

Versions are streamed by key; each text is streamed a few chunks at a time. Versions sharing a
blob (equal text) are hashed once while the blob stays among the last few thousand seen.
"""

from __future__ import annotations

from collections import OrderedDict

import blake3

from telha.check.context import CheckContext
from telha.domain.model import BLOB_CHUNK
from telha.domain.scan import ScanVersion

__all__ = ["ChunkHashes"]

NAME = "chunk_hashes"
#: Chunks fetched per query (MiB held at once).
_CHUNKS_PER_READ = 4


async def _hash_blob(ctx: CheckContext, scope: int, blob_id: bytes) -> tuple[bytes, int, str]:
    """``(BLAKE3, length in bytes, problem or "")`` of a blob's stored chunks."""
    h = blake3.blake3()
    length = 0
    expected = 0
    short = False
    while True:
        rows = await ctx.scan.chunks(scope, blob_id, expected, _CHUNKS_PER_READ)
        for idx, data in rows:
            if idx != expected:
                return h.digest(), length, f"chunk {expected} is missing"
            if short:
                return h.digest(), length, f"chunk {idx - 1} is shorter than 1 MiB but not last"
            short = len(data) != BLOB_CHUNK
            if len(data) > BLOB_CHUNK:
                return h.digest(), length, f"chunk {idx} holds {len(data)} bytes (> 1 MiB)"
            h.update(data)
            length += len(data)
            expected += 1
        if len(rows) < _CHUNKS_PER_READ:
            return h.digest(), length, ""


class ChunkHashes:
    """The ``chunk_hashes`` check (see the module docstring)."""

    names: tuple[str, ...] = (NAME,)

    async def run(self, ctx: CheckContext) -> None:
        """One pass over the versions; finalized ones are re-hashed."""
        seen: OrderedDict[tuple[int, bytes], tuple[bytes, int, str]] = OrderedDict()
        async for page in ctx.scan.versions(ctx.page):
            for v in page:
                # An erased version's chunks are redaction records (no bytes to hash): the
                # ``erasure`` check sees that none of its bytes are left.
                if v.canonical_text_hash is not None and v.erased_at is None:
                    await self._check(ctx, seen, v)

    @staticmethod
    async def _check(
        ctx: CheckContext,
        seen: OrderedDict[tuple[int, bytes], tuple[bytes, int, str]],
        v: ScanVersion,
    ) -> None:
        ctx.report.count(NAME)
        subject = ctx.version_subject(v.scope, v.source_id, v.tx)
        if v.blob_id is None:
            ctx.report.add(NAME, subject, "finalized without a blob id")
            return
        key = (v.scope, v.blob_id)
        result = seen.get(key)
        if result is None:
            result = seen[key] = await _hash_blob(ctx, v.scope, v.blob_id)
            if len(seen) > 4096:
                seen.popitem(last=False)
        digest, length, problem = result
        if problem:
            ctx.report.add(NAME, subject, problem)
        elif length != (v.text_len or 0):
            ctx.report.add(NAME, subject, f"chunks hold {length} bytes, text_len is {v.text_len}")
        elif digest != v.canonical_text_hash:
            expected = (v.canonical_text_hash or b"").hex()
            detail = f"chunks hash to {digest.hex()}, canonicalTextHash is {expected}"
            ctx.report.add(NAME, subject, detail)
