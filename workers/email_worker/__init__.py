"""``email_worker``: RFC 822 messages (``eml``) and Outlook messages (``msg``, through
extract-msg, turned into the same message structure first; issue 6, first increment).

Parsed with the standard library (``email.policy.default``: RFC 2047/2231 headers, any charset,
raw 8-bit and UTF-8 headers, nested multiparts, ``message/rfc822`` parts and digests).

**Projection.** A ``MESSAGE`` node (deterministic id: uuid5 of the normalized Message-ID, or,
without one, of the BLAKE3 of the canonical header block) with ``subject``,
``subject_normalized`` (``Re:``/``Fwd:``/``AW:``/``SV:``… prefixes and ``[list]`` tags stripped,
whitespace folded), ``sent_at`` (µs, from the Date header; absent when it is missing or
unparsable) and ``message_id``. A ``PERSON`` per address (id: uuid5 of the lower-cased address,
so one node across messages; ``address``, ``name``), with ``FROM``/``TO``/``CC``/``BCC`` edges
message → person. ``IN_REPLY_TO`` and ``REFERENCES`` edges point at the parent messages'
deterministic ids, dangling until those arrive. Attachments (and attached or digested
messages) become ``ATTACHMENT`` nodes (id: uuid5 of the bytes' BLAKE3: one node for identical
bytes in any number of messages; ``name``, ``size``, ``media_type``, ``blake3``, ``format``)
with ``HAS_ATTACHMENT`` edges; those of a format Telha ingests are also child jobs named
``attachment:<blake3 hex>`` (one source for identical bytes).

**Canonical text.** The header block — ``From``, ``To``, ``Cc``, ``Date``, ``Subject`` lines that
are present, each a span of kind ``heading`` — a blank line, then the body: the first
text/plain part (else the first text/html part as text, via BeautifulSoup), each paragraph a
span of kind ``paragraph``. The MESSAGE node holds every span; a PERSON holds the header
lines that name it.

**Ambiguity** (``options.clarify``, spec 003 §15 conventions): a body date more than a day away
from the Date header → ``conflicting_dates`` (the header's date first); no usable Date header →
``undated``.
"""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import email.utils
import re
import uuid
from email.message import EmailMessage
from typing import Any

import blake3

from workers_common import (
    CorruptInput,
    IngestionResultBuilder,
    Job,
    UnsupportedFeature,
    normalize_canonical,
)
from workers_common.temporal import find_dates, to_us

__all__ = ["FORMATS", "handle", "normalize_subject"]

FORMATS = ("eml", "msg")
_CFB = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
NAMESPACE = uuid.UUID("0b6a3d6e-7f0a-5c8e-9a57-656d61696c21")
_OPTIONS = frozenset({"clarify"})
_PREFIX = re.compile(
    r"^\s*(?:(?:re|fwd?|aw|sv|wg|antw|vs|tr)\s*(?:\[\d+\])?\s*:\s*|\[[^\]]*\]\s*)+", re.I
)
_MSGID = re.compile(r"<([^<>\s]+)>")
#: Attachment types Telha ingests: by file extension, then by media type.
_BY_EXTENSION = {
    "pdf": "pdf", "docx": "docx", "pptx": "pptx", "xlsx": "xlsx", "csv": "csv", "tsv": "tsv",
    "html": "html", "htm": "html", "eml": "eml", "msg": "msg", "txt": "text", "md": "markdown",
}  # fmt: skip
_BY_TYPE = {
    "application/pdf": "pdf", "message/rfc822": "eml", "text/csv": "csv", "text/html": "html",
    "text/plain": "text", "text/markdown": "markdown",
}  # fmt: skip


def _from_msg(raw: bytes) -> EmailMessage:
    """An Outlook ``.msg`` (extract-msg: Unicode and code-page messages decoded with the
    message's code page) as an :class:`EmailMessage` with the same headers, the plain body
    (else the HTML one) and the attachments; an embedded ``.msg`` stays a ``.msg`` attachment.

    :raises CorruptInput: not a readable ``.msg``.
    """
    import extract_msg

    try:
        # openMsg is typed as the base MSGFile; a message file is a Message (subject, …).
        source: Any = extract_msg.openMsg(raw)
    except Exception as exc:
        raise CorruptInput(f"not a readable .msg: {type(exc).__name__}: {exc}") from None
    try:
        msg = EmailMessage(policy=email.policy.default)
        header = source.header
        for name in ("From", "To", "Cc", "Bcc", "Subject", "Message-ID", "In-Reply-To",
                     "References"):  # fmt: skip
            value = header.get(name) if header is not None else None
            fallback = {
                "From": source.sender,
                "To": source.to,
                "Cc": source.cc,
                "Subject": source.subject,
                "Message-ID": source.messageId,
            }.get(name)
            value = value or fallback
            if value:
                try:
                    msg[name] = " ".join(str(value).replace("\x00", "").split())
                except (ValueError, TypeError):
                    continue
        if isinstance(source.date, dt.datetime):
            msg["Date"] = email.utils.format_datetime(source.date)
        body = source.body
        if body:
            msg.set_content(str(body))
        elif source.htmlBody:
            html = source.htmlBody
            msg.set_content(html.decode("utf-8", "replace") if isinstance(html, bytes) else html,
                            subtype="html")  # fmt: skip
        for att in source.attachments:
            data = att.data
            if hasattr(data, "exportBytes"):  # an embedded message
                name, blob = "message.msg", data.exportBytes()
            else:
                name, blob = att.longFilename or att.shortFilename or "attachment", data
            if isinstance(blob, bytes):
                msg.add_attachment(blob, maintype="application", subtype="octet-stream",
                                   filename=name)  # fmt: skip
        return msg
    finally:
        source.close()


def _clean(text: str) -> str:
    """Valid Unicode: raw 8-bit bytes the parser kept as surrogate escapes are read as UTF-8
    (invalid sequences replaced), then NFC/LF."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return normalize_canonical(text)


def _id(kind: str, key: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{kind}:{key}"))


def normalize_subject(subject: str) -> str:
    """``subject`` without reply/forward prefixes and ``[list]`` tags, whitespace folded."""
    return " ".join(_PREFIX.sub("", subject).split())


def _message_ids(value: str) -> list[str]:
    """Normalized ids (``<…>`` stripped, lower-cased) in a Message-ID-like header."""
    found = [m.lower() for m in _MSGID.findall(value)]
    return found or ([value.strip().lower()] if value.strip() else [])


def _header(msg: EmailMessage, name: str) -> str:
    """A header's text as the policy decodes it; its raw text when the policy cannot."""
    try:
        value = msg[name]
    except Exception:
        value = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), None)
    return _clean(str(value)) if value is not None else ""


def _addresses(msg: EmailMessage, name: str) -> list[tuple[str, str]]:
    """``(address, display name)`` of an address header, in order."""
    try:
        value = msg[name]
    except Exception:
        return []
    out = []
    for addr in getattr(value, "addresses", ()):
        spec = _clean(addr.addr_spec or "")
        if "@" in spec:
            out.append((spec, _clean(addr.display_name or "")))
    return out


def _sent_at(msg: EmailMessage) -> dt.datetime | None:
    try:
        when = getattr(msg["Date"], "datetime", None)
    except Exception:
        return None
    if not isinstance(when, dt.datetime):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _text_of(part: EmailMessage) -> str:
    try:
        content = part.get_content()
    except (LookupError, UnicodeError, AssertionError):
        payload = part.get_payload(decode=True)
        raw = payload if isinstance(payload, bytes) else b""
        content = raw.decode(part.get_content_charset() or "utf-8", "replace")
    return content if isinstance(content, str) else ""


def _body(msg: EmailMessage) -> str:
    """The first text/plain part, else the first text/html part as text."""
    plain = html = None
    for part in msg.walk():
        if part.is_multipart() or part.get_content_disposition() == "attachment":
            continue
        ctype = part.get_content_type()
        if ctype == "text/plain" and plain is None:
            plain = _text_of(part)
        elif ctype == "text/html" and html is None:
            html = _text_of(part)
    if plain is not None:
        return plain
    if html is not None:
        from bs4 import BeautifulSoup

        return BeautifulSoup(html, "html.parser").get_text("\n")
    return ""


def _message_bytes(part: Any) -> bytes:
    """The bytes of the message a ``message/rfc822`` part carries."""
    inner: Any = part.get_payload()
    if isinstance(inner, list) and inner:
        inner = inner[0]
    return bytes(inner.as_bytes()) if isinstance(inner, email.message.Message) else b""


def _attachments(msg: EmailMessage) -> list[tuple[str, str, bytes]]:
    """``(file name, media type, bytes)`` of every attachment and attached message."""
    out = []
    for part in msg.iter_attachments():
        ctype = part.get_content_type()
        name = _clean(part.get_filename() or "")
        if ctype == "message/rfc822":
            out.append((name or "message.eml", ctype, _message_bytes(part)))
        elif part.is_multipart():
            for inner in part.iter_parts():  # a digest: each part an implicit message
                if inner.get_content_type() == "message/rfc822":
                    out.append(("message.eml", "message/rfc822", _message_bytes(inner)))
        else:
            data = part.get_payload(decode=True)
            out.append((name or "attachment", ctype, data if isinstance(data, bytes) else b""))
    return out


def _format_of(name: str, ctype: str) -> str | None:
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return _BY_EXTENSION.get(ext) or _BY_TYPE.get(ctype)


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def _header_block(
    b: IngestionResultBuilder,
    roles: dict[str, list[tuple[str, str]]],
    sent: dt.datetime | None,
    subject: str,
) -> tuple[list[tuple[str, int]], dict[str, list[int]]]:
    """Write the header lines; returns ``(name, span)`` per line and each address's spans."""
    lines: list[tuple[str, int]] = []
    person_spans: dict[str, list[int]] = {}
    for key in ("From", "To", "Cc"):
        if roles[key]:
            shown = ", ".join(f"{n} <{a}>" if n else a for a, n in roles[key])
            lines.append((key, b.add_span_text(f"{key}: {shown}", "heading")))
            b.add_text("\n")
            for address, _ in roles[key]:
                person_spans.setdefault(address.lower(), []).append(lines[-1][1])
    if sent is not None:
        lines.append(("Date", b.add_span_text(f"Date: {sent.isoformat()}", "heading")))
        b.add_text("\n")
    if subject:
        lines.append(("Subject", b.add_span_text(f"Subject: {subject}", "heading")))
        b.add_text("\n")
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


def _attachment_nodes(b: IngestionResultBuilder, message: int, msg: EmailMessage) -> int:
    """ATTACHMENT nodes, HAS_ATTACHMENT edges, child jobs; returns the child job count."""
    children = 0
    for name, ctype, data in _attachments(msg):
        digest = blake3.blake3(data).hexdigest()
        fmt = _format_of(name, ctype)
        props = {"name": name, "size": len(data), "media_type": ctype, "blake3": digest,
                 "format": fmt}  # fmt: skip
        node = b.add_node(["ATTACHMENT"], props, id=_id("attachment", digest))
        b.add_relationship("HAS_ATTACHMENT", from_ref=message, to_ref=node)
        if fmt is not None:
            b.add_child_job(fmt, f"attachment:{digest}", content=data)
            children += 1
    return children


def handle(job: Job) -> dict[str, Any]:
    """Project one ``.eml`` job (module docstring).

    :raises UnsupportedFeature: an unknown option.
    """
    unknown = sorted(set(job.options) - _OPTIONS)
    if unknown:
        raise UnsupportedFeature(f"option: unknown option(s) {', '.join(unknown)}")
    raw = job.content
    if job.format == "msg" and raw.startswith(_CFB):
        msg = _from_msg(raw)
    else:  # .eml, or a .msg that is really RFC 822 text
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        msg = parsed
    subject = " ".join(_header(msg, "Subject").split())
    sent = _sent_at(msg)
    roles = {k: _addresses(msg, k) for k in ("From", "To", "Cc", "Bcc")}
    b = IngestionResultBuilder()
    lines, person_spans = _header_block(b, roles, sent, subject)
    header_text = b.build()["canonicalText"]
    paragraph_spans: list[tuple[str, int]] = []
    for i, para in enumerate(_paragraphs(_clean(_body(msg)))):
        b.add_text("\n" if i == 0 else "\n\n")
        paragraph_spans.append((para, b.add_span_text(para, "paragraph")))
    ids = _message_ids(_header(msg, "Message-ID"))
    key = ids[0] if ids else blake3.blake3(header_text.encode()).hexdigest()
    props: dict[str, Any] = {
        "subject": subject,
        "subject_normalized": normalize_subject(subject),
        "message_id": ids[0] if ids else None,
    }
    if sent is not None:
        props["sent_at"] = int(sent.timestamp()) * 1_000_000 + sent.microsecond
    spans = [s for _, s in lines] + [s for _, s in paragraph_spans]
    message = b.add_node(["MESSAGE"], props, spans=spans, id=_id("message", key))
    people = _people(b, message, roles, person_spans)
    for parent in _message_ids(_header(msg, "In-Reply-To"))[:1]:
        b.add_relationship("IN_REPLY_TO", from_ref=message, to_id=_id("message", parent))
    for ref in _message_ids(_header(msg, "References")):
        b.add_relationship("REFERENCES", from_ref=message, to_id=_id("message", ref))
    stats: dict[str, Any] = {
        "paragraphs": len(paragraph_spans),
        "people": people,
        "child_jobs": _attachment_nodes(b, message, msg),
        "ambiguities": 0,
        "ambiguities_suppressed": 0,
    }
    amb = (
        _ambiguity(sent, paragraph_spans, [s for k, s in lines if k == "Date"])
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
