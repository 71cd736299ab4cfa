"""Engine-neutral pieces of GDPR erasure (docs/operations.md, "Erasure"): the erase job's
payload, its steps and their recorded counts, the closure of what one erasure covers, and the
plan for the nodes an erased version wrote. Pure; no I/O. :mod:`telha.storage.erasure.steps`
runs the steps, each in one transaction, for both engines.

An erasure is a job of kind :data:`ERASE_KIND` (format :data:`ERASE_FORMAT`, which no format
worker can poll). Its steps run in order; each records an ``erase_step`` event with its
counts in the same transaction, so a step is never applied twice and an erasure cut short
(a crash) resumes at the first step without an event:

1. ``mark`` — the versions erased (the source's, or one of them, plus every version of the
   scope sharing one of their digests: same bytes, same personal data) get ``erased_at``,
   ``erasure_id`` and the reason; their ``content_hash``/``canonical_text_hash`` enter the
   scope's blocklist; pending or leased jobs of the source (or of those digests) end ``dead``
   with ``erased``.
2. ``jobs`` — raw uploaded bytes of those digests are deleted; job payloads lose their
   ``content_b64``.
3. ``text`` — canonical text chunks become redaction records (length and BLAKE3, no bytes).
4. ``nodes`` — see :func:`plan_nodes`; edges written by an erased version are scrubbed and
   closed.
5. ``spans`` — the erased versions' span rows are deleted.
6. ``finish`` — the audit row gets its result, the job completes with it as ``stats``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import blake3
import msgspec

__all__ = [
    "BLOCKED_REASON",
    "EMPTY_DIGEST",
    "ERASED_MESSAGE",
    "ERASE_FORMAT",
    "ERASE_KIND",
    "LEFTOVER_CHECKS",
    "STEPS",
    "VERSION_KEYS",
    "Counts",
    "ErasePayload",
    "NodePlan",
    "NodeRow",
    "PreviewVersion",
    "Versions",
    "blockable",
    "decode_payload",
    "erased_reason",
    "node_ids",
    "parse_step",
    "payload_name",
    "plan_nodes",
    "preview_body",
    "result_body",
    "scrub_payload",
    "step_detail",
    "totals",
]

#: Kind and format of an erase job (never a format worker's).
ERASE_KIND = "erase"
ERASE_FORMAT = "erase"
#: The steps of an erasure, in order.
STEPS = ("mark", "jobs", "text", "nodes", "spans", "finish")
#: BLAKE3 of no bytes: never blocklisted (empty content carries no personal data, and
#: refusing it would refuse every empty document of the scope).
EMPTY_DIGEST = blake3.blake3(b"").digest()


#: Counts one step records, e.g. ``{"hidden": 3, "trimmed": 1}``.
Counts = dict[str, int]
#: Erased versions as the steps read them: ``(source_id, tx) -> (content_hash,
#: canonical_text_hash, job_id, blob_id)``, selected as :data:`VERSION_KEYS`.
Versions = dict[tuple[bytes, int], tuple[bytes, bytes | None, bytes | None, bytes | None]]
VERSION_KEYS = "source_id, tx, content_hash, canonical_text_hash, job_id, blob_id"


class PreviewVersion(NamedTuple):
    """A version an erasure would erase (``POST …/erase?dryRun=true``): its source and tx
    (µs), its source's name and the node versions it wrote."""

    source_id: bytes
    tx: int
    name: str
    nodes: int


def preview_body(
    source_id: bytes, version_tx: int | None, versions: Sequence[PreviewVersion]
) -> dict[str, Any]:
    """The answer of a dry run (docs/operations.md, "Erasure"): ``sources`` (each with its
    ``name``, ``versions`` ``[{sourceVersionTx, nodes}]`` and their ``nodes`` summed), the
    ``versions`` as the real answer lists them, and the ``nodes`` of all of them."""
    sources: dict[bytes, dict[str, Any]] = {}
    for v in versions:
        entry = sources.setdefault(
            v.source_id,
            {"sourceId": str(uuid.UUID(bytes=v.source_id)), "name": v.name, "versions": [],
             "nodes": 0},
        )  # fmt: skip
        entry["versions"].append({"sourceVersionTx": v.tx, "nodes": v.nodes})
        entry["nodes"] += v.nodes
    return {
        "dryRun": True,
        "sourceId": str(uuid.UUID(bytes=source_id)),
        "versionTx": version_tx,
        "sources": list(sources.values()),
        "versions": [
            {"sourceId": str(uuid.UUID(bytes=v.source_id)), "sourceVersionTx": v.tx}
            for v in sorted(versions, key=lambda v: v.tx)
        ],
        "nodes": sum(v.nodes for v in versions),
    }


def totals(done: dict[str, Counts]) -> Counts:
    """Every recorded step's counts in one mapping (the ``finish`` step's input)."""
    out: Counts = {}
    for counts in done.values():
        out.update(counts)
    return out


class ErasePayload(msgspec.Struct, kw_only=True):
    """The erase job's payload (JSON): what to erase, who asked and why. ``source_id`` is a
    UUID string; ``version_tx`` (µs) names one version, ``None`` every version."""

    v: int = 1
    source_id: str
    version_tx: int | None = None
    reason: str
    principal: str

    def source_bytes(self) -> bytes:
        """The source id as 16 bytes."""
        return uuid.UUID(self.source_id).bytes


def decode_payload(raw: bytes) -> ErasePayload:
    """An erase job's payload back as :class:`ErasePayload`."""
    return msgspec.json.decode(raw, type=ErasePayload)


def blockable(digests: Iterable[bytes | None]) -> set[bytes]:
    """The digests that enter a blocklist: present and not :data:`EMPTY_DIGEST`."""
    return {d for d in digests if d is not None and d != EMPTY_DIGEST}


def erased_reason(erasure_id: bytes) -> str:
    """``failure_reason`` of a job ended by an erasure or refused by the blocklist."""
    return f"erased: content erased (erasure {uuid.UUID(bytes=erasure_id)})"


#: The message of a request refused by the blocklist (410 CONTENT_ERASED).
ERASED_MESSAGE = "this content was erased from the scope (GDPR) and is refused for good"
#: ``failure_reason`` of a submission whose content is on the blocklist.
BLOCKED_REASON = "erased: the content is on the scope's erasure blocklist"


def step_detail(step: str, counts: dict[str, int]) -> str:
    """The ``erase_step`` event detail: ``"nodes hidden=3 trimmed=1"``."""
    return " ".join([step, *(f"{k}={v}" for k, v in sorted(counts.items()))])


def parse_step(detail: str | None) -> tuple[str, dict[str, int]]:
    """:func:`step_detail` back as ``(step, counts)``."""
    step, *pairs = (detail or "").split()
    return step, {k: int(v) for k, v in (p.split("=", 1) for p in pairs)}


class _Name(msgspec.Struct):
    name: str = ""


def payload_name(payload: bytes) -> str:
    """The ``name`` of an ingest job payload (decodes only that field)."""
    return msgspec.json.decode(payload, type=_Name).name


class _Raw(msgspec.Struct):
    content_b64: str = ""
    size: int = 0


def scrub_payload(payload: bytes) -> tuple[bytes, int] | None:
    """An ingest job payload without its inline content (``content_b64`` emptied, every other
    field kept) and the raw byte count it held; ``None`` when it holds none."""
    if b'"content_b64":""' in payload:
        return None
    fields = msgspec.json.decode(payload)
    if not isinstance(fields, dict) or not fields.get("content_b64"):
        return None
    held = msgspec.json.decode(payload, type=_Raw)
    fields["content_b64"] = ""
    return msgspec.json.encode(fields), held.size or len(held.content_b64) * 3 // 4


def node_ids(linked: bytes) -> list[bytes]:
    """The node ids of a span row's ``linked_nodes`` (concatenated 16-byte ids)."""
    return [linked[i : i + 16] for i in range(0, len(linked), 16)]


class NodeRow(NamedTuple):
    """One stored node version, as the nodes step reads it (labels JSON text, properties and
    provenance JSON bytes; ``erased`` as stored)."""

    node_id: bytes
    tx_from: int
    tx_to: int | None
    source_id: bytes | None
    labels: str
    properties: bytes
    provenance: bytes
    valid_from: int | None
    valid_to: int | None
    erased: bool


#: A span row of a surviving version linking a node: ``(source_id, tx, start, end)``.
Link = tuple[bytes, int, int, int]


@dataclass(slots=True)
class NodePlan:
    """What the nodes step writes: rows scrubbed in place (``(node_id, tx_from)``: properties
    ``{}``, provenance ``[]``, flagged erased), node ids whose current version is closed at
    the erasure's tx, new versions (rows in the ``nodes`` column order of
    :func:`telha.domain.rows.build_rows` plus ``erased``), their label rows, and counts."""

    scrub: list[tuple[bytes, int]] = field(default_factory=list)
    close: list[bytes] = field(default_factory=list)
    inserts: list[tuple[Any, ...]] = field(default_factory=list)
    labels: list[tuple[Any, ...]] = field(default_factory=list)
    hidden: int = 0
    trimmed: int = 0


def plan_nodes(
    scope_id: int,
    tx: int,
    erased: set[tuple[bytes, int]],
    rows: Sequence[NodeRow],
    links: dict[bytes, list[Link]],
    stale: frozenset[tuple[bytes, int]] = frozenset(),
) -> NodePlan:
    """The nodes step of an erasure, for the nodes it touches (docs/operations.md).

    :param tx: the erasure's transaction time (µs): closes and new versions are written at it.
    :param erased: ``(source_id, tx)`` of every version this erasure erases.
    :param rows: every stored version of every touched node (a node one of ``erased`` wrote,
        or one their span rows link).
    :param links: per node id, the span rows of surviving versions that link it.
    :param stale: ``(source_id, tx)`` of versions a later version of their source superseded
        (docs/architecture.md, "Versions and node identity"): history, not support — erasing
        a source's current version never brings its earlier version's content back.

    A node whose provenance lies only in erased versions (no version of it written by, and no
    span of, a surviving version) gets a closing version with properties ``{}`` and its labels,
    flagged erased: hidden from reads. A node with other provenance keeps it: if its current
    version came from an erased version, a new current version replaces it with the content
    a surviving version stands for (the erased one's when a later surviving version linked it
    unchanged, else the latest surviving version's) and that version's spans. Every version
    an erased version wrote is scrubbed in place.
    """
    plan = NodePlan()
    by_node: dict[bytes, list[NodeRow]] = {}
    for row in rows:
        by_node.setdefault(row.node_id, []).append(row)
    for node_id, versions in sorted(by_node.items()):
        versions.sort(key=lambda r: r.tx_from)
        mine = [r for r in versions if (r.source_id, r.tx_from) in erased]
        others = [
            r
            for r in versions
            if (r.source_id, r.tx_from) not in erased
            and (r.source_id, r.tx_from) not in stale
            and not r.erased
        ]
        linked = [link for link in links.get(node_id, []) if link[:2] not in stale]
        current = next((r for r in versions if r.tx_to is None), None)
        plan.scrub += [(node_id, r.tx_from) for r in mine if not r.erased]
        if not others and not linked:
            plan.hidden += 1
            if current is not None and not current.erased:
                plan.close.append(node_id)
                plan.inserts.append(
                    (scope_id, node_id, tx, current.labels, b"{}", b"[]", current.source_id,
                     None, None, True)
                )  # fmt: skip
            continue
        plan.trimmed += 1
        if current is None or current not in mine or current.erased:
            continue  # the current version is a survivor's: it keeps its provenance
        plan.close.append(node_id)
        later = [link for link in linked if link[1] > current.tx_from]
        if later or not others:
            base, support = current, max(later or linked, key=lambda link: link[1])
            source, stx = support[0], support[1]
            spans = [(a, b) for s, t, a, b in linked if (s, t) == (source, stx)]
        else:
            base = others[-1]
            source, stx = base.source_id or b"", base.tx_from
            spans = [(int(a), int(b)) for a, b, *_ in msgspec.json.decode(base.provenance)]
        prov = msgspec.json.encode([[a, b, stx] for a, b in sorted(spans)])
        plan.inserts.append(
            (scope_id, node_id, tx, base.labels, base.properties, prov, source,
             base.valid_from, base.valid_to, False)
        )  # fmt: skip
        plan.labels += [
            (scope_id, label, node_id, tx) for label in msgspec.json.decode(base.labels)
        ]
    return plan


def result_body(
    erasure_id: bytes,
    payload: ErasePayload,
    versions: Sequence[tuple[bytes, int]],
    counts: dict[str, int],
    erased_at: int,
    names: dict[bytes, str] | None = None,
) -> bytes:
    """The erasure's result (the 200 body of ``POST /v1/sources/{id}/erase``, the job's
    ``stats`` and the audit row's ``result``) as JSON bytes: ``versions`` as ``{sourceId,
    sourceVersionTx}``; ``nodes`` hidden, ``nodesTrimmed`` (kept, other provenance),
    ``spanRows``, ``edges``, ``jobs`` ended ``erased``, ``bytes`` erased (canonical text
    redacted + raw uploads deleted + inline job content deleted); ``sources`` the erased
    sources ``{sourceId, name}`` (``names``: source id → name), by source id."""
    names = names or {}
    body = {
        "erasureId": str(uuid.UUID(bytes=erasure_id)),
        "sourceId": payload.source_id,
        "versionTx": payload.version_tx,
        "reason": payload.reason,
        "erasedAt": erased_at,
        "versions": [
            {"sourceId": str(uuid.UUID(bytes=s)), "sourceVersionTx": t} for s, t in versions
        ],
        "sources": [
            {"sourceId": str(uuid.UUID(bytes=s)), "name": names.get(s, "")}
            for s in sorted({s for s, _ in versions})
        ],
        "nodes": counts.get("hidden", 0),
        "nodesTrimmed": counts.get("trimmed", 0),
        "spanRows": counts.get("span_rows", 0),
        "edges": counts.get("edges", 0),
        "jobs": counts.get("jobs", 0),
        "bytes": counts.get("text_bytes", 0)
        + counts.get("raw_bytes", 0)
        + counts.get("inline_bytes", 0),
    }
    return msgspec.json.encode(body)


#: What :meth:`telha.storage.erasure.role.ErasureStore.leftovers` counts, across every scope:
#: ``(name, description, SQL counting the rows)``; each should be 0. The SQL is portable
#: between the engines except the expression ``{b64}``: a job payload's ``content_b64``, read
#: only for the jobs it concerns (``CASE`` fixes the order: another job's payload that is
#: not JSON must not fail the check; docs/operations.md, "Bad rows").
LEFTOVER_CHECKS: tuple[tuple[str, str, str], ...] = (
    ("versions_not_erased", "versions holding a blocklisted digest not marked erased",
     "SELECT count(*) FROM source_versions v JOIN erasure_blocklist b ON b.scope_id = v.scope_id"
     " AND b.digest IN (v.content_hash, v.canonical_text_hash) WHERE v.erased_at IS NULL"),
    ("text_chunks", "canonical text chunks of erased versions",
     "SELECT count(*) FROM blob_chunks c WHERE EXISTS (SELECT 1 FROM source_versions v"
     " WHERE v.scope_id = c.scope_id AND v.blob_id = c.blob_id AND v.erased_at IS NOT NULL)"),
    ("raw_chunks", "raw upload chunks with a blocklisted digest",
     "SELECT count(*) FROM raw_chunks r JOIN erasure_blocklist b ON b.scope_id = r.scope_id"
     " AND b.digest = r.content_hash"),
    ("job_content", "job payloads still holding content that is blocklisted or erased",
     "SELECT count(*) FROM jobs j LEFT JOIN erasure_blocklist b ON b.scope_id = j.scope_id"
     " AND b.digest = j.content_hash WHERE (b.digest IS NOT NULL"
     " OR j.failure_reason LIKE 'erased:%') AND coalesce(CASE WHEN b.digest IS NOT NULL"
     " OR j.failure_reason LIKE 'erased:%' THEN {b64} END, '') <> ''"),
    ("span_rows", "span rows of erased versions",
     "SELECT count(*) FROM span_rows r JOIN source_versions v ON v.scope_id = r.scope_id"
     " AND v.source_id = r.source_id AND v.tx = r.source_version_tx"
     " WHERE v.erased_at IS NOT NULL"),
    ("search_spans", "full-text index rows of erased versions",
     "SELECT count(*) FROM search_spans s JOIN source_versions v ON v.scope_id = s.scope_id"
     " AND v.source_id = s.source_id AND v.tx = s.version_tx"
     " WHERE v.erased_at IS NOT NULL"),
    ("node_versions", "node versions written by erased versions and not scrubbed",
     "SELECT count(*) FROM nodes n JOIN source_versions v ON v.scope_id = n.scope_id"
     " AND v.source_id = n.source_id AND v.tx = n.tx_from"
     " WHERE v.erased_at IS NOT NULL AND NOT n.erased"),
    ("edges", "edges written by erased versions and not scrubbed",
     "SELECT count(*) FROM edges e JOIN source_versions v ON v.scope_id = e.scope_id"
     " AND v.tx = e.tx_from WHERE v.erased_at IS NOT NULL"
     " AND (e.tx_to IS NULL OR length(e.properties) > 2)"),
)  # fmt: skip
