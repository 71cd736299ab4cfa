"""Parsing what a request names: path and query parameters, JSON bodies, cursors; each
refusal a typed :class:`~telha.domain.errors.TelhaError` (docs/rest-api.md, "Errors")."""

from __future__ import annotations

import base64
import re
import uuid
from typing import TypeVar

from starlette.requests import Request

from telha.domain.errors import NotFound, RequestError
from telha.domain.listings import cursor_bytes
from telha.domain.request_json import decode_json
from telha.domain.sync_runs import SYNC_FORMATS
from telha.ingest.request import KNOWN_FORMATS

__all__ = [
    "JOB_KINDS",
    "MAX_REASON_CHARS",
    "decode_body",
    "encode_node_cursor",
    "parse_bool",
    "parse_choice",
    "parse_int",
    "parse_node_cursor",
    "parse_uuid",
    "parse_uuid_param",
    "version_params",
]

#: Longest ``reason`` accepted, characters (it is kept in the audit table).
MAX_REASON_CHARS = 1000
#: The kinds a job can have: one per worker format (``json`` makes no job) and ``erase``.
JOB_KINDS = (*(f"ingest:{f}" for f in KNOWN_FORMATS if f != "json"), "erase", *SYNC_FORMATS)


def parse_uuid(value: str, what: str) -> bytes:
    """A path or query id as 16 bytes.

    :raises NotFound: ``value`` is not a UUID (so it cannot name anything).
    """
    try:
        return uuid.UUID(value).bytes
    except ValueError:
        raise NotFound(f"no such {what}: {value!r} is not a UUID") from None


_UINT = re.compile(r"^[0-9]{1,19}$")
_INT64_MAX = 2**63 - 1


_T = TypeVar("_T")


def parse_int(value: str | None, what: str, *, minimum: int = 0) -> int | None:
    """An optional non-negative integer query or path parameter (ASCII digits, ≤ 2⁶³−1).

    :raises RequestError: not such an integer, or below ``minimum``.
    """
    if value is None:
        return None
    if not _UINT.match(value) or int(value) > _INT64_MAX:
        raise RequestError(f"{what} must be a non-negative 64-bit integer, got {value!r}")
    n = int(value)
    if n < minimum:
        raise RequestError(f"{what} must be >= {minimum}")
    return n


def parse_choice(value: str | None, field: str, allowed: tuple[str, ...]) -> str | None:
    """An optional query parameter that must be one of ``allowed`` (``None`` when absent).

    :raises RequestError: another value (the message names the field and the values).
    """
    if value is not None and value not in allowed:
        raise RequestError(f"{field} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def decode_body(body: bytes, typ: type[_T], what: str) -> _T:
    """A JSON request body decoded into ``typ`` (a msgspec struct), by the one request
    decoder (:func:`telha.domain.request_json.decode_json`).

    :raises RequestError: not UTF-8 JSON, not of that shape, or nested past the decoder's
        guard (the message names ``what``).
    """
    return decode_json(body, typ, what)


def parse_uuid_param(value: str, what: str) -> bytes:
    """A query-parameter id as 16 bytes.

    :raises RequestError: ``value`` is not a UUID.
    """
    try:
        return uuid.UUID(value).bytes
    except ValueError:
        raise RequestError(f"{what} must be a UUID, got {value!r}") from None


_BOOLS = {"true": True, "false": False}


def parse_bool(value: str | None, what: str) -> bool:
    """A ``true``/``false`` query parameter (absent: ``false``).

    :raises RequestError: any other value, naming the parameter.
    """
    if value is None:
        return False
    try:
        return _BOOLS[value]
    except KeyError:
        raise RequestError(f"{what} must be true or false, not {value!r}") from None


def version_params(request: Request) -> tuple[bytes, int]:
    """``(source id, tx)`` of a ``/v1/sources/{sourceId}/versions/{tx}/…`` route.

    :raises NotFound: the source id is not a UUID.
    :raises RequestError: tx is not a non-negative integer.
    """
    source_id = parse_uuid(request.path_params["source_id"], "source")
    tx = parse_int(request.path_params["tx"], "sourceVersionTx")
    assert tx is not None
    return source_id, tx


def encode_node_cursor(node_id: bytes) -> str:
    """The opaque ``nextCursor`` of a page that ends at ``node_id``."""
    return base64.urlsafe_b64encode(node_id).rstrip(b"=").decode()


def parse_node_cursor(value: str | None) -> bytes | None:
    """The node id a ``cursor`` query parameter carries (``None`` when absent).

    :raises RequestError: not a cursor this service returned.
    """
    if value is None:
        return None
    raw = cursor_bytes(value)
    if len(raw) != 16:
        raise RequestError("cursor is not one this service returned")
    return raw
