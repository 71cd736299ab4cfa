"""``email_worker``: RFC 822 messages (``eml``) and Outlook messages (``msg``, through
extract-msg, turned into the same message structure first; docs/formats.md). Reading is in
:mod:`email_worker.parse`; this module is the projection.

Parsed with the standard library (``email.policy.default``: RFC 2047/2231 headers, any charset,
raw 8-bit and UTF-8 headers, nested multiparts, ``message/rfc822`` parts and digests).

**Projection.** A ``MESSAGE`` node (deterministic id: uuid5 of the normalized Message-ID, or,
without one, the id the parent job gave this job's root (an attached message), else uuid5 of
the source name — never of the content, so a new version of the same message keeps its id)
with ``subject``,
``subject_normalized`` (``Re:``/``Fwd:``/``AW:``/``SV:``… prefixes and ``[list]`` tags stripped,
whitespace folded), ``sent_at`` (µs, from the Date header; absent when it is missing or
unparsable) and ``message_id``. A ``PERSON`` per address (id: uuid5 of the lower-cased address,
so one node across messages; ``address``, ``name``), with ``FROM``/``TO``/``CC``/``BCC`` edges
message → person. ``IN_REPLY_TO`` and ``REFERENCES`` edges point at the parent messages'
deterministic ids, dangling until those arrive.

**Attachments** (and attached or digested messages). One of a format Telha ingests
(pdf/docx/pptx/xlsx/csv/tsv/html/eml/msg/text/markdown, by extension, then media type) becomes
a child job named ``<message's source name>/<file name>`` (:mod:`email_worker.names`: a
second file of the same name gets ``name (2).ext``; a file attached twice is one child) — its
own source, whose version links this message's (docs/rest-api.md) — and a
``HAS_ATTACHMENT`` edge from the message to that source's root node:
the child's projection root gets :func:`workers_common.ids.child_root_id` of the child's name
(an attached message: its own ``MESSAGE`` id, computed here the way its own job computes it).
The edge dangles until the child's version is applied. Any other attachment is an
``ATTACHMENT`` node (id: uuid5 of the bytes' BLAKE3; ``size``, ``media_type``, ``blake3``),
not ingested. Every ``HAS_ATTACHMENT`` edge carries this message's ``name``, ``size``,
``media_type``, ``blake3`` and ``format`` (``null``: not ingested) of the attachment.

**Canonical text.** The header block — ``From``, ``To``, ``Cc``, ``Date``, ``Subject`` lines that
are present, each a span of kind ``heading`` — a blank line, then the body: the first
text/plain part (else the first text/html part as text, via BeautifulSoup), each paragraph a
span of kind ``paragraph``. The MESSAGE node holds every span; a PERSON holds the header
lines that name it.

**Ambiguity** (``options.clarify``, docs/formats.md): a body date more than a day away
from the Date header → ``conflicting_dates`` (the header's date first); no usable Date header →
``undated``.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any

import blake3

from email_worker.names import attachment_names
from email_worker.parse import (
    addresses,
    attachments,
    body_text,
    clean,
    cut_short,
    decode_notes,
    format_of,
    header,
    message_ids,
    normalize_subject,
    read_message,
    sent_at,
    unreadable_attachments,
)
from workers_common import (
    CorruptInput,
    IngestionResultBuilder,
    Job,
    UnsupportedFeature,
)
from workers_common.empty import is_empty
from workers_common.format_options import option_names
from workers_common.ids import child_root_id
from workers_common.projection import installed
from workers_common.temporal import find_dates, to_us
from workers_common.warnings import Warnings

__all__ = [
    "FORMATS",
    "PROJECTION_VERSION",
    "handle",
    "message_node_id",
    "normalize_subject",
    "parser_versions",
    "source_message_id",
]

FORMATS = ("eml", "msg")
#: How this worker reads bytes (:mod:`workers_common.projection`): raise it whenever the same
#: bytes and options would project differently.
PROJECTION_VERSION = 2


def parser_versions() -> dict[str, str]:
    """The installed versions of the parsers that shape this worker's output:
    the standard library's e-mail parser and chardet (legacy body encodings)."""
    return installed("chardet")


#: A plain, CPU-bound handler: in-process pools run it in a worker process (see
#: workers_common.handlers).
PROCESS_POOL = True
NAMESPACE = uuid.UUID("0b6a3d6e-7f0a-5c8e-9a57-656d61696c21")
_OPTIONS = frozenset(option_names("eml"))  # workers_common.format_options
_ROLES = ("From", "To", "Cc", "Bcc")


def _id(kind: str, key: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{kind}:{key}"))


@dataclass(frozen=True, slots=True)
class _Headers:
    """What the header block and the message's identity come from."""

    subject: str
    sent: dt.datetime | None
    roles: dict[str, list[tuple[str, str]]]
    ids: list[str]

    def lines(self) -> list[tuple[str, str]]:
        """``(header name, canonical line)`` of the header block, in order."""
        out = []
        for key in ("From", "To", "Cc"):
            if self.roles[key]:
                shown = ", ".join(f"{n} <{a}>" if n else a for a, n in self.roles[key])
                out.append((key, f"{key}: {shown}"))
        if self.sent is not None:
            out.append(("Date", f"Date: {self.sent.isoformat()}"))
        if self.subject:
            out.append(("Subject", f"Subject: {self.subject}"))
        return out

    def message_id(self, fallback: str) -> str:
        """The MESSAGE node id: uuid5 of the first Message-ID, else ``fallback`` (see
        :func:`message_node_id`)."""
        return _id("message", self.ids[0]) if self.ids else fallback


def _headers(msg: EmailMessage) -> _Headers:
    return _Headers(
        subject=" ".join(header(msg, "Subject").split()),
        sent=sent_at(msg),
        roles={k: addresses(msg, k) for k in _ROLES},
        ids=message_ids(header(msg, "Message-ID")),
    )


def source_message_id(name: str) -> str:
    """The MESSAGE node id of a message without a Message-ID ingested as source ``name``
    with no id from a parent: uuid5 of the name, so its versions keep one id."""
    return _id("message", f"source:{name}")


def message_node_id(raw: bytes, fmt: str, root: str | None = None) -> str:
    """The MESSAGE node id the ``eml``/``msg`` job of ``raw`` will give its message: from
    its Message-ID, else ``root`` (the ``root_node_id`` a parent gives the job; without it,
    :func:`source_message_id` of the empty name).

    :raises CorruptInput: an unreadable ``.msg``.
    """
    return _headers(read_message(raw, fmt)).message_id(root or source_message_id(""))


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def _header_block(
    b: IngestionResultBuilder, h: _Headers
) -> tuple[list[tuple[str, int]], dict[str, list[int]]]:
    """Write the header lines; returns ``(name, span)`` per line and each address's spans."""
    lines: list[tuple[str, int]] = []
    person_spans: dict[str, list[int]] = {}
    for key, line in h.lines():
        lines.append((key, b.add_span_text(line, "heading")))
        b.add_text("\n")
        for address, _ in h.roles.get(key, ()):
            person_spans.setdefault(address.lower(), []).append(lines[-1][1])
    return lines, person_spans


def _people(
    b: IngestionResultBuilder,
    message: int,
    roles: dict[str, list[tuple[str, str]]],
    person_spans: dict[str, list[int]],
) -> int:
    """PERSON nodes (one per address) and FROM/TO/CC/BCC edges; returns the people count."""
    people: dict[str, int] = {}
    for role, found in roles.items():
        for address, name in found:
            lower = address.lower()
            if lower not in people:
                people[lower] = b.add_node(
                    ["PERSON"], {"address": lower, "name": name or None},
                    spans=person_spans.get(lower, []), id=_id("person", lower),
                )  # fmt: skip
            b.add_relationship(role.upper(), from_ref=message, to_ref=people[lower])
    return len(people)


def _attachment_root(fmt: str, child: str, data: bytes) -> str:
    """The id of the root node of attachment job ``child``: an attached message's MESSAGE id
    (its own job keeps it: threading needs it), else the id core gives the child's root."""
    if fmt in ("eml", "msg"):
        try:
            return message_node_id(data, fmt, child_root_id(child))
        except CorruptInput:
            pass  # its own job ends corrupt_input: no root will ever have this id
    return child_root_id(child)


def _attachment_nodes(
    b: IngestionResultBuilder, message: int, msg: EmailMessage, parent: str
) -> int:
    """Child jobs or ATTACHMENT nodes and HAS_ATTACHMENT edges; returns the child job count.
    Children are named by :func:`email_worker.names.attachment_names` under ``parent`` (the
    message's source name); a file attached twice is one child."""
    found = [(name, ctype, data, blake3.blake3(data).hexdigest(), format_of(name, ctype))
             for name, ctype, data in attachments(msg)]  # fmt: skip
    ingested = [(name, digest) for name, _, _, digest, fmt in found if fmt is not None]
    names = iter(attachment_names(parent, ingested))
    children: set[str] = set()
    nodes: dict[str, int] = {}  # one ATTACHMENT node per distinct bytes, however many parts
    for name, ctype, data, digest, fmt in found:
        props = {"name": name, "size": len(data), "media_type": ctype, "blake3": digest,
                 "format": fmt}  # fmt: skip
        if fmt is None:
            node = nodes.get(digest, -1)
            if node < 0:
                node_props = {k: props[k] for k in ("size", "media_type", "blake3")}
                node = b.add_node(["ATTACHMENT"], node_props, id=_id("attachment", digest))
                nodes[digest] = node
            b.add_relationship("HAS_ATTACHMENT", from_ref=message, to_ref=node, properties=props)
            continue
        child = next(names)
        if child not in children:
            b.add_child_job(fmt, child, content=data, root_node_id=child_root_id(child))
            children.add(child)
        root = _attachment_root(fmt, child, data)
        b.add_relationship("HAS_ATTACHMENT", from_ref=message, to_id=root, properties=props)
    return len(children)


def handle(job: Job) -> dict[str, Any]:
    """Project one ``.eml``/``.msg`` job (module docstring).

    :raises UnsupportedFeature: an unknown option.
    :raises CorruptInput: an unreadable ``.msg``.
    """
    unknown = sorted(set(job.options) - _OPTIONS)
    if unknown:
        raise UnsupportedFeature(f"option: unknown option(s) {', '.join(unknown)}")
    empty = is_empty(job)  # workers_common.empty: a MESSAGE alone
    msg = read_message(b"" if empty else job.content, job.format)
    h = _headers(msg)
    b = IngestionResultBuilder()
    lines, person_spans = _header_block(b, h)
    paragraph_spans: list[tuple[str, int]] = []
    body = body_text(msg)
    b.count_nul(body.count("\x00"))  # dropped by clean(): stats.nul_chars
    for i, para in enumerate(_paragraphs(clean(body))):
        b.add_text("\n" if i == 0 else "\n\n")
        paragraph_spans.append((para, b.add_span_text(para, "paragraph")))
    props: dict[str, Any] = {
        "subject": h.subject,
        "subject_normalized": normalize_subject(h.subject),
        "message_id": h.ids[0] if h.ids else None,
    }
    if h.sent is not None:
        props["sent_at"] = int(h.sent.timestamp()) * 1_000_000 + h.sent.microsecond
    spans = [s for _, s in lines] + [s for _, s in paragraph_spans]
    fallback = job.root_node_id or source_message_id(job.name)
    message = b.add_node(["MESSAGE"], props, spans=spans, id=h.message_id(fallback))
    people = _people(b, message, h.roles, person_spans)
    for parent in message_ids(header(msg, "In-Reply-To"))[:1]:
        b.add_relationship("IN_REPLY_TO", from_ref=message, to_id=_id("message", parent))
    for ref in message_ids(header(msg, "References")):
        b.add_relationship("REFERENCES", from_ref=message, to_id=_id("message", ref))
    stats: dict[str, Any] = {
        "paragraphs": len(paragraph_spans),
        "people": people,
        "child_jobs": _attachment_nodes(b, message, msg, job.name),
        "ambiguities": 0,
        "ambiguities_suppressed": 0,
    }
    found = Warnings()
    notes = decode_notes(msg)
    found.add("encoding_fallback", len(notes), notes[0] if notes else None)
    found.add("truncated", cut_short(msg), "the closing MIME boundary never came")
    found.add("attachment_unreadable", unreadable_attachments(msg), "content not decodable")
    found.put(stats)
    if empty:
        stats["empty"] = True
    amb = (
        _ambiguity(h.sent, paragraph_spans, [s for k, s in lines if k == "Date"])
        if job.options.get("clarify")
        else None
    )
    if amb is not None:
        b.add_ambiguity(message, **amb)
        stats["ambiguities"] = 1
    b.set_stats(stats)
    return b.build()


def _ambiguity(
    sent: dt.datetime | None, paragraphs: list[tuple[str, int]], date_span: list[int]
) -> dict[str, Any] | None:
    if sent is None:
        return {
            "kind": "undated",
            "candidates": [{"label": "No usable Date header"}],
            "detector_confidence": 0.9,
            "applied_candidate_confidence": 0.0,
        }
    header_day = sent.astimezone(dt.UTC).date()
    for text, span in paragraphs:
        for mention in find_dates(text):
            if abs((mention.date - header_day).days) > 1:
                header: dict[str, Any] = {
                    "label": f"{header_day.isoformat()} (Date header)",
                    "validFrom": to_us(header_day),
                }
                if date_span:
                    header["spanRef"] = date_span[0]
                return {
                    "kind": "conflicting_dates",
                    "candidates": [
                        header,
                        {"label": f"{mention.date.isoformat()} (in body)",
                         "validFrom": mention.us, "spanRef": span},
                    ],
                    "detector_confidence": 0.7,
                    "applied_candidate_confidence": 0.55,
                }  # fmt: skip
    return None
