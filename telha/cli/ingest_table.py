"""The closing table of ``telha ingest`` laid out (docs/cli-and-client.md, "The closing
table"): pure functions, no I/O.

- :func:`short_ids`: ids shortened the way ``git`` shortens hashes — the shortest prefix, at
  least :data:`MIN_ID_CHARS` characters, that tells each id apart from the others in the
  same column.
- :func:`terminal_table`: a :class:`rich.table.Table` that fits a terminal of a given width:
  ids (short unless ``wide``), state and nodes never wrap; names and failures fold.
- :func:`tsv_lines`: the piped form, full ids, a header line then one line a file.
- :func:`summary_line`: ``76 completed, 4 dead, 5 refused, 12 deduplicated in 17.2 s``.

A row's state cell is given as already-built text (``completed (2 warnings)``, say);
the summary counts the row's ``outcome`` (the bare final state) instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from rich import box
from rich.table import Column, Table

__all__ = [
    "COLUMNS",
    "MIN_ID_CHARS",
    "TableRow",
    "short_ids",
    "summary_line",
    "terminal_table",
    "tsv_lines",
    "wide_width",
]

#: The table's column headings, in order (also the TSV header line).
COLUMNS = ("file", "source id", "job id", "state", "nodes", "failure")
#: The fewest characters a shortened id keeps (``git log --oneline`` keeps 7 hex digits;
#: 8 is a UUID's first group).
MIN_ID_CHARS = 8
#: The order outcomes are counted in on the summary line; any other outcome follows these,
#: in the order first met.
OUTCOME_ORDER = (
    "completed", "dead", "cancelled", "refused", "failed", "deduplicated", "interrupted",
)  # fmt: skip


@dataclass(frozen=True)
class TableRow:
    """One file's row.

    :param file: the source name.
    :param source_id: the full source id (``""`` when none).
    :param job_id: the full job id (``""`` when none).
    :param state: the state cell as shown, already built by the caller.
    :param outcome: the bare state the summary counts (``completed``, ``dead``, …).
    :param nodes: the node count as text (``""`` when unknown).
    :param failure: why the file did not make it in (``""`` when it did).
    :param bad: drawn in red (the file did not make it in); a row whose ``state`` says more
        than its ``outcome`` is drawn in yellow.
    """

    file: str
    source_id: str
    job_id: str
    state: str
    outcome: str
    nodes: str = ""
    failure: str = ""
    bad: bool = False


def _shared(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _unique_prefix_len(ids: list[str], min_chars: int) -> int:
    """The fewest leading characters (at least ``min_chars``) that tell every id in
    ``ids`` apart; in sorted order an id shares most with a neighbour."""
    ordered = sorted(ids)
    shared = max((_shared(a, b) for a, b in pairwise(ordered)), default=0)
    return max(min_chars, shared + 1)


def short_ids(ids: Iterable[str], min_chars: int = MIN_ID_CHARS) -> dict[str, str]:
    """Each distinct non-empty id → its short form: the fewest characters, at least
    ``min_chars``, that still tell it apart from every other id given (as ``git`` shortens
    hashes), one length for all. Taken from the start (``1cc4acd4``) or, when the ends
    differ sooner — UUIDv7 job ids made within a millisecond share their first 20 or so
    characters — from the end after an ellipsis (``…ba67f8690ea6``); whichever is
    shorter. An id no longer than the short form stays whole."""
    distinct = sorted({i for i in ids if i})
    if not distinct:
        return {}
    head = _unique_prefix_len(distinct, min_chars)
    tail = _unique_prefix_len([i[::-1] for i in distinct], min_chars)
    out: dict[str, str] = {}
    for ident in distinct:
        if len(ident) <= min(head, tail + 1):
            out[ident] = ident
        elif head <= tail:
            out[ident] = ident[:head].rstrip("-")
        else:
            out[ident] = "…" + ident[-tail:].lstrip("-")
    return out


def _longest_word(texts: Iterable[str]) -> int:
    return max((len(w) for t in texts for w in t.split()), default=0)


def _widest(texts: Iterable[str], heading: str) -> int:
    return max([len(heading), *(len(t) for t in texts)])


#: Columns the table's frame takes at a width: 2 between each two cells, 1 at each edge.
_FRAME = 2 * (len(COLUMNS) - 1) + 2


def _split(rows: Sequence[TableRow], room: int) -> tuple[int, int]:
    """``(file, failure)`` widths sharing ``room`` columns: failures get what they need up
    to a third of it (at least 12; the heading's 7 when no file failed), names the rest,
    and what names do not need goes back to failures."""
    names = _widest((r.file for r in rows), COLUMNS[0])
    failures = _widest((r.failure for r in rows), COLUMNS[5])
    failure = min(failures, max(12, room // 3))
    file = max(8, min(names, room - failure))
    failure = max(len(COLUMNS[5]), min(failures, room - file))
    return file, failure


def _table(columns: int, widths: Sequence[int | None]) -> Table:
    """An empty table of the first ``columns`` of :data:`COLUMNS`, names and failures
    folding and states wrapping at ``widths`` (``None``: as wide as the cells)."""
    kinds = [
        {"overflow": "fold"}, {"no_wrap": True}, {"no_wrap": True}, {},
        {"no_wrap": True, "justify": "right"}, {"overflow": "fold"},
    ]  # fmt: skip
    return Table(
        *(
            Column(COLUMNS[i], width=widths[i], **kinds[i])  # type: ignore[arg-type]
            for i in range(columns)
        ),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        collapse_padding=True,  # 2 columns between cells: 80 is narrow
    )


def terminal_table(rows: Sequence[TableRow], *, wide: bool, width: int) -> Table:
    """The table for a terminal ``width`` columns wide: every row on one line when the
    cells fit, and no failure column when no file failed. Ids are shortened by
    :func:`short_ids` per column unless ``wide``; ids and node counts never wrap (an id is
    to be copied whole) and a state wraps between words only (its longest word, at most
    its whole text up to 16 columns, sets its width), while the columns left are shared
    by file names and failures (:func:`_split`), which fold onto further lines. With
    ``wide`` give it at least :func:`wide_width` columns so no id is cut."""
    sources = short_ids(r.source_id for r in rows)
    jobs = short_ids(r.job_id for r in rows)
    shown: list[tuple[str, ...]] = [
        (
            r.file,
            r.source_id if wide else sources.get(r.source_id, ""),
            r.job_id if wide else jobs.get(r.job_id, ""),
            r.state,
            r.nodes,
            r.failure,
        )
        for r in rows
    ]
    failed = any(r.failure for r in rows)
    if not failed:  # no failure to show: the column would only take room
        shown = [c[:5] for c in shown]
    natural = [_widest((c[i] for c in shown), COLUMNS[i]) for i in range(6 if failed else 5)]
    frame = 2 * (len(natural) - 1) + 2
    if sum(natural) + frame <= width:  # everything fits on one line a row
        table = _table(len(natural), [None] * len(natural))
    else:
        state = max(_longest_word(r.state for r in rows), min(16, natural[3]))
        state = max(state, len(COLUMNS[3]))
        fixed = natural[1] + natural[2] + state + natural[4]
        if failed:
            file, failure = _split(rows, width - fixed - frame)
            table = _table(6, [file, None, None, state, None, failure])
        else:
            file = max(8, min(natural[0], width - fixed - frame))
            table = _table(5, [file, None, None, state, None])
    for r, cells in zip(rows, shown, strict=True):
        # Red: the file did not make it in; yellow: it did, with something to read (a dead
        # attachment, warnings) in its state.
        table.add_row(*cells, style="red" if r.bad else "yellow" if r.state != r.outcome else None)
    return table


def wide_width(rows: Sequence[TableRow]) -> int:
    """The fewest columns the ``wide`` table needs to show every full id, state word and
    count on one line with 12 columns each for names and failures."""
    return (
        12
        + _widest((r.source_id for r in rows), COLUMNS[1])
        + _widest((r.job_id for r in rows), COLUMNS[2])
        + max(len(COLUMNS[3]), _longest_word(r.state for r in rows), 16)
        + _widest((r.nodes for r in rows), COLUMNS[4])
        + 12
        + _FRAME
    )


def tsv_lines(rows: Sequence[TableRow]) -> list[str]:
    """The piped table: the header line, then one line a file, full ids, tabs in cells
    turned to spaces."""
    cells = [COLUMNS] + [(r.file, r.source_id, r.job_id, r.state, r.nodes, r.failure) for r in rows]
    return ["\t".join(c.replace("\t", " ").replace("\n", " ") for c in row) for row in cells]


def summary_line(outcomes: Iterable[str], seconds: float) -> str:
    """``76 completed, 4 dead, 5 refused, 12 deduplicated in 17.2 s``: each outcome met,
    counted, in :data:`OUTCOME_ORDER` (others after, as first met), then the time taken
    in seconds to one decimal."""
    counts = Counter(outcomes)
    order = [o for o in OUTCOME_ORDER if counts[o]] + [o for o in counts if o not in OUTCOME_ORDER]
    said = ", ".join(f"{counts[o]} {o}" for o in order) or "nothing ingested"
    return f"{said} in {seconds:.1f} s"
