"""Reading messages: RFC 822 bytes (``email.policy.default``) and Outlook ``.msg`` files
(extract-msg) into one :class:`email.message.EmailMessage`, and the header, body and
attachment helpers the projection uses. Strings come back as valid Unicode, NFC/LF.

**Legacy 8-bit bytes** (docs/formats.md, "Email"): raw 8-bit header bytes (which the parser
keeps as surrogate escapes) are decoded as strict UTF-8, else the message's declared charset
(the first ``charset`` parameter of its Content-Type or a part's), else — for text of
:data:`GUESS_MIN_BYTES` or more — an encoding guessed with confidence
(:mod:`workers_common.encoding_guess`), else cp1252, else Latin-1 — never U+FFFD when one of
them decodes the bytes; a body without a charset label, whose label Python does not know
(``uft-8``) or whose bytes do not fit its label is decoded the same way (UTF-8, the label if
known, a guess, cp1252, Latin-1). Each such fallback is recorded in :func:`decode_notes`
(``stats.warnings``, kind ``encoding_fallback``). A multipart whose closing boundary never
came is read up to the cut (:func:`cut_short`: a ``truncated`` warning)."""

from __future__ import annotations

import codecs
import datetime as dt
import email
import email.errors
import email.policy
import email.utils
import re
from email.message import EmailMessage
from typing import Any

from workers_common import CorruptInput, normalize_canonical
from workers_common.encoding_guess import guess_encoding

__all__ = [
    "addresses", "attachments", "body_text", "clean", "cut_short", "declared_charset",
    "decode_bytes",
    "decode_notes", "format_of", "header", "message_ids", "normalize_subject", "read_message",
    "sent_at", "unreadable_attachments",
]  # fmt: skip

_CFB = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
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


def read_message(raw: bytes, fmt: str) -> EmailMessage:
    """The message in ``raw``: an Outlook ``.msg`` (a CFB container) through
    :func:`read_msg`; RFC 822 text otherwise (also a ``.msg`` that is really RFC 822 text).

    :raises CorruptInput: an unreadable ``.msg``.
    """
    if fmt == "msg" and raw.startswith(_CFB):
        return read_msg(raw)
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


#: Windows code page numbers whose Python codec is not ``cp<N>``.
_CODE_PAGES = {
    20127: "ascii", 28591: "latin-1", 28592: "iso-8859-2", 28595: "iso-8859-5",
    28597: "iso-8859-7", 28605: "iso-8859-15", 50220: "iso-2022-jp", 51932: "euc-jp",
    51949: "euc-kr", 52936: "hz", 54936: "gb18030", 65001: "utf-8", 20866: "koi8-r",
}  # fmt: skip
#: PR_MESSAGE_CODEPAGE, then PR_INTERNET_CPID: the code page of a non-Unicode message.
_CODE_PAGE_PROPS = ("3FFD0003", "3FDE0003")


def _code_page(source: Any) -> str | None:
    """The codec of an ANSI (non-Unicode) message's strings from its code-page properties,
    ``None`` when it has none Python knows (extract-msg's default then stands)."""
    for prop in _CODE_PAGE_PROPS:
        found = source.props.get(prop)
        number = getattr(found, "value", None)
        if isinstance(number, int) and number > 0:
            name = _CODE_PAGES.get(number, f"cp{number}")
            try:
                return codecs.lookup(name).name
            except LookupError:
                continue
    return None


def _open_msg(raw: bytes) -> Any:
    """extract-msg's message object; an ANSI message is reopened with its own code page
    (extract-msg reads only PR_MESSAGE_CODEPAGE, and defaults to ISO-8859-15: a Big5
    message's subject came out as mojibake).

    :raises CorruptInput: not a readable ``.msg``.
    """
    import extract_msg

    try:
        # openMsg is typed as the base MSGFile; a message file is a Message (subject, …).
        source: Any = extract_msg.openMsg(raw)
        if not source.areStringsUnicode:
            codec = _code_page(source)
            if codec is not None and codec != codecs.lookup(source.stringEncoding).name:
                source.close()
                source = extract_msg.openMsg(raw, overrideEncoding=codec)
    except Exception as exc:
        raise CorruptInput(f"not a readable .msg: {type(exc).__name__}: {exc}") from None
    return source


def read_msg(raw: bytes) -> EmailMessage:
    """An Outlook ``.msg`` (extract-msg: Unicode messages, and code-page messages decoded with
    the message's code page) as an :class:`EmailMessage` with the same headers, the plain body
    (else the HTML one) and the attachments; an embedded ``.msg`` stays a ``.msg`` attachment.

    :raises CorruptInput: not a readable ``.msg``.
    """
    source = _open_msg(raw)
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


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


#: Bytes from which an undeclared legacy text's encoding is guessed (shorter ones, a header's
#: few words, carry too little signal: cp1252 reads them).
GUESS_MIN_BYTES = 200


def _guessed(raw: bytes) -> str | None:
    """The encoding :func:`~workers_common.encoding_guess.guess_encoding` is sure enough of
    (at least ``LOW_CONFIDENCE``) for ``raw`` of :data:`GUESS_MIN_BYTES` or more."""
    if len(raw) < GUESS_MIN_BYTES:
        return None
    guess = guess_encoding(raw)
    return guess.encoding if guess is not None and not guess.doubtful else None


def decode_bytes(raw: bytes, declared: str | None) -> tuple[str, str]:
    """``(text, codec)``: ``raw`` decoded strictly as UTF-8, else ``declared`` (when Python
    knows that label), else a confident guess (:func:`_guessed`), else cp1252, else Latin-1
    (which decodes any bytes)."""
    tried = ["utf-8", _codec(declared)]
    if not raw.isascii() and _codec(declared) is None:
        tried.append(_guessed(raw))
    tried.append("cp1252")
    for codec in dict.fromkeys(c for c in tried if c):
        try:
            return raw.decode(codec), codec
        except (UnicodeDecodeError, LookupError):
            continue
    return raw.decode("latin-1"), "latin-1"


def declared_charset(msg: EmailMessage) -> str | None:
    """The message's declared charset: the first ``charset`` of its parts, in order."""
    for part in msg.walk():
        try:
            label = part.get_content_charset()
        except Exception:  # a malformed Content-Type: no declared charset there
            continue
        if label:
            return str(label)
    return None


def clean(text: str, declared: str | None = None) -> str:
    """Valid Unicode: raw 8-bit bytes the parser kept as surrogate escapes are decoded by
    :func:`decode_bytes` (UTF-8, ``declared``, cp1252, Latin-1), then NFC/LF."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = decode_bytes(text.encode("utf-8", "surrogateescape"), declared)[0]
    return normalize_canonical(text)


def decode_notes(msg: EmailMessage) -> list[str]:
    """Notes for ``stats.warnings`` (kind ``encoding_fallback``): which codec read raw 8-bit
    header bytes and a body whose charset label is unknown or wrong (module docstring)."""
    notes: list[str] = []
    declared = declared_charset(msg)
    for name, value in msg.raw_items():
        raw = str(value).encode("utf-8", "surrogateescape")
        if raw.isascii():
            continue
        codec = decode_bytes(raw, declared)[1]
        if codec != "utf-8":
            notes.append(f"header {name}: raw 8-bit bytes decoded as {codec}")
    body = _body_part(msg)
    if body is not None:
        note = _text_of(body)[1]
        if note:
            notes.append(note)
    return notes


def cut_short(msg: EmailMessage) -> int:
    """Multipart parts whose closing boundary never came (``CloseBoundaryNotFoundDefect``):
    the message was cut short; what came before the cut is read."""
    return sum(
        1
        for part in msg.walk()
        for defect in getattr(part, "defects", ())
        if isinstance(defect, email.errors.CloseBoundaryNotFoundDefect)
    )


def normalize_subject(subject: str) -> str:
    """``subject`` without reply/forward prefixes and ``[list]`` tags, whitespace folded."""
    return " ".join(_PREFIX.sub("", subject).split())


def message_ids(value: str) -> list[str]:
    """Normalized ids (``<…>`` stripped, lower-cased) in a Message-ID-like header."""
    found = [m.lower() for m in _MSGID.findall(value)]
    return found or ([value.strip().lower()] if value.strip() else [])


def header(msg: EmailMessage, name: str) -> str:
    """A header's text as the policy decodes it; its raw text when the policy cannot. Raw
    8-bit bytes are decoded first (module docstring): the policy would make them U+FFFD."""
    raw = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), None)
    declared = declared_charset(msg)
    if raw is not None and not str(raw).isascii():
        text = clean(str(raw), declared)
        try:
            return clean(str(email.policy.default.header_factory(name, text)), declared)
        except Exception:  # a header the registry cannot parse: its decoded raw text
            return text
    try:
        value = msg[name]
    except Exception:
        value = raw
    return clean(str(value), declared) if value is not None else ""


def addresses(msg: EmailMessage, name: str) -> list[tuple[str, str]]:
    """``(address, display name)`` of an address header, in order."""
    try:
        value = msg[name]
    except Exception:
        return []
    out = []
    declared = declared_charset(msg)
    for addr in getattr(value, "addresses", ()):
        spec = clean(addr.addr_spec or "", declared)
        if "@" in spec:
            out.append((spec, clean(addr.display_name or "", declared)))
    return out


def sent_at(msg: EmailMessage) -> dt.datetime | None:
    try:
        when = getattr(msg["Date"], "datetime", None)
    except Exception:
        return None
    if not isinstance(when, dt.datetime):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _text_of(part: EmailMessage) -> tuple[str, str | None]:
    """A text part's text and, when its label was unknown or wrong, a note saying which
    codec read it (:func:`decode_bytes`)."""
    label = part.get_content_charset()
    if _codec(label) is not None:
        try:
            content = part.get_content()
            if isinstance(content, str):
                return content, None
        except (LookupError, UnicodeError, AssertionError, ValueError):
            pass
    payload = part.get_payload(decode=True)
    raw = payload if isinstance(payload, bytes) else b""
    text, codec = decode_bytes(raw, label)
    if label and codec == _codec(label):
        return text, None
    if label:
        return text, f"body charset {label!r}: decoded as {codec}"
    return text, None if codec == "utf-8" or raw.isascii() else f"body without charset: {codec}"


def _body_part(msg: EmailMessage) -> EmailMessage | None:
    """The part :func:`body_text` reads: the first text/plain part, else the first
    text/html part."""
    plain = html = None
    for part in msg.walk():
        if part.is_multipart() or part.get_content_disposition() == "attachment":
            continue
        ctype = part.get_content_type()
        if ctype == "text/plain" and plain is None:
            plain = part
        elif ctype == "text/html" and html is None:
            html = part
    return plain if plain is not None else html


def body_text(msg: EmailMessage) -> str:
    """The first text/plain part, else the first text/html part as text."""
    part = _body_part(msg)
    if part is None:
        return ""
    text = _text_of(part)[0]
    if part.get_content_type() == "text/html":
        from bs4 import BeautifulSoup

        return BeautifulSoup(text, "html.parser").get_text("\n")
    return text


def _message_bytes(part: Any) -> bytes:
    """The bytes of the message a ``message/rfc822`` part carries."""
    inner: Any = part.get_payload()
    if isinstance(inner, list) and inner:
        inner = inner[0]
    return bytes(inner.as_bytes()) if isinstance(inner, email.message.Message) else b""


def attachments(msg: EmailMessage) -> list[tuple[str, str, bytes]]:
    """``(file name, media type, bytes)`` of every attachment and attached message."""
    out = []
    for part in msg.iter_attachments():
        ctype = part.get_content_type()
        name = clean(part.get_filename() or "")
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


def unreadable_attachments(msg: EmailMessage) -> int:
    """Attachment parts whose content could not be taken out: a transfer encoding that
    failed to decode (``InvalidBase64CharactersDefect``, ``InvalidBase64LengthDefect``,
    ``MultipartInvariantViolationDefect``) or an attached message with no message in it."""
    bad = (
        email.errors.InvalidBase64CharactersDefect,
        email.errors.InvalidBase64LengthDefect,
    )
    count = 0
    for part in msg.iter_attachments():
        data = part.get_payload(decode=True) if not part.is_multipart() else None
        broken = any(isinstance(d, bad) for d in getattr(part, "defects", ()))
        if part.get_content_type() == "message/rfc822":
            broken = broken or not _message_bytes(part)
        elif not part.is_multipart() and not isinstance(data, bytes):
            broken = True
        count += broken
    return count


def format_of(name: str, ctype: str) -> str | None:
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return _BY_EXTENSION.get(ext) or _BY_TYPE.get(ctype)
