"""Streaming projection of profiled tables into submissions (docs/worker-protocol.md).

Canonical text: per table a header line (column names joined by TAB; span kind ``heading``,
the TABLE node's span), then one line per data row (normalized cell texts joined by TAB, each
run of tabs inside a cell shown as one space, a quoted cell's line breaks kept — so a row may
take several lines —, empty cells as nothing; span kind ``cell``, the row node's span, exactly
the row's text without the newline that ends it). Rows are separated by ``"\\n"``, tables by
a blank line. Every partial after the first therefore starts with
``"\\n"`` (never with a combining mark), and each partial's spans are global byte offsets
(``base`` = bytes of all earlier partials).

A partial is flushed every ``rows_per_partial`` data rows. The WORKBOOK and TABLE nodes carry
deterministic ids (uuid5 of the job's name and the table's position), so
rows in later partials reference their table without waiting for the ids core assigns: the
stream can be built ahead of core's apply (:func:`workers_common.prefetch.ahead`). A changed
file's tables keep their ids: a new version of the same node.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tabular_worker.cells import (
    Ambiguous,
    DateVotes,
    display_expr,
    normalize_expr,
    nul_count_expr,
    type_columns,
)
from tabular_worker.table import Table
from workers_common import normalize_canonical
from workers_common.temporal import to_us

__all__ = [
    "APPLIED_CANDIDATE_CONFIDENCE",
    "DETECTOR_CONFIDENCE",
    "Projector",
    "Submissions",
]

#: ``detectorConfidence`` of a day-first/month-first ambiguity: both readings are valid dates.
DETECTOR_CONFIDENCE = 0.9
#: ``appliedCandidateConfidence`` of the month-first reading applied without evidence.
APPLIED_CANDIDATE_CONFIDENCE = 0.5

#: What the generator yields (a submission dict) and receives back (the node ids, unused).
Submissions = Generator[dict[str, Any], Any, None]

#: Namespace of the tabular worker's deterministic node ids (uuid5).
ID_NAMESPACE = uuid.UUID("6f1c1f2e-2b8e-5c55-9a53-7461626c6172")


@dataclass(slots=True)
class _Partial:
    """One submission under construction; offsets are global (``base`` + local bytes)."""

    base: int
    parts: list[str] = field(default_factory=list)
    length: int = 0
    spans: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    rels: list[dict[str, Any]] = field(default_factory=list)
    ambiguities: list[dict[str, Any]] = field(default_factory=list)
    rows: int = 0

    @property
    def end(self) -> int:
        return self.base + self.length

    def text(self, text: str) -> tuple[int, int]:
        start = self.end
        self.parts.append(text)
        self.length += len(text.encode("utf-8"))
        return start, self.end

    def span(self, start: int, end: int, kind: str) -> int:
        self.spans.append({"start": start, "end": end, "kind": kind})
        return len(self.spans) - 1

    def node(self, labels: list[str], props: dict[str, Any], spans: list[int], node_id: str) -> int:
        self.nodes.append({"labels": labels, "properties": props, "spanRefs": spans, "id": node_id})
        return len(self.nodes) - 1

    def edge(self, src: str, dst: int, ordinal: int) -> None:
        self.rels.append(
            {"type": "CONTAINS", "fromId": src, "toRef": dst, "properties": {"ord": ordinal}}
        )

    def build(self, final: bool, stats: dict[str, Any] | None = None) -> dict[str, Any]:
        text = "".join(self.parts)
        if normalize_canonical(text) != text:
            raise AssertionError("tabular canonical text is not normalized")
        out: dict[str, Any] = {
            "v": 1,
            "canonicalText": text,
            "spans": self.spans,
            "nodes": self.nodes,
            "relationships": self.rels,
        }
        if stats is not None:
            out["stats"] = stats
        if self.ambiguities:
            out["ambiguities"] = self.ambiguities
        out["partial"] = not final
        return out


class Projector:
    """Turns tables into a stream of submissions; see the module docstring.

    :param label: the row node label.
    :param rows_per_partial: data rows per submission.
    :param clarify: emit day-first/month-first ambiguities (``options.clarify``).
    :param identity: what the deterministic ids derive from (the source name).
    :param root_id: the id the root (the WORKBOOK, else the first TABLE) takes instead: a
        parent job's link to this child (:attr:`workers_common.Job.root_node_id`).
    """

    def __init__(
        self,
        label: str,
        rows_per_partial: int,
        clarify: bool,
        identity: str,
        root_id: str | None = None,
    ) -> None:
        self.identity = identity
        self.root_id = root_id
        self.label = label
        self.rows_per_partial = rows_per_partial
        self.clarify = clarify
        self.dirty: dict[str, int] = {}
        self.ambiguous_dates = 0
        self.emitted = 0
        self.suppressed = 0
        self.nul_chars = 0
        self._p = _Partial(0)
        self._workbook: str | None = None
        self._table_id = ""

    def _id(self, what: str) -> str:
        return str(uuid.uuid5(ID_NAMESPACE, f"{self.identity}\x00{what}"))

    def _flush(self) -> Submissions:
        yield self._p.build(final=False)
        self._p = _Partial(self._p.end)

    def run(
        self,
        tables: Iterable[Table],
        workbook: dict[str, Any] | None,
        stats: Callable[[], dict[str, Any]],
    ) -> Submissions:
        """Yield every submission; the last one (``partial: False``) carries ``stats()``
        (called after the last table) plus the dirty/ambiguity counters. ``workbook`` holds
        the WORKBOOK node's properties (XLSX) or is ``None``."""
        if workbook is not None:
            self._workbook = self.root_id or self._id("workbook")
            self._p.node(["WORKBOOK"], workbook, [], self._workbook)
        for ordinal, table in enumerate(tables):
            yield from self._table(ordinal, table)
        final = {
            **stats(),
            "dirty_counts": dict(sorted(self.dirty.items())),
            "ambiguous_dates": self.ambiguous_dates,
            "ambiguities": self.emitted,
            "ambiguities_suppressed": self.suppressed,
        }
        if self.nul_chars:
            final["nul_chars"] = self.nul_chars
        yield self._p.build(final=True, stats=final)

    def _table(self, ordinal: int, table: Table) -> Submissions:
        p = self._p
        if p.end > 0:
            p.text("\n\n")
        start, end = p.text("\t".join(table.columns))
        span = p.span(start, end, "heading")
        props = {"name": table.name, "columns": table.columns, "rows": table.rows}
        root = ordinal == 0 and self._workbook is None and self.root_id
        self._table_id = root or self._id(f"table:{ordinal}")
        table_ref = p.node(["TABLE"], props, [span], self._table_id)
        if self._workbook is not None:
            p.edge(self._workbook, table_ref, ordinal)
        votes = table.votes
        row = 0
        for batch in table.batches(self.rows_per_partial):
            offset = 0
            while offset < batch.height:
                take = min(self.rows_per_partial - self._p.rows, batch.height - offset)
                self._rows(table, batch.slice(offset, take), row, votes)
                offset += take
                row += take
                if self._p.rows >= self.rows_per_partial:
                    yield from self._flush()

    def _rows(
        self, table: Table, frame: pl.DataFrame, first_row: int, votes: list[DateVotes]
    ) -> None:
        p = self._p
        cols = frame.columns
        if cols:
            nul = frame.select(pl.sum_horizontal(nul_count_expr(pl.col(c)) for c in cols).sum())
            self.nul_chars += int(nul.item() or 0)
        norm = frame.select(normalize_expr(pl.col(c)) for c in cols)
        lines_s = norm.select(
            pl.concat_str([display_expr(pl.col(c)) for c in cols], separator="\t")
        ).to_series()
        lengths = lines_s.str.len_bytes().to_list()
        typed = type_columns(norm, table.types, votes)
        for i, kind in enumerate(table.types):
            if typed[i].dirty:
                self.dirty[kind] = self.dirty.get(kind, 0) + typed[i].dirty
        p.text("\n" + "\n".join(lines_s.to_list()))
        pos = p.end - sum(lengths) - len(lengths) + 1
        spans, nodes, rels = p.spans, p.nodes, p.rels
        table_id = self._table_id
        labels = [self.label]
        names = table.columns
        first_span, first_node = len(spans), len(nodes)
        for k, values in enumerate(zip(*(t.values for t in typed), strict=True)):
            end = pos + lengths[k]
            spans.append({"start": pos, "end": end, "kind": "cell"})
            props = dict(zip(names, values, strict=True))
            props["row"] = first_row + k + 1
            nodes.append({"labels": labels, "properties": props, "spanRefs": [first_span + k]})
            rels.append(
                {
                    "type": "CONTAINS",
                    "fromId": table_id,
                    "toRef": first_node + k,
                    "properties": {"ord": first_row + k},
                }
            )
            pos = end + 1
        p.rows += frame.height
        self._ambiguities([t.ambiguous for t in typed], first_span, first_node)

    def _ambiguities(
        self, per_column: list[list[Ambiguous]], first_span: int, first_node: int
    ) -> None:
        by_row: dict[int, list[Ambiguous]] = {}
        for cells in per_column:
            for cell in cells:
                by_row.setdefault(cell.row, []).append(cell)
        for k in sorted(by_row):
            cells = by_row[k]
            self.ambiguous_dates += len(cells)
            if not self.clarify:
                continue
            self.suppressed += len(cells) - 1
            self.emitted += 1
            cell, span = cells[0], first_span + k
            self._p.ambiguities.append(
                {
                    "nodeRef": first_node + k,
                    "kind": "day_first_month_first",
                    "candidates": [
                        _candidate(cell.month_first, "month-first", span),
                        _candidate(cell.day_first, "day-first", span),
                    ],
                    "detectorConfidence": DETECTOR_CONFIDENCE,
                    "appliedCandidateConfidence": APPLIED_CANDIDATE_CONFIDENCE,
                }
            )


def _candidate(iso: str, reading: str, span: int) -> dict[str, Any]:
    return {
        "label": f"{iso} ({reading})",
        "validFrom": to_us(dt.date.fromisoformat(iso)),
        "spanRef": span,
    }
