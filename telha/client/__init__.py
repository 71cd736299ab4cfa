"""The async Python client of Telha's REST API (docs/cli-and-client.md): :class:`AsyncTelha`.

Example::

    async with AsyncTelha("http://127.0.0.1:7625", api_key) as telha:
        job = await telha.ingest("markdown", "notes.md", content="# Notes\\n\\nHello.")
        done = await telha.wait(job.job_id, timeout=60)
        async for node in telha.nodes(source_id=done.source_id):
            print(node.labels, node.provenance.spans[0].text)
"""

from telha.client.client import MULTIPART_OVER_BYTES, TERMINAL_STATES, AsyncTelha, IngestResult
from telha.client.errors import (
    Conflict,
    ConnectionFailed,
    ContentErased,
    InternalError,
    InvalidContent,
    InvalidRequest,
    JobFinished,
    NotFound,
    PayloadTooLarge,
    TelhaError,
    Unauthenticated,
    Unavailable,
)
from telha.wire import (
    ChangesOut,
    ChunkList,
    ChunkOut,
    Deduplicated,
    DiffOut,
    EdgeOut,
    IngestApplied,
    IngestEnqueued,
    JobEventOut,
    JobList,
    JobStatus,
    JobSummaryOut,
    LocatedOut,
    NodeChangeOut,
    NodeOut,
    RetiredOut,
    RetireOut,
    SearchHitOut,
    SearchResult,
    SourceList,
    SourceOut,
    SourceSummaryOut,
    SpanOut,
    VersionOut,
)

__all__ = [
    "MULTIPART_OVER_BYTES",
    "TERMINAL_STATES",
    "AsyncTelha",
    "ChangesOut",
    "ChunkList",
    "ChunkOut",
    "Conflict",
    "ConnectionFailed",
    "ContentErased",
    "Deduplicated",
    "DiffOut",
    "EdgeOut",
    "IngestApplied",
    "IngestEnqueued",
    "IngestResult",
    "InternalError",
    "InvalidContent",
    "InvalidRequest",
    "JobEventOut",
    "JobFinished",
    "JobList",
    "JobStatus",
    "JobSummaryOut",
    "LocatedOut",
    "NodeChangeOut",
    "NodeOut",
    "NotFound",
    "PayloadTooLarge",
    "RetireOut",
    "RetiredOut",
    "SearchHitOut",
    "SearchResult",
    "SourceList",
    "SourceOut",
    "SourceSummaryOut",
    "SpanOut",
    "TelhaError",
    "Unauthenticated",
    "Unavailable",
    "VersionOut",
]
