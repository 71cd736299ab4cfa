"""Reading messages: RFC 822 bytes (``email.policy.default``) and Outlook ``.msg`` files
(extract-msg) into one :class:`email.message.EmailMessage`, and the header, body and
attachment helpers the projection uses. Strings come back as valid Unicode, NFC/LF."""

from __future__ import annotations

import codecs
import datetime as dt
import email
import email.policy
import email.utils
import re
from email.message import EmailMessage
from typing import Any

from workers_common import CorruptInput, normalize_canonical

__all__ = [
    "addresses", "attachments", "body_text", "clean", "format_of", "header", "message_ids",
    "normalize_subject", "read_message", "sent_at",
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


def clean(text: str) -> str:
    """Valid Unicode: raw 8-bit bytes the parser kept as surrogate escapes are read as UTF-8
    (invalid sequences replaced), then NFC/LF."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return normalize_canonical(text)


def normalize_subject(subject: str) -> str:
    """``subject`` without reply/forward prefixes and ``[list]`` tags, whitespace folded."""
    return " ".join(_PREFIX.sub("", subject).split())


def message_ids(value: str) -> list[str]:
    """Normalized ids (``<…>`` stripped, lower-cased) in a Message-ID-like header."""
    found = [m.lower() for m in _MSGID.findall(value)]
    return found or ([value.strip().lower()] if value.strip() else [])


def header(msg: EmailMessage, name: str) -> str:
    """A header's text as the policy decodes it; its raw text when the policy cannot."""
    try:
        value = msg[name]
    except Exception:
        value = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), None)
    return clean(str(value)) if value is not None else ""


def addresses(msg: EmailMessage, name: str) -> list[tuple[str, str]]:
    """``(address, display name)`` of an address header, in order."""
    try:
        value = msg[name]
    except Exception:
        return []
    out = []
    for addr in getattr(value, "addresses", ()):
        spec = clean(addr.addr_spec or "")
        if "@" in spec:
            out.append((spec, clean(addr.display_name or "")))
    return out


def sent_at(msg: EmailMessage) -> dt.datetime | None:
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


def body_text(msg: EmailMessage) -> str:
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


def format_of(name: str, ctype: str) -> str | None:
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return _BY_EXTENSION.get(ext) or _BY_TYPE.get(ctype)
