"""Which stored rows a read sees (docs/architecture.md, "Versions and node identity"): the
one rule every read of nodes and edges applies, on both engines.

A node or edge row is in the graph at transaction time ``t`` when ``tx_from <= t < tx_to``
(``tx_to`` NULL: still open), it is not an erasure's hidden node, and the source version that
wrote it (``source_id``, ``tx_from``), if there is one, was published at or before ``t``.
"Now" is every open row whose version is published. The version lookup is one primary-key
probe of ``source_versions``; rows written by no version (an erasure's or a supersede's
trimmed node versions) have none and are seen.
"""

from __future__ import annotations

from typing import Any

__all__ = ["visible"]


def visible(alias: str, at: int | None, *, node: bool = True) -> tuple[str, tuple[Any, ...]]:
    """``(condition, params)``: row ``alias`` of ``nodes`` (``node``) or ``edges`` is in the
    graph now (``at`` None) or at transaction time ``at`` (µs)."""
    unpublished = (
        f"NOT EXISTS (SELECT 1 FROM source_versions pv WHERE pv.scope_id = {alias}.scope_id"
        f" AND pv.source_id = {alias}.source_id AND pv.tx = {alias}.tx_from AND "
    )
    erased = f" AND NOT {alias}.erased" if node else ""
    if at is None:
        return f"{alias}.tx_to IS NULL{erased} AND {unpublished}pv.published_tx IS NULL)", ()
    return (
        f"{alias}.tx_from <= ? AND ({alias}.tx_to IS NULL OR {alias}.tx_to > ?){erased}"
        f" AND {unpublished}(pv.published_tx IS NULL OR pv.published_tx > ?))",
        (at, at, at),
    )
