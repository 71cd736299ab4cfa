"""Bad input against a real ``telha serve`` (docs/rest-api.md, "Errors" and "Limits"): deep
nesting anywhere in a request, wrong content types, bodies that are not JSON objects, invalid
UTF-8, oversized form fields and names, each answered with its typed 4xx — never a 5xx, never
an ``unhandled_error`` in the server's log — and nothing stored before changes: the database
rows are the same after the battery and ``telha check`` stays clean.

The tests of this module share one server and run in file order: the data is stored first,
the battery runs, the last tests look at the log and the data.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from telha.domain.request_json import MAX_NESTING_DEPTH
from telha.ingest.request import MAX_NAME_BYTES
from tests.support.server import ServerProcess, telha_check, write_config

#: Tables whose rows a request may touch without storing anything (a key's last use).
_VOLATILE = frozenset({"api_keys"})
NESTED = "options: nested deeper than 64 levels"


def arrays(depth: int) -> str:
    """``depth`` arrays, one inside the other, as JSON text."""
    return "[" * depth + "]" * depth


def objects(depth: int, leaf: str = "1") -> str:
    """``depth`` objects ``{"a": …}``, one inside the other, as JSON text."""
    return '{"a":' * depth + leaf + "}" * depth


def _json_body(options: str, fmt: str = "text", content: str = '"x"') -> bytes:
    return (
        f'{{"format":"{fmt}","name":"deep.txt","content":{content},"options":{options}}}'.encode()
    )


def _form(
    fields: dict[str, bytes | str], boundary: str = "b0undary", file: bytes = b"x"
) -> tuple[bytes, str]:
    """A multipart body of ``fields`` plus a ``file`` part, and its content type."""
    parts = [
        f'--{boundary}\r\ncontent-disposition: form-data; name="{name}"\r\n\r\n'.encode()
        + (value.encode() if isinstance(value, str) else value)
        + b"\r\n"
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\ncontent-disposition: form-data; name="file"; filename="a.txt"\r\n'
        "content-type: text/plain\r\n\r\n".encode()
        + file
        + b"\r\n"
    )
    return b"".join(
        parts
    ) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


@dataclass(frozen=True)
class Shape:
    """One bad request and the answer it must get."""

    label: str
    body: bytes
    status: int
    code: str
    says: str
    content_type: str = "application/json"
    method: str = "POST"
    path: str = "/v1/ingest"
    params: dict[str, str] = field(default_factory=dict)


def _form_shape(
    label: str,
    fields: dict[str, bytes | str],
    status: int,
    code: str,
    says: str,
    file: bytes = b"x",
) -> Shape:
    body, ctype = _form(fields, file=file)
    return Shape(label, body, status, code, says, content_type=ctype)


_DEEP = 30_000
_TEXT = {"format": "text", "name": "a"}
_BELOW_GUARD = MAX_NESTING_DEPTH + 1  # past the limit, far below the decoder's own guard
SHAPES = [
    # Nesting in a JSON body's options: past the decoder's guard, and just past the limit.
    Shape("options arrays 1,000 deep", _json_body(f'{{"x":{arrays(1000)}}}'), 400,
          "INVALID_REQUEST", NESTED),
    Shape("options arrays 30,000 deep", _json_body(f'{{"x":{arrays(_DEEP)}}}'), 400,
          "INVALID_REQUEST", NESTED),
    Shape("options objects 1,000 deep", _json_body(objects(1000)), 400, "INVALID_REQUEST", NESTED),
    Shape("options 65 levels", _json_body(f'{{"x":{arrays(_BELOW_GUARD - 1)}}}'), 400,
          "INVALID_REQUEST", NESTED),
    Shape("options of format=json 1,000 deep", _json_body(objects(1000), "json", '"{}"'), 400,
          "INVALID_REQUEST", NESTED),
    Shape("options of format=web 1,000 deep",
          b'{"format":"web","name":"http://127.0.0.1/","options":' + objects(1000).encode() + b"}",
          400, "INVALID_REQUEST", NESTED),
    # 64 levels is within the limit: the option itself is what is refused.
    Shape("options 64 levels", _json_body(f'{{"x":{arrays(MAX_NESTING_DEPTH - 1)}}}'), 400,
          "INVALID_REQUEST", "options.x: unknown option"),
    # Nesting elsewhere in the body: refused at the first token, whatever the depth.
    Shape("format nested 30,000 deep", f'{{"format":{arrays(_DEEP)}}}'.encode(), 400,
          "INVALID_REQUEST", "at `$.format`"),
    Shape("unknown field nested 30,000 deep",
          f'{{"format":"text","name":"a","content":"x","zz":{arrays(_DEEP)}}}'.encode(), 400,
          "INVALID_REQUEST", "unknown field `zz`"),
    Shape("body nested 30,000 deep", arrays(_DEEP).encode(), 400, "INVALID_REQUEST",
          "Expected `object`, got `array`"),
    # format=json content: its own limit, ingest.json_max_depth, and the decoder's guard.
    Shape("json content objects 30,000 deep",
          json.dumps({"format": "json", "name": "d.json", "content": objects(_DEEP)}).encode(),
          400, "INVALID_CONTENT", "nesting is too deep"),
    Shape("json content arrays 30,000 deep",
          json.dumps({"format": "json", "name": "d.json", "content": arrays(_DEEP)}).encode(),
          400, "INVALID_CONTENT", "nesting is too deep"),
    Shape("json contentBase64 objects 30,000 deep",
          json.dumps({"format": "json", "name": "d.json",
                      "contentBase64": base64.b64encode(objects(_DEEP).encode()).decode()}
                     ).encode(),
          400, "INVALID_CONTENT", "nesting is too deep"),
    _form_shape("json file part objects 30,000 deep", {"format": "json", "name": "d.json"},
                400, "INVALID_CONTENT", "nesting is too deep", file=objects(_DEEP).encode()),
    Shape("json content past json_max_depth",
          json.dumps({"format": "json", "name": "d.json", "content": objects(20)}).encode(),
          400, "INVALID_CONTENT", "ingest.json_max_depth"),
    # Multipart options: nested past the guard (30,000 levels fit the 64 KiB field) and past
    # the limit; over the field cap; not UTF-8; not an object.
    _form_shape("form options 30,000 deep", {**_TEXT, "options": arrays(_DEEP)},
                400, "INVALID_REQUEST", NESTED),
    _form_shape("form options 65 levels",
                {**_TEXT, "options": f'{{"x":{arrays(_BELOW_GUARD - 1)}}}'},
                400, "INVALID_REQUEST", NESTED),
    _form_shape("form options over 64 KiB",
                {**_TEXT, "options": '{"x":"' + "a" * 70_000 + '"}'},
                413, "PAYLOAD_TOO_LARGE", "field 'options' is over 65536 bytes"),
    _form_shape("form options not UTF-8", {**_TEXT, "options": b'{"x":"\xff"}'},
                400, "INVALID_REQUEST", "field 'options' is not UTF-8"),
    _form_shape("form options an array", {**_TEXT, "options": "[1]"},
                400, "INVALID_REQUEST", "must be a JSON object"),
    _form_shape("form name over 64 KiB", {"format": "text", "name": "n" * 70_000},
                413, "PAYLOAD_TOO_LARGE", "field 'name' is over 65536 bytes"),
    _form_shape("form name over the name limit",
                {"format": "text", "name": "n" * (MAX_NAME_BYTES + 1)},
                400, "INVALID_REQUEST", f"name: {MAX_NAME_BYTES + 1} UTF-8 bytes is over"),
    _form_shape("form unknown field", {**_TEXT, "zz": "1"},
                400, "INVALID_REQUEST", "unknown form field 'zz'"),
    # Names.
    Shape("name over the name limit",
          json.dumps({"format": "text", "name": "é" * MAX_NAME_BYTES, "content": "x"}).encode(),
          400, "INVALID_REQUEST", f"name: {2 * MAX_NAME_BYTES} UTF-8 bytes is over"),
    # Wrong content types, and bodies that are not JSON objects.
    Shape("text/plain body", b"hello", 400, "INVALID_REQUEST", "not valid JSON",
          content_type="text/plain"),
    Shape("form-urlencoded body", b"format=text&name=a", 400, "INVALID_REQUEST", "not valid JSON",
          content_type="application/x-www-form-urlencoded"),
    Shape("invalid UTF-8 JSON", b'{"format":"text","name":"a","content":"\xff\xfe"}', 400,
          "INVALID_REQUEST", "Invalid UTF-8"),
    Shape("lone surrogate escape", b'{"format":"text","name":"\\ud800","content":"x"}', 400,
          "INVALID_REQUEST", "not valid JSON"),
    Shape("empty body", b"", 400, "INVALID_REQUEST", "not valid JSON"),
    Shape("JSON null", b"null", 400, "INVALID_REQUEST", "Expected `object`, got `null`"),
    Shape("JSON string", b'"x"', 400, "INVALID_REQUEST", "Expected `object`, got `str`"),
    Shape("JSON number", b"7", 400, "INVALID_REQUEST", "Expected `object`, got `int`"),
    Shape("JSON array", b"[1, 2]", 400, "INVALID_REQUEST", "Expected `object`, got `array`"),
    Shape("options an array", b'{"format":"text","name":"a","content":"x","options":[1]}', 400,
          "INVALID_REQUEST", "at `$.options`"),
    # Multipart framing.
    Shape("multipart without a boundary", b"--x\r\n", 400, "INVALID_REQUEST", "without a boundary",
          content_type="multipart/form-data"),
    Shape("multipart with an empty boundary", b"--x\r\n", 400, "INVALID_REQUEST",
          "without a boundary", content_type='multipart/form-data; boundary=""'),
    Shape("multipart with another boundary", _form({"format": "text"})[0], 400, "INVALID_REQUEST",
          "malformed multipart/form-data", content_type="multipart/form-data; boundary=other"),
    Shape("multipart with a 200-character boundary", _form({"format": "text"})[0], 400,
          "INVALID_REQUEST", "malformed multipart/form-data",
          content_type="multipart/form-data; boundary=" + "y" * 200),
    Shape("multipart with a boundary over the parser's cap", b"--a\r\n", 400, "INVALID_REQUEST",
          "boundary is over 256 bytes", content_type="multipart/form-data; boundary=" + "a" * 5000),
    Shape("multipart with a non-ASCII boundary", b"--\xff\xfe\r\n", 400, "INVALID_REQUEST",
          "multipart/form-data", content_type="multipart/form-data; boundary=\xff\xfe"),
    Shape("multipart of binary noise", b"\x00\xff" * 1000, 400, "INVALID_REQUEST",
          "malformed multipart/form-data", content_type="multipart/form-data; boundary=zz"),
    Shape("multipart with a header over the cap",
          b'--zz\r\ncontent-disposition: form-data; name="' + b"a" * 200_000
          + b'"\r\n\r\nx\r\n--zz--\r\n',
          400, "INVALID_REQUEST", "malformed multipart/form-data",
          content_type="multipart/form-data; boundary=zz"),
    Shape("multipart cut before its closing boundary",
          b'--zz\r\ncontent-disposition: form-data; name="format"\r\n\r\ntext\r\n', 400,
          "INVALID_REQUEST", "closing boundary", content_type="multipart/form-data; boundary=zz"),
    # The other routes that read a JSON body (their 16 KiB cap admits ~8,000 levels).
    Shape("locate body nested 5,000 deep", arrays(5000).encode(), 400, "INVALID_REQUEST",
          "invalid locate request", path="/v1/locate"),
    Shape("locate text nested 5,000 deep", f'{{"text":{arrays(5000)}}}'.encode(), 400,
          "INVALID_REQUEST", "at `$.text`", path="/v1/locate"),
    Shape("locate invalid UTF-8", b'{"text":"\xff"}', 400, "INVALID_REQUEST",
          "locate request is not valid JSON", path="/v1/locate"),
    Shape("erase reason nested 5,000 deep", f'{{"reason":{arrays(5000)}}}'.encode(), 400,
          "INVALID_REQUEST", "at `$.reason`", path="/v1/sources/{source}/erase"),
    Shape("erase body not JSON", b"\xff", 400, "INVALID_REQUEST",
          "erase request is not valid JSON", path="/v1/sources/{source}/erase"),
    Shape("retire reason nested 5,000 deep", f'{{"reason":{arrays(5000)}}}'.encode(), 400,
          "INVALID_REQUEST", "at `$.reason`", method="DELETE", path="/v1/sources/{source}"),
    Shape("retire body a deep array", arrays(5000).encode(), 400, "INVALID_REQUEST",
          "invalid retire request", method="DELETE", path="/v1/sources/{source}"),
    Shape("retire body not JSON", b"\xff", 400, "INVALID_REQUEST",
          "retire request is not valid JSON", method="DELETE", path="/v1/sources/{source}"),
    # A chunk cursor with digits int() refuses ("²" is a digit to str.isdigit).
    Shape("chunk cursor of superscript digits", b"", 400, "INVALID_REQUEST",
          "cursor is not one this listing returned", method="GET",
          path="/v1/sources/{source}/versions/{tx}/chunks",
          params={"cursor": base64.urlsafe_b64encode("²:2048:0:section".encode()).decode()}),
]  # fmt: skip


@dataclass
class Stored:
    """What the module stored before the battery."""

    source: str
    tx: int
    rows: dict[str, list[tuple[Any, ...]]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("bad-input")
    with ServerProcess(write_config(folder, workers={"in_process": []})) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    key = server.create_key("bad", "input")
    with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=60) as c:
        yield c


def _rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table but :data:`_VOLATILE`, sorted (read-only)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        tables = [
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if name not in _VOLATILE and not name.startswith("sqlite_")
        ]
        return {
            t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables
        }


@pytest.fixture(scope="module")
def stored(server: ServerProcess, client: httpx.Client) -> Stored:
    """A ``format=json`` source (applied in the request) and a text job (pending: no
    workers), then every table's rows."""
    applied = client.post(
        "/v1/ingest",
        json={"format": "json", "name": "kept.json", "content": '[{"title": "kept", "n": 1}]'},
    )
    assert applied.status_code == 201, applied.text
    queued = client.post(
        "/v1/ingest", json={"format": "text", "name": "kept.txt", "content": "kept"}
    )
    assert queued.status_code == 202, queued.text
    body = applied.json()
    # The search index catches up in the background: the snapshot waits for it, or the
    # indexer's rows would land after it and look like a write of the battery.
    for _ in range(600):
        pending = client.get("/v1/search", params={"q": "kept"}).json()["indexPending"]
        if pending == 0:
            break
        time.sleep(0.05)
    assert pending == 0, "the search index never caught up with the stored source"
    return Stored(body["sourceId"], body["sourceVersionTx"], _rows(server.db))


@pytest.mark.parametrize("shape", SHAPES, ids=[s.label for s in SHAPES])
def test_bad_input_gets_its_typed_4xx(client: httpx.Client, stored: Stored, shape: Shape) -> None:
    path = shape.path.format(source=stored.source, tx=stored.tx)
    answer = client.request(
        shape.method, path, content=shape.body or None, params=shape.params,
        headers={b"content-type": shape.content_type.encode("latin-1")},
    )  # fmt: skip
    assert answer.status_code == shape.status, answer.text
    error = answer.json()["error"]
    assert error["code"] == shape.code, error
    assert shape.says in error["message"], error


def test_no_server_error_was_logged(server: ServerProcess, stored: Stored) -> None:
    """Runs after the battery: no request of the module answered 5xx, none was logged as an
    unexpected error."""
    lines = [json.loads(line) for line in server.log_text().splitlines() if line.startswith("{")]
    assert not [e for e in lines if e.get("event") == "unhandled_error"]
    answered = [e["status"] for e in lines if e.get("event") == "request"]
    assert len(answered) >= len(SHAPES)
    assert all(status < 500 for status in answered), sorted(set(answered))


def test_nothing_stored_before_changed_and_check_is_clean(
    server: ServerProcess, client: httpx.Client, stored: Stored
) -> None:
    assert _rows(server.db) == stored.rows
    source = client.get(f"/v1/sources/{stored.source}")
    assert source.status_code == 200 and source.json()["state"] != "retired", source.text
    result = telha_check(server.config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "telha check: OK, no violations" in result.stdout
