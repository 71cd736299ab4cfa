"""The erasure check of ``telha check`` (issue 11 item 4): no erased digest's bytes remain
anywhere the store can look.

Kept engine-neutral: the store counts the leftovers
(:meth:`telha.storage.protocol.Storage.erasure_leftovers`, the checks in
:data:`telha.storage.erasure.LEFTOVER_CHECKS`); this module turns them into findings.
"""

from __future__ import annotations

from telha.storage.erasure import LEFTOVER_CHECKS
from telha.storage.protocol import Storage

__all__ = ["erasure_violations"]


async def erasure_violations(store: Storage) -> list[str]:
    """One line per kind of leftover an erasure should have removed, e.g.
    ``"erasure: 3 canonical text chunks of erased versions"``; empty when none remains.

    Covers every scope: versions holding a blocklisted digest yet not erased, canonical text
    chunks of erased versions, raw upload chunks and job payloads with blocklisted or erased
    content, span rows of erased versions, node versions and edges they wrote unscrubbed.

    :raises telha.errors.StorageError: the store cannot be read.
    """
    counts = await store.erasure_leftovers()
    return [
        f"erasure: {counts[name]} {description}"
        for name, description, _ in LEFTOVER_CHECKS
        if counts.get(name)
    ]
