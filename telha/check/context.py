"""What every check family gets: the snapshot, the report, the page size, and small bounded
caches over versions and canonical text chunks that several checks share."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from telha.check.violations import Report
from telha.domain.canonical import is_boundary
from telha.domain.ids import id_str
from telha.domain.model import BLOB_CHUNK, Scope
from telha.domain.scan import ScanVersion
from telha.storage.api import Scan
from telha.storage.protocol import ScanStore

__all__ = ["CheckContext", "CheckFamily", "TextBytes", "VersionCache"]

VersionKey = tuple[int, bytes, int]


class CheckFamily(Protocol):
    """One module's checks: ``names`` (shown in the summary in this order) and ``run``,
    which streams what it needs from ``ctx.scan`` and reports into ``ctx.report``."""

    names: tuple[str, ...]

    async def run(self, ctx: CheckContext) -> None:
        """Run every check of the family over the whole snapshot."""


class VersionCache:
    """Source versions by ``(scope, source_id, tx)``, looked up in batches, the most recent
    ``size`` kept (node and span pages touch few versions each)."""

    def __init__(self, scan: Scan, size: int = 4096) -> None:
        self._scan = scan
        self._size = size
        self._cache: OrderedDict[VersionKey, ScanVersion | None] = OrderedDict()

    async def get_many(self, keys: Iterable[VersionKey]) -> dict[VersionKey, ScanVersion | None]:
        """``{key: version or None (no such version)}`` for every key."""
        wanted = set(keys)
        missing = [k for k in wanted if k not in self._cache]
        if missing:
            found = {(v.scope, v.source_id, v.tx): v for v in await self._scan.versions_at(missing)}
            for k in missing:
                self._cache[k] = found.get(k)
        out = {}
        for k in wanted:
            self._cache.move_to_end(k)
            out[k] = self._cache[k]
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return out


class TextBytes:
    """Single bytes of canonical text, read chunk by chunk (1 MiB), the last ``size`` chunks
    kept (checks walk spans in document order, so a chunk is read about once)."""

    def __init__(self, scan: Scan, size: int = 16) -> None:
        self._scan = scan
        self._size = size
        self._cache: OrderedDict[tuple[int, bytes, int], bytes | None] = OrderedDict()

    async def _chunk(self, scope: int, blob_id: bytes, idx: int) -> bytes | None:
        key = (scope, blob_id, idx)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        rows = await self._scan.chunks(scope, blob_id, idx, 1)
        data = rows[0][1] if rows and rows[0][0] == idx else None
        self._cache[key] = data
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return data

    async def on_boundary(self, v: ScanVersion, pos: int) -> bool | None:
        """Whether byte offset ``pos`` (``0 <= pos <= text_len``) of ``v``'s text is not
        inside a UTF-8 sequence; ``None`` when the chunk holding it is missing."""
        if pos >= (v.text_len or 0):
            return True
        if v.blob_id is None:
            return None
        chunk = await self._chunk(v.scope, v.blob_id, pos // BLOB_CHUNK)
        if chunk is None or pos % BLOB_CHUNK >= len(chunk):
            return None
        return is_boundary(chunk, pos % BLOB_CHUNK)


@dataclass
class CheckContext:
    """The shared state of one ``telha check`` run.

    :param scan: the snapshot every check reads.
    :param report: where counts and violations go.
    :param page: rows per page when streaming a table.
    :param scopes: scope names by engine scope number (for subjects).
    :param store: the store itself, for checks that read beside the snapshot (``erasure``).
    """

    scan: Scan
    report: Report
    page: int = 1000
    scopes: dict[int, Scope] = field(default_factory=dict)
    store: ScanStore | None = None

    def where(self, scope: int) -> str:
        """``tenant/org`` of a scope number, for violation subjects."""
        s = self.scopes.get(scope)
        return f"{s.tenant_id}/{s.organization_id}" if s else f"scope#{scope}"

    def version_subject(self, scope: int, source_id: bytes | None, tx: int) -> str:
        """``version <source uuid>@<tx> (tenant/org)``."""
        source = id_str(source_id) if source_id and len(source_id) == 16 else repr(source_id)
        return f"version {source}@{tx} ({self.where(scope)})"
