"""JSON request bodies: decoding into a typed shape, and the request-wide nesting limit
(docs/rest-api.md, "Limits").

Every REST route that reads a JSON body, and the multipart ``options`` field, decodes it with
:func:`decode_json`; a value the shape leaves free (``options``, typed ``Any``) is then held
to :data:`MAX_NESTING_DEPTH` with :func:`check_nesting`. Together they make nesting a typed
``400 INVALID_REQUEST`` at any depth: past the decoder's own recursion guard (about a
thousand levels, less the stack already in use) msgspec raises ``RecursionError``, which
:func:`decode_json` turns into the same error; below it, :func:`check_nesting` walks the free
value, without recursion, once. ``content`` is a string in the body and is never walked here
(``format=json`` content has its own limit, ``ingest.json_max_depth``).

Pure; no I/O.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from telha.domain.errors import RequestError

__all__ = ["MAX_NESTING_DEPTH", "check_nesting", "decode_json", "too_deep"]

#: Most levels of arrays and objects a free request value may nest (``{}`` is one level,
#: ``{"a": []}`` two). Far above any real option (the deepest, ``crawl.*``, is two) and far
#: below what the decoder, the canonical encoder and the workers' own walks can take.
MAX_NESTING_DEPTH = 64

_T = TypeVar("_T")
_CONTAINERS = (dict, list)


def too_deep(field: str, limit: int = MAX_NESTING_DEPTH) -> str:
    """The message of a value nested past ``limit``: ``"<field>: nested deeper than …"``."""
    return f"{field}: nested deeper than {limit} levels of arrays and objects"


def decode_json(body: bytes | str, typ: type[_T], what: str, *, field: str | None = None) -> _T:
    """``body`` (UTF-8 JSON) decoded into ``typ`` (a msgspec struct, or ``Any``).

    :param what: what the body is, for messages (``"request body"``, ``"field 'options'"``).
    :param field: the field named when the body nests too deep for the decoder (the only
        one of ``typ`` that can nest: say ``"options"``); ``what`` when not given.
    :raises RequestError: not of that shape (``invalid <what>: …``, with msgspec's path);
        not JSON, or not UTF-8 (``<what> is not valid JSON: …``); nested past the decoder's
        recursion guard (:func:`too_deep`).
    """
    try:
        return msgspec.json.decode(body, type=typ)
    except msgspec.ValidationError as exc:
        raise RequestError(f"invalid {what}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise RequestError(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise RequestError(too_deep(field or what)) from None


def check_nesting(value: Any, field: str, limit: int = MAX_NESTING_DEPTH) -> None:
    """Refuse ``value`` (decoded JSON: dicts, lists, scalars) when its arrays and objects
    nest more than ``limit`` levels; a scalar is level 0. Iterative: any depth is safe.
    Visits each container of ``value`` at most once, and stops at the first one too deep.

    :raises RequestError: nested deeper than ``limit`` (:func:`too_deep`, naming ``field``).
    """
    if type(value) not in _CONTAINERS:
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise RequestError(too_deep(field, limit))
        children = item.values() if type(item) is dict else item
        stack.extend((child, depth + 1) for child in children if type(child) in _CONTAINERS)
