"""Retire sources through the storage's own ``retire``
(:func:`telha.storage.versions.publish.retire`, one transaction per source), from a process
of its own that the crash tier can SIGKILL in the middle of a retire: ``python -m
tests.crash.retire CONFIG TENANT ORG SOURCE_UUID…`` prints each
source's uuid once its retire committed. Retiring again answers the first retire, so a killed
run is simply run again.

The REST ``DELETE /v1/sources/{sourceId}`` reaches the same function; this module stands in
for it where a test needs a retire without that route. On SQLite it writes beside a running
``telha serve`` as a second writer (the file lock orders them; its transaction time is taken
inside its transaction, after the server's last commit).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import anyio

from telha.config import load_config
from telha.domain.model import Scope
from telha.storage import open_store
from telha.storage.core.tx import Tx
from telha.storage.versions.publish import RetireOutcome, retire

__all__ = ["retire_sources"]


async def _retire(tx: Tx, scope: Scope, source_id: bytes, reason: str | None) -> RetireOutcome:
    return await retire(tx, await tx.scope_id(scope), source_id, reason)


async def retire_sources(
    config: Path, scope: Scope, source_ids: Sequence[bytes], reason: str | None = None
) -> list[RetireOutcome]:
    """Retire each source of ``scope`` in the store ``config`` names, one transaction each,
    printing each one's uuid when committed.

    :raises telha.domain.errors.NotFound: a source has no published version.
    :raises telha.domain.errors.Conflict: a source is being erased.
    """
    cfg, base_dir = load_config(config, environ={})
    out = []
    async with open_store(cfg, base_dir, readers=1, pool_size=2) as store:
        for source_id in source_ids:
            done = await store.transaction("retire", _retire, scope, source_id, reason)
            out.append(done)
            print(uuid.UUID(bytes=source_id), flush=True)
    return out


def main(argv: Sequence[str]) -> None:
    """``CONFIG TENANT ORG SOURCE_UUID…``."""
    config, tenant, org, *sources = argv
    ids = [uuid.UUID(s).bytes for s in sources]

    async def go() -> None:
        await retire_sources(Path(config), Scope(tenant, org), ids, "crash tier")

    anyio.run(go)


if __name__ == "__main__":
    main(sys.argv[1:])
