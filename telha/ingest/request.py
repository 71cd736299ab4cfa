"""``POST /v1/ingest`` request body: decoding and validation (docs/rest-api.md).

Pure; no I/O. Field errors are ``INVALID_REQUEST``; content errors (both or neither of
``content``/``contentBase64``, bad base64) are ``INVALID_CONTENT``.
"""

from __future__ import annotations

import binascii
import uuid
from base64 import b64decode
from dataclasses import dataclass
from typing import Any

import msgspec

from telha.domain.connectors import check_acl, check_external_id
from telha.domain.errors import ContentError, RequestError
from telha.domain.request_json import check_nesting, decode_json
from workers_common.format_options import (
    FETCH_FORMATS,
    FORMAT_OPTIONS,
    OptionError,
    canonical_format,
    check_name,
    check_options,
    drop_nulls,
)

__all__ = [
    "FETCH_FORMATS",
    "KNOWN_FORMATS",
    "MAX_NAME_BYTES",
    "IngestRequest",
    "check_request",
    "known_format",
    "parse_ingest_request",
]

#: Every format name the service knows (docs/formats.md).
KNOWN_FORMATS = (
    "json", "text", "markdown", "pdf", "docx", "pptx", "html",
    "csv", "tsv", "xlsx", "web", "code", "eml", "msg", "slack",
    "png", "jpeg", "tiff", "bmp", "webp",
)  # fmt: skip


#: Longest source ``name`` a request may give, in UTF-8 bytes (docs/rest-api.md, "Limits"):
#: a path or URL fits many times over; a name is stored, listed and logged with its source.
MAX_NAME_BYTES = 4096


def known_format(name: str) -> str:
    """The format a request names: case-insensitive, aliases resolved (``MD`` → ``markdown``,
    :data:`workers_common.format_options.ALIASES`).

    :raises RequestError: not a known format (the message lists them).
    """
    fmt = canonical_format(name)
    if fmt not in KNOWN_FORMATS:
        raise RequestError(f"unknown format {name!r}; known formats: {', '.join(KNOWN_FORMATS)}")
    return fmt


def check_request(fmt: str, name: str, options: dict[str, Any]) -> dict[str, Any]:
    """Check a worker format's ``name`` and ``options`` at request time against what its
    worker declares (:mod:`workers_common.format_options`), whether or not that worker runs
    in this process; answers ``options`` without ``null`` values. ``json`` options are the
    Ingestor's (:meth:`telha.ingest.ingestor.Ingestor.json_options`); ``options.webhook`` is
    checked there too. Both the JSON body and the multipart form come here, so the request
    limits below hold for both.

    :raises RequestError: ``options`` nested deeper than
        :data:`~telha.domain.request_json.MAX_NESTING_DEPTH` (``options: nested deeper…``), a
        name over :data:`MAX_NAME_BYTES` or not UTF-8 (``name: …``), an unknown or
        ill-typed option (``options.<name>: …``), or a ``web`` name that is not an absolute
        http(s) URL (``name: …``).
    """
    check_nesting(options, "options")
    try:
        name_bytes = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise RequestError("name: holds a lone surrogate and cannot be UTF-8") from None
    if name_bytes > MAX_NAME_BYTES:
        raise RequestError(f"name: {name_bytes} UTF-8 bytes is over {MAX_NAME_BYTES}")
    if fmt == "json":
        return options
    try:
        check_name(fmt, name)
        cleaned = drop_nulls(options)
        if fmt in FORMAT_OPTIONS:  # a format without a declaration: its worker checks
            check_options(fmt, cleaned)
    except OptionError as exc:
        where = exc.option if exc.option == "name" else f"options.{exc.option}"
        raise RequestError(f"{where}: {exc.problem}") from None
    return cleaned


class _Body(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    format: str
    name: str
    content: str | None = None
    content_base64: str | None = None
    options: dict[str, Any] | None = None
    connector: str | None = None
    external_id: str | None = None
    acl: Any = None
    marker: str | None = None


@dataclass(frozen=True, slots=True)
class IngestRequest:
    """A validated ingest request; ``raw`` is the content bytes (``None`` only for ``web``).

    A connector's request (docs/connectors.md, "Ingesting as a connector") also names
    ``connector`` (optional), ``external_id``, ``acl`` (checked principals, or ``None``) and
    ``marker`` (its change marker); ``source_id`` is then set from them by the REST front
    (:func:`telha.rest.connector_ingest.as_connector`), else it derives from ``name``.
    """

    format: str
    name: str
    raw: bytes | None
    options: dict[str, Any]
    connector: str | None = None
    external_id: str | None = None
    acl: list[str] | None = None
    marker: str | None = None
    source_id: uuid.UUID | None = None

    @property
    def as_connector(self) -> bool:
        """Whether the request names any connector field."""
        return (
            self.connector is not None or self.external_id is not None
            or self.acl is not None or self.marker is not None
        )  # fmt: skip


def parse_ingest_request(body: bytes) -> IngestRequest:
    """Decode and validate a ``POST /v1/ingest`` body.

    ``content`` counts as its UTF-8 bytes; ``contentBase64`` as its decoded bytes; a ``null``
    value counts as absent.

    :raises RequestError: not a JSON object (or not UTF-8 JSON), missing/unknown/mistyped
        field, ``options`` nested too deep (:mod:`telha.domain.request_json`), empty name,
        unknown format (case and aliases aside: :func:`known_format`), an option or name
        its worker refuses (:func:`check_request`).
    :raises ContentError: both or neither content field (except ``web``), invalid base64.
    """
    # Unknown fields are refused at their key, and every field but options is a string:
    # options is the one value that can nest past the decoder's guard.
    req = decode_json(body, _Body, "request body", field="options")
    if not req.name:
        raise RequestError("name must not be empty")
    fmt = known_format(req.format)
    options = check_request(fmt, req.name, req.options or {})
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
    elif fmt in FETCH_FORMATS:
        raw = None
    else:
        raise ContentError("send exactly one of content and contentBase64")
    external_id = check_external_id(req.external_id) if req.external_id is not None else None
    if req.marker is not None and len(req.marker) > 1024:
        raise RequestError("marker: at most 1024 characters")
    return IngestRequest(
        fmt, req.name, raw, options,
        connector=req.connector, external_id=external_id, acl=check_acl(req.acl),
        marker=req.marker,
    )  # fmt: skip
