"""``POST /v1/ingest`` request body: decoding and validation (docs/rest-api.md).

Pure; no I/O. Field errors are ``INVALID_REQUEST``; content errors (both or neither of
``content``/``contentBase64``, bad base64) are ``INVALID_CONTENT``.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from dataclasses import dataclass
from typing import Any

import msgspec

from telha.domain.errors import ContentError, RequestError

__all__ = ["FETCH_FORMATS", "KNOWN_FORMATS", "IngestRequest", "parse_ingest_request"]

#: Every format name the service knows (docs/formats.md).
KNOWN_FORMATS = (
    "json", "text", "markdown", "pdf", "docx", "pptx", "html",
    "csv", "tsv", "xlsx", "web", "code", "eml", "msg",
    "png", "jpeg", "tiff", "bmp", "webp",
)  # fmt: skip


#: Formats whose worker fetches the content itself: the request carries only the name (URL).
FETCH_FORMATS = frozenset({"web"})


class _Body(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    format: str
    name: str
    content: str | None = None
    content_base64: str | None = None
    options: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class IngestRequest:
    """A validated ingest request; ``raw`` is the content bytes (``None`` only for ``web``)."""

    format: str
    name: str
    raw: bytes | None
    options: dict[str, Any]


def parse_ingest_request(body: bytes) -> IngestRequest:
    """Decode and validate a ``POST /v1/ingest`` body.

    ``content`` counts as its UTF-8 bytes; ``contentBase64`` as its decoded bytes; a ``null``
    value counts as absent.

    :raises RequestError: not a JSON object, missing/unknown/mistyped field, empty name,
        unknown format.
    :raises ContentError: both or neither content field (except ``web``), invalid base64.
    """
    try:
        req = msgspec.json.decode(body, type=_Body)
    except msgspec.ValidationError as exc:
        raise RequestError(f"invalid request body: {exc}") from None
    except msgspec.DecodeError as exc:
        raise RequestError(f"request body is not valid JSON: {exc}") from None
    if not req.name:
        raise RequestError("name must not be empty")
    if req.format not in KNOWN_FORMATS:
        raise RequestError(
            f"unknown format {req.format!r}; known formats: {', '.join(KNOWN_FORMATS)}"
        )
    has_text, has_b64 = req.content is not None, req.content_base64 is not None
    if has_text and has_b64:
        raise ContentError("send exactly one of content and contentBase64, not both")
    raw: bytes | None
    if req.content is not None:
        try:
            raw = req.content.encode("utf-8")
        except UnicodeEncodeError:
            raise ContentError("content holds a lone surrogate and cannot be UTF-8") from None
    elif req.content_base64 is not None:
        try:
            raw = b64decode(req.content_base64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ContentError(f"contentBase64 is not valid base64: {exc}") from None
    elif req.format in FETCH_FORMATS:
        raw = None
    else:
        raise ContentError("send exactly one of content and contentBase64")
    return IngestRequest(req.format, req.name, raw, req.options or {})
