"""How the routes render what storage returns, where more than one route shows the same
thing: a listed source, a job (``GET /v1/ingest/{jobId}`` and a cancel's answer), nodes with
their provenance text (the node reads and the diff)."""

from __future__ import annotations

from collections import defaultdict

from telha.domain.errors import ContentErased, NotFound, RequestError
from telha.domain.ids import id_str
from telha.domain.listings import SourceSummary
from telha.domain.model import JobRecord, NodeVersion, Scope
from telha.domain.units import OffsetConverter, Units
from telha.job_json import job_status as job_status_out
from telha.job_json import pending_hint
from telha.rest.state import AppState
from telha.storage.protocol import ReadStore
from telha.wire import Interval, JobStatus, NodeOut, Provenance, ProvenanceSpanOut, SourceSummaryOut

__all__ = ["job_out", "node_out", "source_summary_out"]


def source_summary_out(s: SourceSummary) -> SourceSummaryOut:
    """A listed source as the wire shows it."""
    return SourceSummaryOut(
        source_id=id_str(s.source_id),
        name=s.name,
        format=s.format,
        latest_version_tx=s.latest_tx,
        version_count=s.version_count,
        state=s.state,  # type: ignore[arg-type]  # one of SOURCE_STATES (the table's CHECK)
        last_job_id=id_str(s.last_job_id) if s.last_job_id else None,
        last_job_state=s.last_job_state,
        changed_at=s.changed_at,
    )


async def job_out(st: AppState, scope: Scope, job: JobRecord) -> JobStatus:
    """The body of ``GET /v1/ingest/{jobId}`` (also what a cancel answers): the job with its
    parent, its children counted by state and, for a pending job no worker of this process
    polls for, a ``hint`` (:func:`telha.job_json.job_status`).

    :raises NotFound: the job is not in ``scope``.
    """
    family = await st.store.listings.job_family(scope, job.job_id)
    if family is None:
        raise NotFound("no such job")
    return job_status_out(job, family, pending_hint(job, st.queue.polled_formats()))


def _slice(window: tuple[int, bytes], start: int, end: int) -> str:
    base, data = window
    return data[start - base : end - base].decode("utf-8", "replace")


async def node_out(
    reads: ReadStore, scope: Scope, nodes: list[NodeVersion], units: Units = "byte"
) -> list[NodeOut]:
    """Nodes as the wire shows them, each provenance span's text resolved (one read per
    distinct version; an erased or missing version's text is empty) and its offsets in
    ``units`` (an erased or missing version's stay in bytes)."""
    wanted: dict[tuple[bytes, int], list[tuple[int, int]]] = defaultdict(list)
    for n in nodes:
        for s in n.provenance:
            wanted[(s.source_id, s.source_version_tx)].append((s.start, s.end))
    texts: dict[tuple[bytes, int], tuple[int, bytes]] = {}
    convs: dict[tuple[bytes, int], OffsetConverter] = {}
    for key, ranges in wanted.items():
        lo, hi = min(a for a, _ in ranges), max(b for _, b in ranges)
        try:
            if units == "byte":
                texts[key] = (lo, await reads.text(scope, key[0], key[1], lo, hi))
            else:
                window = await reads.text_window(scope, key[0], key[1], lo, hi)
                texts[key] = (window.base, window.data)
                convs[key] = OffsetConverter(window.data, window.base, window.before)
        except (NotFound, RequestError, ContentErased):
            texts[key] = (lo, b"")
    out = []
    for n in nodes:
        spans = []
        for s in n.provenance:
            key = (s.source_id, s.source_version_tx)
            start, end = s.start, s.end
            if key in convs:
                start, end = convs[key].to_units([start, end], units)
            spans.append(
                ProvenanceSpanOut(
                    source_id=id_str(s.source_id),
                    source_version_tx=s.source_version_tx,
                    start=start,
                    end=end,
                    text=_slice(texts[key], s.start, s.end),
                )
            )
        out.append(
            NodeOut(
                node_id=id_str(n.node_id),
                labels=n.labels,
                properties=n.properties,
                valid_time=Interval(from_=n.valid_from, to=n.valid_to),
                tx_time=Interval(from_=n.tx_from, to=n.tx_to),
                provenance=Provenance(spans=spans),
            )
        )
    return out
