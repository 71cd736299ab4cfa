"""Record identity of the ``format=json`` projection (docs/formats.md, "JSON records"). Pure:
records in, node ids out.

A record whose **id key** holds a string or an integer unique among the document's records
gets a node id derived from its source and that value (:func:`record_node_id`), and its child
nodes ids derived from the record's id and their path in it (:func:`child_node_id`): a
supplied id (docs/architecture.md, "Stable node identity"), so every version of the source
gives the record the same node id, and an edited record is *changed* in a diff, not removed
and added. A record without one is matched by content, as every node without a supplied id.

Which key (:class:`IdRule`): ``options.id_key`` names it, and then every record must hold a
usable, unique value (else :class:`~telha.domain.errors.ContentError`); ``true`` (:data:`AUTO`)
takes ``id`` when a record has one, else ``_id``, and a record without a usable unique value
keeps content identity (nothing is refused); without the option, or ``false``, the rule is
off (:data:`OFF`: every record matched by content, as before the rule existed).

An id is 16 bytes: 6 bytes of BLAKE3 of the source id (a source's records sit together in
the node index), then 10 bytes of BLAKE3 of what it is derived from, with the UUID version 8
and RFC 9562 variant bits set (as :func:`telha.domain.identity.edge_id`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import blake3
import msgspec

from telha.domain.errors import ContentError

__all__ = [
    "AUTO",
    "OFF",
    "IdRule",
    "child_node_id",
    "record_ids",
    "record_node_id",
    "source_prefix",
]

_encode = msgspec.json.encode
#: What a value shown in an error message is cut to (characters).
_SHOWN = 60


@dataclass(frozen=True, slots=True)
class IdRule:
    """Which top-level key identifies a record.

    :ivar keys: the candidate keys: the document's id key is the first one some record holds
        (none: every record is matched by content).
    :ivar strict: the key was named (``options.id_key``): every record must hold a string or
        integer value under it, unique in the document.
    """

    keys: tuple[str, ...]
    strict: bool = False


#: ``options.id_key: true``: ``id``, else ``_id``, where usable.
AUTO = IdRule(("id", "_id"))
#: No ``options.id_key``, or ``false``: every record is matched by content.
OFF = IdRule(())


def _set_version(raw: bytearray) -> bytes:
    raw[6] = (raw[6] & 0x0F) | 0x80  # UUID version 8 (custom), RFC 9562 variant
    raw[8] = (raw[8] & 0x3F) | 0x80
    return bytes(raw)


def source_prefix(source_id: bytes) -> bytes:
    """The 6 bytes every record and child id of ``source_id`` (16 bytes) starts with."""
    return blake3.blake3(b"json-source\x00" + source_id).digest(6)


def record_node_id(prefix: bytes, source_id: bytes, key: str, value: bytes) -> bytes:
    """The node id (16 bytes) of the record of ``source_id`` whose ``key`` holds ``value``
    (its compact JSON: ``"A-1"`` and ``1`` differ); ``prefix``: :func:`source_prefix`."""
    h = blake3.blake3(b"json-record\x00")
    h.update(source_id)
    h.update(key.encode())
    h.update(b"\x00")
    h.update(value)
    return _set_version(bytearray(prefix + h.digest(10)))


def child_node_id(parent: bytes, key: str, occurrence: int, ord_: int | None) -> bytes:
    """The node id (16 bytes) of a child of node ``parent`` (a supplied id): the
    ``occurrence``-th child group under ``key`` (a flattened path, ``a.b``; 0 but where a
    literal dotted key repeats a flattened one) and, in an array, its position ``ord_``."""
    h = blake3.blake3(b"json-child\x00")
    h.update(parent)
    h.update(key.encode())
    h.update(b"\x00%d\x00%d" % (occurrence, -1 if ord_ is None else ord_))
    return _set_version(bytearray(parent[:6] + h.digest(10)))


def _shown(value: Any) -> str:
    text = _encode(value).decode()
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _document_key(records: Sequence[dict[str, Any]], rule: IdRule) -> str | None:
    if rule.strict:
        return rule.keys[0]
    for key in rule.keys:
        if any(key in rec for rec in records):
            return key
    return None


def record_ids(
    records: Sequence[dict[str, Any]], rule: IdRule, source_id: bytes
) -> list[bytes | None]:
    """Per record, its node id by ``rule`` for source ``source_id`` (16 bytes), or ``None``
    (matched by content).

    :raises ContentError: ``rule.strict`` and a record without the key, with a value that is
        not a string or an integer (``true``, ``1.5``, ``null``, an object, an array), or
        with a value an earlier record holds.
    """
    key = _document_key(records, rule)
    if key is None:
        return [None] * len(records)
    values: list[bytes | None] = []
    first: dict[bytes, int] = {}
    shared: set[bytes] = set()
    for i, rec in enumerate(records):
        value = rec.get(key)
        if type(value) is not str and type(value) is not int:
            if rule.strict:
                what = "has no" if key not in rec else f"has {_shown(value)} as its"
                raise ContentError(
                    f"record {i} {what} id key {key!r} (options.id_key): a string or an"
                    " integer is needed"
                )
            values.append(None)
            continue
        token = _encode(value)
        seen = first.setdefault(token, i)
        if seen != i:
            if rule.strict:
                raise ContentError(
                    f"records {seen} and {i} share the id {key!r} = {_shown(value)}"
                    " (options.id_key): ids must be unique in a document"
                )
            shared.add(token)
        values.append(token)
    prefix = source_prefix(source_id)
    return [
        None if token is None or token in shared
        else record_node_id(prefix, source_id, key, token)
        for token in values
    ]  # fmt: skip
