"""``stats.warnings``: what a projection dropped, guessed or could not read
(docs/worker-protocol.md, "The submission"; docs/formats.md, "Warnings").

The shape, one for every worker: a list of ``{"kind": str, "count": int, "detail": str}``
objects, one per kind, sorted by kind; ``count`` ≥ 1 is how many times it happened (rows,
pictures, parts…), ``detail`` the first occurrence's words (omitted when there is none). A
submission without warnings has no ``warnings`` key. Kinds in use (:data:`KINDS`):

* ``encoding_guessed``: a legacy text encoding was guessed, below
  :data:`~workers_common.encoding_guess.LOW_CONFIDENCE` (``stats.encoding_confidence``);
* ``encoding_fallback``: bytes that do not fit their declared charset were read with another;
* ``truncated``: the input ends early (no PDF trailer, no final MIME boundary, a CSV that ends
  inside a quoted cell); what could be read is projected;
* ``ragged_rows``: table rows with more or fewer cells than the header;
* ``html_body_lost``: an HTML body with text gave none to the projection;
* ``pictures_skipped``: pictures (and charts) not projected;
* ``content_skipped``: formulas and footnotes not projected;
* ``attachment_unreadable``: an e-mail attachment that could not be taken out.

Same input and options, same list (workers are deterministic).
"""

from __future__ import annotations

from typing import Any

__all__ = ["KINDS", "Warnings"]

KINDS = frozenset({
    "encoding_guessed", "encoding_fallback", "truncated", "ragged_rows", "html_body_lost",
    "pictures_skipped", "content_skipped", "attachment_unreadable",
})  # fmt: skip


class Warnings:
    """Collects warnings by kind; :meth:`put` writes them into a ``stats`` mapping."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._details: dict[str, str] = {}

    @classmethod
    def of(cls, stats: dict[str, Any]) -> Warnings:
        """The warnings already in ``stats`` (to add more and :meth:`put` them back)."""
        found = cls()
        for item in stats.get("warnings") or []:
            found.add(item["kind"], item["count"], item.get("detail"))
        return found

    def add(self, kind: str, count: int = 1, detail: str | None = None) -> None:
        """Record ``count`` (≥ 1; 0 records nothing) occurrences of ``kind`` (one of
        :data:`KINDS`); the first ``detail`` given for a kind is kept.

        :raises ValueError: an unknown kind or a negative count.
        """
        if kind not in KINDS or count < 0:
            raise ValueError(f"warning: {kind!r} × {count}")
        if count == 0:
            return
        self._counts[kind] = self._counts.get(kind, 0) + count
        if detail and kind not in self._details:
            self._details[kind] = detail

    def __bool__(self) -> bool:
        return bool(self._counts)

    def as_list(self) -> list[dict[str, Any]]:
        """The ``stats.warnings`` list (module docstring), sorted by kind."""
        out: list[dict[str, Any]] = []
        for kind in sorted(self._counts):
            item: dict[str, Any] = {"kind": kind, "count": self._counts[kind]}
            if kind in self._details:
                item["detail"] = self._details[kind]
            out.append(item)
        return out

    def put(self, stats: dict[str, Any]) -> dict[str, Any]:
        """``stats`` with ``warnings`` set when any were recorded (returned for chaining)."""
        if self._counts:
            stats["warnings"] = self.as_list()
        return stats
