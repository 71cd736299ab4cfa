"""The ``IngestJobPayload`` of an ``ingest:{format}`` job (docs/worker-protocol.md) and the
jobs built from requests and from a submission's ``childJobs``: the payload a worker
receives, written once for the Ingestor and re-projection."""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Any

import msgspec

from telha.domain.ids import content_hash, new_id, source_id_for
from telha.domain.model import NewJob
from telha.domain.projection import Projection
from telha.domain.submission import ChildJobIn, InvalidSubmission
from telha.ingest.request import FETCH_FORMATS, KNOWN_FORMATS

__all__ = [
    "IngestJobPayload",
    "child_job",
    "child_jobs",
    "content_ref",
    "decode_payload",
    "new_job",
    "with_root_id",
]


class IngestJobPayload(msgspec.Struct, kw_only=True):
    """``IngestJobPayload`` (docs/worker-protocol.md): the job's opaque payload, JSON,
    ``content_hash`` hex.

    Small content travels inline as ``content_b64``. A multipart upload is stored in core
    (content-addressed raw chunks) and referenced instead: ``content_ref`` is its BLAKE3 hex
    (equal to ``content_hash``), ``content_b64`` is empty, and workers read the bytes with
    ``FetchContent``. ``size`` is the raw byte count either way.
    """

    v: int = 1
    source_id: str
    format: str
    name: str
    content_b64: str = ""
    content_hash: str | None
    content_ref: str | None = None
    size: int = 0
    options: dict[str, Any]
    #: For a child job whose parent links to it: the id its projection root gets when the
    #: worker supplies none (:class:`telha.domain.submission.ChildJobIn`).
    root_node_id: str | None = None


def child_job(child: ChildJobIn) -> NewJob:
    if child.format not in KNOWN_FORMATS or child.format == "json":
        raise InvalidSubmission(f"childJobs: format {child.format!r} is not a worker format")
    if not child.name:
        raise InvalidSubmission("childJobs: name must not be empty")
    raw = b""
    if child.content_b64 is not None:
        try:
            raw = base64.b64decode(child.content_b64, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidSubmission(f"childJobs: {child.name}: contentB64 is not base64") from None
    elif child.format not in FETCH_FORMATS:
        raise InvalidSubmission(f"childJobs: {child.name}: contentB64 is required")
    digest = content_hash(raw) if child.format not in FETCH_FORMATS else None
    root = None
    if child.root_node_id is not None:
        try:
            root = str(uuid.UUID(child.root_node_id))
        except ValueError:
            raise InvalidSubmission(f"childJobs: {child.name}: rootNodeId is not a UUID") from None
    return new_job(child.format, child.name, raw, digest, child.options, root_node_id=root)


def with_root_id(projection: Projection, root_id: str) -> Projection:
    """``projection`` whose first node (the projection root) gets ``root_id`` when the worker
    gave it no id and no other node of the submission has that id; else it stays as sent.
    Its properties are re-encoded with sorted keys, as for every deterministic id (the upsert
    ladder compares them)."""
    nodes = projection.nodes
    root = uuid.UUID(root_id).bytes
    if not nodes or nodes[0].node_id is not None or any(n.node_id == root for n in nodes):
        return projection
    props = msgspec.json.encode(msgspec.json.decode(nodes[0].properties_json), order="sorted")
    nodes[0] = nodes[0]._replace(node_id=root, properties_json=props)
    return projection


def child_jobs(children: list[ChildJobIn]) -> tuple[NewJob, ...]:
    return tuple(child_job(c) for c in children)


def decode_payload(raw: bytes) -> IngestJobPayload:
    return msgspec.json.decode(raw, type=IngestJobPayload)


class _Ref(msgspec.Struct):
    content_ref: str | None = None


def content_ref(payload: bytes) -> bytes | None:
    """The BLAKE3 digest of the stored raw bytes a job payload references, or ``None`` when
    its content is inline. Decodes only that field (a payload can hold megabytes of base64)."""
    ref = msgspec.json.decode(payload, type=_Ref).content_ref
    return bytes.fromhex(ref) if ref else None


def new_job(
    fmt: str,
    name: str,
    raw: bytes,
    digest: bytes | None,
    options: dict[str, Any],
    *,
    stored: bool = False,
    size: int | None = None,
    root_node_id: str | None = None,
    source_id: uuid.UUID | None = None,
) -> NewJob:
    """An ``ingest:{fmt}`` job whose payload is an ``IngestJobPayload``: the raw bytes
    base64-encoded, or with ``stored`` a reference to the raw bytes stored under ``digest``
    (``size`` bytes); ``content_hash`` hex, ``None`` for fetch formats. ``source_id``: a
    connector item's (docs/connectors.md), else the name's."""
    source_id = source_id or source_id_for(name)
    hex_digest = digest.hex() if digest is not None else None
    payload = IngestJobPayload(
        source_id=str(source_id),
        format=fmt,
        name=name,
        content_b64="" if stored else base64.b64encode(raw).decode(),
        content_hash=hex_digest,
        content_ref=hex_digest if stored else None,
        size=len(raw) if size is None else size,
        options=options,
        root_node_id=root_node_id,
    )
    return NewJob(
        new_id(),
        f"ingest:{fmt}",
        fmt,
        source_id.bytes,
        digest,
        msgspec.json.encode(payload),
        name=name,
    )
