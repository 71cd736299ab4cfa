"""The Ingestor (spec 004 "The Ingestor and its three entry paths"): request-level dedup and
the synchronous JSON bypass. Worker formats join in the job-queue issue.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal, cast

import anyio
import structlog

from telha.canonical import is_label, upper_snake
from telha.config import IngestConfig
from telha.errors import RequestError
from telha.ids import content_hash, source_id_for
from telha.ingest.json_projection import JsonOptions, project_json
from telha.ingest.request import IngestRequest
from telha.model import Dedup, NewVersion, Scope
from telha.storage.protocol import Storage

__all__ = ["IngestResult", "Ingestor"]

log = structlog.get_logger("telha.ingest")

#: ``SourceVersion.worker`` of versions written by the JSON bypass (DESIGN.md §11).
JSON_BYPASS_WORKER = "core:json-bypass"
_JSON_OPTIONS = frozenset({"label", "nested"})


@dataclass(frozen=True, slots=True)
class IngestResult:
    """Outcome of one ingest: deduplicated (nothing written) or applied (201 body fields)."""

    deduplicated: bool
    source_id: uuid.UUID
    source_version_tx: int | None = None
    node_ids: tuple[bytes, ...] = ()
    edge_ids: tuple[bytes, ...] = ()


class Ingestor:
    """Single entry point of ``POST /v1/ingest``.

    :param store: the storage engine.
    :param config: the ``[ingest]`` section (limits and the default nesting policy).
    """

    def __init__(self, store: Storage, config: IngestConfig) -> None:
        self._store = store
        self._config = config

    def json_options(self, name: str, options: dict[str, Any]) -> JsonOptions:
        """Resolve ``options`` of a ``format=json`` request (spec 001 "format=json options").

        :raises RequestError: unknown option, non-string or non-UPPER_SNAKE label, a name with
            nothing to derive a label from, a nesting policy other than flatten/child.
        """
        unknown = sorted(set(options) - _JSON_OPTIONS)
        if unknown:
            raise RequestError(
                f"unknown option(s) for format=json: {', '.join(unknown)};"
                f" accepted: {', '.join(sorted(_JSON_OPTIONS))}"
            )
        label = options.get("label")
        if label is None:
            label = upper_snake(name)
            if not label:
                raise RequestError(f"cannot derive a label from name {name!r}; set options.label")
        elif not isinstance(label, str) or not is_label(label):
            raise RequestError("options.label must be an UPPER_SNAKE string such as RISK")
        nested = options.get("nested", self._config.json_nested)
        if nested not in ("flatten", "child"):
            raise RequestError('options.nested must be "flatten" or "child"')
        return JsonOptions(
            label=label,
            nested=cast(Literal["flatten", "child"], nested),
            max_records=self._config.json_max_records,
            max_depth=self._config.json_max_depth,
        )

    async def ingest(self, scope: Scope, req: IngestRequest) -> IngestResult:
        """Ingest one validated request.

        :raises RequestError: a format other than ``json`` (worker formats are not served yet)
            or bad options.
        :raises ContentError: content the projection rejects; nothing is written.
        """
        if req.format != "json":
            raise RequestError(
                f"format {req.format!r} needs a format worker, which this build does not run"
                " yet; supported formats: json"
            )
        assert req.raw is not None
        opts = self.json_options(req.name, req.options)
        source_id = source_id_for(req.name)
        digest = content_hash(req.raw)
        latest = await self._store.latest_version(scope, source_id.bytes)
        if latest is not None and latest.content_hash == digest:
            return IngestResult(True, source_id)
        t0 = time.perf_counter()
        projection = await anyio.to_thread.run_sync(project_json, req.raw, opts)
        t1 = time.perf_counter()
        version = NewVersion(
            source_id=source_id.bytes,
            name=req.name,
            format=req.format,
            content_hash=digest,
            size=len(req.raw),
            worker=JSON_BYPASS_WORKER,
        )
        outcome = await self._store.commit_version(scope, version, projection, dedup=Dedup.CONTENT)
        t2 = time.perf_counter()
        if outcome.deduplicated:
            return IngestResult(True, source_id)
        log.info(
            "ingested",
            source_id=str(source_id),
            tx=outcome.source_version_tx,
            format=req.format,
            bytes=len(req.raw),
            nodes=len(outcome.node_ids),
            edges=len(outcome.edge_ids),
            project_ms=round((t1 - t0) * 1000, 1),
            commit_ms=round((t2 - t1) * 1000, 1),
        )
        return IngestResult(
            False,
            source_id,
            outcome.source_version_tx,
            tuple(outcome.node_ids),
            tuple(outcome.edge_ids),
        )
