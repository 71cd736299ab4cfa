"""The ``format=json`` bypass projection (docs/rest-api.md, "format=json"). Pure: bytes in,
:class:`~telha.domain.projection.Projection` out.

Canonical text is one compact JSON line per top-level record (input key order, UTF-8 not
escaped), NFC, LF-joined. Each record's line is one span of kind ``body``, referenced by the
record's node and by every child node projected from it. Nodes are listed records in input
order, each record's node before its children (depth first, document order). A record with
an id (:mod:`telha.ingest.json_ids`) and its children carry node ids derived from it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from telha.domain.canonical import key_snake, nfc
from telha.domain.errors import ContentError
from telha.domain.projection import EdgeOut, NodeOut, Projection, SpanOut
from telha.ingest.json_ids import OFF, IdRule, child_node_id, record_ids

__all__ = ["JsonOptions", "empty_projection", "is_empty_json", "project_json"]

_encode = msgspec.json.encode
#: Guard for nesting inside arrays of scalars (objects are bounded by ``max_depth``).
_MAX_ARRAY_NESTING = 64
_UTF8_BOM = b"\xef\xbb\xbf"
#: The bytes an empty input may consist of (the empty-input rule every format follows,
#: :mod:`workers_common.empty`).
_BLANK = re.compile(rb"[ \t\r\n\f\v]*\Z")


@dataclass(frozen=True, slots=True)
class JsonOptions:
    """Resolved options: the record label, nesting policy, the record id rule and the
    ``[ingest]`` limits."""

    label: str
    nested: Literal["flatten", "child"]
    max_records: int
    max_depth: int
    #: Most nodes one request may create (records plus child nodes).
    max_nodes: int = 100_000
    #: Which key identifies a record (``options.id_key``; docs/formats.md, "JSON records").
    ids: IdRule = OFF


def _deep_nfc(value: Any, depth: int = 0) -> Any:
    if depth > 2 * _MAX_ARRAY_NESTING:
        raise ContentError("JSON nesting is too deep")
    if type(value) is str:
        return nfc(value)
    if type(value) is dict:
        out = {nfc(k): _deep_nfc(v, depth + 1) for k, v in value.items()}
        if len(out) != len(value):
            clash = sorted({nfc(k) for k in value if nfc(k) != k})
            raise ContentError(f"keys {clash} are equal once in NFC: one value would be lost")
        return out
    if type(value) is list:
        return [_deep_nfc(v, depth + 1) for v in value]
    return value


def _decode(raw: bytes) -> Any:
    if raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM) :]
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise ContentError(
                f"content is not UTF-8 (byte {bad.start}); JSON must be UTF-8"
            ) from None
        raise ContentError(f"malformed JSON: {exc}") from None
    except RecursionError:
        raise ContentError("malformed JSON: nesting is too deep") from None
    return doc


def _records(doc: Any, max_records: int) -> list[dict[str, Any]]:
    if type(doc) is dict:
        return [doc]
    if type(doc) is not list:
        raise ContentError(
            f"top level must be an object or an array of objects, got {type(doc).__name__}"
        )
    if not doc:
        raise ContentError("top-level array is empty: send at least one object")
    for i, rec in enumerate(doc):
        if type(rec) is not dict:
            raise ContentError(
                f"top-level array must hold only objects; item {i} is {type(rec).__name__}"
            )
    if len(doc) > max_records:
        raise ContentError(f"{len(doc)} records is over ingest.json_max_records ({max_records})")
    return doc


def _check_scalar_array(value: list[Any], path: str, nesting: int = 0) -> None:
    if nesting > _MAX_ARRAY_NESTING:
        raise ContentError(f"{path}: arrays nested too deep")
    for item in value:
        if type(item) is dict:
            raise ContentError(f"{path}: an array inside an array may not hold objects")
        if type(item) is list:
            _check_scalar_array(item, path, nesting + 1)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _all_scalars(items: list[Any]) -> bool:
    """True when no item of ``items`` is an object or an array (the common, flat case)."""
    scalars = _SCALARS
    return all(type(item) in scalars for item in items)


class _Projector:
    """Walks records into nodes and edges; one instance per request."""

    def __init__(self, opts: JsonOptions) -> None:
        self.opts = opts
        self.nodes: list[NodeOut] = []
        self.edges: list[EdgeOut] = []

    def record(self, rec: dict[str, Any], line: bytes, span: int, node_id: bytes | None) -> None:
        self._object(rec, (self.opts.label,), span, depth=1, line=line, node_id=node_id)

    def _object(
        self,
        obj: dict[str, Any],
        labels: tuple[str, ...],
        span: int,
        depth: int,
        line: bytes | None = None,
        node_id: bytes | None = None,
    ) -> int:
        if depth > self.opts.max_depth:
            raise ContentError(
                f"object nesting is deeper than ingest.json_max_depth ({self.opts.max_depth})"
            )
        props: dict[str, Any] = {}
        children: list[tuple[str, Any, int]] = []
        flat = self._walk(obj, "", depth, props, children)
        index = len(self.nodes)
        if index >= self.opts.max_nodes:
            raise ContentError(
                f"more than {self.opts.max_nodes} nodes (records and child objects) in one request"
            )
        props_json = line if flat and line is not None else _encode(props)
        self.nodes.append(NodeOut(labels, props_json, (span,), node_id))
        groups: dict[str, int] = {}
        for key, value, child_depth in children:
            occurrence = groups[key] = groups.get(key, -1) + 1
            self._children(index, key, value, span, child_depth, node_id, occurrence)
        return index

    def _walk(
        self,
        obj: dict[str, Any],
        prefix: str,
        depth: int,
        props: dict[str, Any],
        children: list[tuple[str, Any, int]],
    ) -> bool:
        """Fill ``props``/``children``; True when ``props`` equals ``obj`` (nothing moved)."""
        flat = True
        dict_, list_ = dict, list
        for k, v in obj.items():
            t = type(v)
            if t is not dict_ and t is not list_:
                if prefix:
                    k = prefix + k
                    if k in props:
                        raise ContentError(f"{k}: flattened key collides with a literal key")
                elif k in props:  # a literal key equal to one flattened before it
                    raise ContentError(f"{k}: flattened key collides with a literal key")
                props[k] = v
                continue
            if self._nested(v, t, prefix + k, depth, props, children):
                flat = False
        return flat

    def _nested(
        self,
        v: Any,
        t: type,
        key: str,
        depth: int,
        props: dict[str, Any],
        children: list[tuple[str, Any, int]],
    ) -> bool:
        """Place a dict or list value; True when it left ``props`` (flattened or a child)."""
        if t is dict:
            if self.opts.nested == "child":
                children.append((key, v, depth + 1))
                return True
            if depth + 1 > self.opts.max_depth:
                raise ContentError(
                    f"{key}: object nesting is deeper than ingest.json_max_depth "
                    f"({self.opts.max_depth})"
                )
            if v:
                self._walk(v, key + ".", depth + 1, props, children)
                return True
        elif v and not _all_scalars(v):
            n_obj = sum(1 for item in v if type(item) is dict)
            if n_obj == len(v):
                children.append((key, v, depth + 1))
                return True
            if n_obj:
                raise ContentError(f"{key}: an array may not mix objects with other values")
            _check_scalar_array(v, key)
        if key in props:
            raise ContentError(f"{key}: flattened key collides with a literal key")
        props[key] = v
        return False

    def _children(
        self,
        parent: int,
        key: str,
        value: Any,
        span: int,
        depth: int,
        parent_id: bytes | None,
        occurrence: int,
    ) -> None:
        """Child nodes of ``key`` at object depth ``depth``; each edge is listed before the
        child's own subtree (creation order, depth first). Under a parent with a supplied id
        (``parent_id``) each child's id derives from it (:func:`child_node_id`)."""
        label = key_snake(key) or "CHILD"
        edge_type = f"HAS_{label}"
        key_prop = {} if label != "CHILD" else {"key": key}
        items = [(None, value)] if type(value) is dict else list(enumerate(value))
        for ord_, item in items:
            props = key_prop if ord_ is None else {**key_prop, "ord": ord_}
            self.edges.append(EdgeOut(edge_type, parent, len(self.nodes), _encode(props)))
            child_id = None
            if parent_id is not None:
                child_id = child_node_id(parent_id, key, occurrence, ord_)
            self._object(item, (label,), span, depth, node_id=child_id)


def project_json(raw: bytes, opts: JsonOptions, *, source_id: bytes) -> Projection:
    """Project ``raw`` (the request's content bytes) into a :class:`Projection`.

    :param raw: the raw content bytes (UTF-8, optionally with a BOM).
    :param source_id: the source's id (16 bytes), which record node ids derive from.
    :raises ContentError: not UTF-8; malformed JSON; a top level that is not one object or a
        non-empty array of objects; more than ``opts.max_records`` records; object nesting
        deeper than ``opts.max_depth``; an array mixing objects with other values; a flattened
        dotted key colliding with a literal one; under a named id key (``opts.ids.strict``)
        a record without a string or integer id, or two records with the same id.
    """
    records = _records(_decode(raw), opts.max_records)
    lines = [_encode(rec) for rec in records]
    canonical = b"\n".join(lines)
    if not canonical.isascii() and not unicodedata.is_normalized("NFC", canonical.decode()):
        # Rare: some key or string is not NFC. Normalize every string, render again.
        records = _deep_nfc(records)
        lines = [_encode(rec) for rec in records]
        canonical = b"\n".join(lines)
    ids = record_ids(records, opts.ids, source_id)
    projector = _Projector(opts)
    spans: list[SpanOut] = []
    offset = 0
    for i, (rec, line, node_id) in enumerate(zip(records, lines, ids, strict=True)):
        end = offset + len(line)
        spans.append(SpanOut(offset, end, "body"))
        offset = end + 1
        projector.record(rec, line, i, node_id)
    return Projection(canonical, spans, projector.nodes, projector.edges)


def is_empty_json(raw: bytes) -> bool:
    """Whether ``raw`` is empty by the rule every format follows (docs/formats.md, "Empty
    input"): no bytes, or only ASCII whitespace, optionally after a UTF-8 byte order mark."""
    start = len(_UTF8_BOM) if raw.startswith(_UTF8_BOM) else 0
    # A match stops at the first other byte: no copy of a large body.
    return _BLANK.match(raw, start) is not None


def empty_projection(name: str) -> Projection:
    """An empty input's version: empty canonical text and only the root node, a
    ``DOCUMENT`` with the source's ``name`` and ``format`` (as the workers' empty inputs)."""
    props = _encode({"format": "json", "name": name})
    return Projection(b"", [], [NodeOut(("DOCUMENT",), props, ())], [])
