"""``multipart/form-data`` uploads for ``POST /v1/ingest`` (docs/formats.md, "Large files").

The ``file`` part is streamed to a file in the upload folder while it is BLAKE3-hashed; it is
never held in memory. The other parts are small text fields: ``format``, ``name`` and
``options`` (a JSON object). The parser is python-multipart's incremental one, fed about
1 MiB at a time from a worker thread (file writes and hashing stay off the event loop).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import blake3
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import (
    MAX_BOUNDARY_LENGTH,
    MultipartParser,
    parse_options_header,
)
from starlette.requests import Request

from telha.domain.errors import ContentError, PayloadTooLarge, RequestError
from telha.domain.request_json import decode_json
from telha.ingest.ingestor import UploadedFile
from telha.ingest.request import check_request, known_format
from telha.rest.body import body_chunks

__all__ = ["Upload", "receive_upload"]

#: Bytes of request body handed to the parser per thread hop.
_FEED_BYTES = 1 << 20
#: Largest text field (``options`` JSON, ``name``), bytes.
_MAX_FIELD_BYTES = 64 * 1024
_FIELDS = frozenset({"format", "name", "options"})


@dataclass(frozen=True, slots=True)
class Upload:
    """A received upload: the form's fields and the file part's bytes on disk."""

    format: str
    name: str
    options: dict[str, Any]
    file: UploadedFile


class _Receiver:
    """python-multipart callbacks: the file part to disk and hasher, text fields to memory.
    Runs in worker threads, one ``write`` at a time."""

    def __init__(self, out: BinaryIO, limit: int) -> None:
        self._out = out
        self._limit = limit
        self.hasher = blake3.blake3()
        self.size = 0
        self.files = 0
        self.fields: dict[str, bytearray] = {}
        self._header_field = bytearray()
        self._header_value = bytearray()
        self._disposition = b""
        self._current: str | None = None  # "file", a field name, or None (ignored part)
        self.ended = False

    def callbacks(self) -> dict[str, Callable[..., None]]:
        return {
            "on_part_begin": self._part_begin,
            "on_part_data": self._part_data,
            "on_header_field": self._header_field_data,
            "on_header_value": self._header_value_data,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_end": self._end,
        }

    def _end(self) -> None:
        self.ended = True

    def _part_begin(self) -> None:
        self._disposition = b""
        self._current = None

    def _header_field_data(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def _header_value_data(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        if bytes(self._header_field).lower() == b"content-disposition":
            self._disposition = bytes(self._header_value)
        self._header_field.clear()
        self._header_value.clear()

    def _headers_finished(self) -> None:
        _, params = parse_options_header(self._disposition)
        name = params.get(b"name", b"").decode("utf-8", "replace")
        if name == "file":
            self.files += 1
            if self.files > 1:
                raise RequestError("send one file part, not several")
            self._current = "file"
        elif name in _FIELDS:
            if name in self.fields:
                raise RequestError(f"field {name!r} is given twice")
            self.fields[name] = bytearray()
            self._current = name
        else:
            raise RequestError(
                f"unknown form field {name!r}; accepted: file, {', '.join(sorted(_FIELDS))}"
            )

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._current == "file":
            piece = data[start:end]
            self.size += len(piece)
            if self.size > self._limit:
                raise PayloadTooLarge(f"file is over ingest.max_upload_bytes ({self._limit} bytes)")
            self.hasher.update(piece)
            self._out.write(piece)
        elif self._current is not None:
            buf = self.fields[self._current]
            buf += data[start:end]
            if len(buf) > _MAX_FIELD_BYTES:
                raise PayloadTooLarge(f"field {self._current!r} is over {_MAX_FIELD_BYTES} bytes")


def _text(fields: dict[str, bytearray], key: str) -> str | None:
    raw = fields.get(key)
    if raw is None:
        return None
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(f"field {key!r} is not UTF-8") from None


def _upload_fields(fields: dict[str, bytearray], files: int) -> tuple[str, str, dict[str, Any]]:
    """``(format, name, options)`` of a finished form.

    :raises RequestError: a missing or invalid field, unknown format, options not a JSON
        object, nested too deep (:mod:`telha.domain.request_json`) or refused by the
        format's declaration (:func:`telha.ingest.request.check_request`).
    :raises ContentError: no file part.
    """
    fmt, name, options_text = (_text(fields, k) for k in ("format", "name", "options"))
    if not fmt:
        raise RequestError("field 'format' is required")
    fmt = known_format(fmt)
    if not name:
        raise RequestError("field 'name' is required and must not be empty")
    options: dict[str, Any] = {}
    if options_text:
        decoded: Any = decode_json(options_text, object, "field 'options'", field="options")
        if not isinstance(decoded, dict):
            raise RequestError("field 'options' must be a JSON object")
        options = decoded
    options = check_request(fmt, name, options)
    if files == 0:
        raise ContentError("send the content as a 'file' part")
    return fmt, name, options


def _boundary(request: Request) -> bytes:
    """The form's boundary, one python-multipart's parser takes (docs/rest-api.md, "Limits").

    :raises RequestError: none, or longer than the parser's ``MAX_BOUNDARY_LENGTH`` (its
        constructor would raise an untyped ``FormParserError``).
    """
    _, params = parse_options_header(request.headers.get("content-type", ""))
    boundary = params.get(b"boundary")
    if not boundary:
        raise RequestError("multipart/form-data without a boundary")
    if len(boundary) > MAX_BOUNDARY_LENGTH:
        raise RequestError(
            f"multipart/form-data boundary is over {MAX_BOUNDARY_LENGTH} bytes ({len(boundary)})"
        )
    return boundary


@asynccontextmanager
async def receive_upload(request: Request, folder: Path, limit: int) -> AsyncIterator[Upload]:
    """Receive a ``multipart/form-data`` ingest request into a file in ``folder``; the file is
    removed when the ``with`` block ends (storage copies what it keeps).

    :param limit: most bytes the file part may have (``ingest.max_upload_bytes``).
    :raises PayloadTooLarge: the file part (or the declared body) is over ``limit``.
    :raises RequestError: malformed form, unknown or repeated field, bad ``options``, a body
        that ended before it was complete.
    :raises RequestTimeout: the body sent nothing for ``server.body_idle_timeout_s``
        (:func:`telha.rest.body.body_chunks`).
    :raises ContentError: no ``file`` part.
    """
    declared = request.headers.get("content-length", "")
    # The body is the file plus the form's framing and small fields.
    if declared.isdigit() and int(declared) > limit + 2 * _MAX_FIELD_BYTES + 4096:
        raise PayloadTooLarge(f"file is over ingest.max_upload_bytes ({limit} bytes)")
    boundary = _boundary(request)
    await anyio.to_thread.run_sync(lambda: folder.mkdir(parents=True, exist_ok=True))
    fd, name = await anyio.to_thread.run_sync(
        lambda: tempfile.mkstemp(prefix="upload-", dir=folder)
    )
    path = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            receiver = _Receiver(out, limit)
            parser = MultipartParser(boundary, receiver.callbacks())  # type: ignore[arg-type]
            pending: list[bytes] = []
            pending_size = 0
            try:
                async with aclosing(body_chunks(request)) as chunks:
                    async for chunk in chunks:
                        pending.append(chunk)
                        pending_size += len(chunk)
                        if pending_size >= _FEED_BYTES:
                            await anyio.to_thread.run_sync(parser.write, b"".join(pending))
                            pending, pending_size = [], 0
                await anyio.to_thread.run_sync(parser.write, b"".join(pending))
                parser.finalize()
            except MultipartParseError as exc:
                raise RequestError(f"malformed multipart/form-data body: {exc}") from None
            if not receiver.ended:
                raise RequestError("multipart/form-data body ends before its closing boundary")
        fmt, upload_name, options = _upload_fields(receiver.fields, receiver.files)
        yield Upload(
            fmt, upload_name, options, UploadedFile(path, receiver.hasher.digest(), receiver.size)
        )
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: path.unlink(missing_ok=True))
