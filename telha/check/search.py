"""``search_index``: the full-text index agrees with the span rows (docs/operations.md, "The
consistency check"; the index: docs/architecture.md, "Search")."""

from __future__ import annotations

from telha.check.context import CheckContext

__all__ = ["SearchIndex"]

NAME = "search_index"

_WHAT = {
    "stale": "indexed, but not a span row of its source's current version",
    "duplicate": "indexed more than once",
    "missing": "a span row of a current version, not indexed",
    "out_of_range": "indexed outside its scope's rowid range, so its scope's searches miss it",
}


class SearchIndex:
    """The ``search_index`` check: every index row is a span row of its source's current
    version (superseded, retired and erased versions have left the index), none twice;
    while ``[search] enabled`` keeps it, every such span row is indexed; on SQLite the FTS5
    index holds one document per row; a version the index could not be filled with
    (docs/operations.md, "Bad rows") is listed with its reason. Checked: one per index
    row."""

    names: tuple[str, ...] = (NAME,)

    async def run(self, ctx: CheckContext) -> None:
        """Compare in ``ctx.scan``'s snapshot.

        :raises telha.domain.errors.StorageError: the store cannot be read.
        """
        found = await ctx.scan.search_index(ctx.report.max_listed)
        ctx.report.count(NAME, found.rows)
        for kind, keys in found.examples.items():
            for scope, source_id, tx, start, end in keys:
                subject = f"span [{start}, {end}) of {ctx.version_subject(scope, source_id, tx)}"
                ctx.report.add(NAME, subject, _WHAT[kind])
        for kind, n in found.counts.items():
            for _ in range(n - len(found.examples.get(kind, ()))):
                if kind in _WHAT:  # counted beyond the listed ones
                    ctx.report.add(NAME, kind, _WHAT[kind])
        for scope, source_id, tx, reason in found.failed:
            subject = ctx.version_subject(scope, source_id, tx)
            ctx.report.add(NAME, subject, f"could not be indexed: {reason}")
        for _ in range(found.counts.get("failed", 0) - len(found.failed)):
            ctx.report.add(NAME, "failed", "a version that could not be indexed")
        extra = found.counts.get("fts_rows", 0)
        if extra:
            ctx.report.add(
                NAME, "search_fts", f"FTS5 index and search_spans differ by {extra} rows"
            )
