"""The JSON request decoder and the request-wide nesting limit (docs/rest-api.md, "Limits"):
any depth is a typed ``RequestError`` naming the field, never a ``RecursionError``; the
limit is exact; ``parse_ingest_request`` and the name limit use them."""

from __future__ import annotations

import sys
from typing import Any

import msgspec
import pytest

from telha.domain.errors import RequestError
from telha.domain.request_json import MAX_NESTING_DEPTH, check_nesting, decode_json
from telha.ingest.request import MAX_NAME_BYTES, parse_ingest_request


class _Shape(msgspec.Struct, forbid_unknown_fields=True):
    options: dict[str, Any] | None = None


def _arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


def _nested(depth: int) -> Any:
    """``depth`` levels of lists and dicts, built without recursion."""
    value: Any = []
    for level in range(depth - 1):
        value = {"k": value} if level % 2 else [value]
    return value


@pytest.mark.parametrize("depth", [1, 2, MAX_NESTING_DEPTH])
def test_nesting_up_to_the_limit_passes(depth: int) -> None:
    check_nesting(_nested(depth), "options")
    check_nesting({"a": 1, "b": [1, "x", None], "c": {}}, "options")
    check_nesting("scalar", "options")


@pytest.mark.parametrize("depth", [MAX_NESTING_DEPTH + 1, 900, 50_000])
def test_nesting_past_the_limit_is_refused_naming_the_field(depth: int) -> None:
    with pytest.raises(RequestError, match=r"^options: nested deeper than 64 levels"):
        check_nesting(_nested(depth), "options")


def test_the_limit_counts_the_deepest_branch_only() -> None:
    wide = {f"k{i}": _nested(MAX_NESTING_DEPTH - 1) for i in range(50)}
    check_nesting(wide, "options")
    wide["deep"] = _nested(MAX_NESTING_DEPTH)
    with pytest.raises(RequestError):
        check_nesting(wide, "options")
    check_nesting(_nested(10), "options", limit=10)
    with pytest.raises(RequestError, match="deeper than 9 levels"):
        check_nesting(_nested(10), "options", limit=9)


@pytest.mark.parametrize("depth", [sys.getrecursionlimit(), 30_000])
def test_decoding_past_the_decoders_guard_is_a_request_error(depth: int) -> None:
    body = f'{{"options":{{"x":{_arrays(depth)}}}}}'.encode()
    with pytest.raises(RequestError, match=r"^options: nested deeper than"):
        decode_json(body, _Shape, "request body", field="options")
    with pytest.raises(RequestError, match=r"^field 'options': nested deeper than"):
        decode_json(_arrays(depth), object, "field 'options'")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"[1]", "invalid request body: Expected `object`, got `array`"),
        (b'{"options": 1}', "at `$.options`"),
        (b'{"zz": 1}', "unknown field `zz`"),
        (b"", "request body is not valid JSON"),
        (b'{"options": {"a": "\xff"}}', "request body is not valid JSON"),
    ],
)
def test_decoding_errors_name_the_body(body: bytes, says: str) -> None:
    with pytest.raises(RequestError) as caught:
        decode_json(body, _Shape, "request body", field="options")
    assert says in caught.value.message


def test_an_ingest_request_holds_options_and_name_to_their_limits() -> None:
    def body(options: str, name: str = "a.txt") -> bytes:
        return f'{{"format":"text","name":"{name}","content":"x","options":{options}}}'.encode()

    ok = parse_ingest_request(body("{}", "n" * MAX_NAME_BYTES))
    assert ok.name == "n" * MAX_NAME_BYTES
    for depth in (MAX_NESTING_DEPTH, 10_000):  # options is one level: one more than the limit
        with pytest.raises(RequestError, match=r"^options: nested deeper than 64"):
            parse_ingest_request(body(f'{{"x":{_arrays(depth)}}}'))
    with pytest.raises(RequestError, match=r"^options\.x: unknown option"):  # 64 levels
        parse_ingest_request(body(f'{{"x":{_arrays(MAX_NESTING_DEPTH - 1)}}}'))
    with pytest.raises(RequestError, match=rf"^name: {MAX_NAME_BYTES + 1} UTF-8 bytes is over"):
        parse_ingest_request(body("{}", "n" * (MAX_NAME_BYTES + 1)))
