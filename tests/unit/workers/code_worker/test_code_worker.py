"""code_worker: every corpus source file has its documented
outcome; spans slice to the exact definition text (CRLF sources too); deterministic FILE ids;
syntax errors are counted, not fatal."""

from __future__ import annotations

import json
from typing import Any

import code_worker
import pytest

from telha.domain.submission import decode_submission, to_projection
from tests.conftest import CORPUS
from workers_common import Job, classify


def _run(raw: bytes, name: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    out = code_worker.handle(Job("id", "ingest:code", "code", name, raw, None, options or {}, 0,
                                 "t", "o"))  # fmt: skip
    to_projection(decode_submission(json.dumps(out).encode()))  # core accepts it
    return out


# Per corpus file: definitions by label, distinct imported modules, syntax errors.
EXPECTED: dict[str, tuple[dict[str, int], int, int]] = {
    "go/letter_test.go": ({"FUNCTION": 16, "STRUCT": 1}, 6, 0),
    "go/no_newline_at_eof.go": ({"FUNCTION": 1}, 0, 0),
    "js/text-editor-component.js": ({"CLASS": 13, "FUNCTION": 12, "METHOD": 237}, 8, 0),
    "python/crlf-line-endings.py": ({}, 0, 0),
    "python/mixed-spaces-tabs.py": ({"FUNCTION": 1}, 0, 0),
    "python/python3.8_grammar.py": ({"CLASS": 26, "FUNCTION": 90, "METHOD": 93}, 10, 0),
    "rust/ast.rs": (
        {"ENUM": 46, "FUNCTION": 2, "IMPL": 47, "METHOD": 84, "MODULE": 1, "STRUCT": 50}, 21, 0,
    ),
    "rust/weird-exprs.rs": (
        {"FUNCTION": 32, "IMPL": 1, "METHOD": 1, "MODULE": 2, "STRUCT": 2}, 7, 0,
    ),
}  # fmt: skip


def test_every_corpus_file_has_an_expectation() -> None:
    files = {f"{p.parent.name}/{p.name}" for p in (CORPUS / "code").glob("*/*")}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_corpus_file(rel: str) -> None:
    definitions, imports, errors = EXPECTED[rel]
    raw = (CORPUS / "code" / rel).read_bytes()
    out = _run(raw, rel)
    stats = out["stats"]
    assert (stats["definitions"], stats["imports"], stats["syntax_errors"]) == (
        definitions, imports, errors,
    )  # fmt: skip
    text = out["canonicalText"].encode()
    for node in out["nodes"][1:]:  # every definition's span is its own source text
        span = out["spans"][node["spanRefs"][0]]
        piece = text[span["start"] : span["end"]].decode()
        assert node["properties"]["name"] in piece or node["properties"]["name"] == "<anonymous>"
        assert (
            piece.count("\n") == node["properties"]["end_line"] - node["properties"]["start_line"]
        )
    assert _run(raw, rel) == out  # deterministic


def test_crlf_source_spans_slice_to_the_definition() -> None:
    raw = b"import os\r\n\r\nclass A:\r\n    def f(self):\r\n        return 1\r\n"
    out = _run(raw, "a.py")
    text = out["canonicalText"].encode()
    assert b"\r" not in text
    spans = {n["properties"]["qualified_name"]: out["spans"][n["spanRefs"][0]]
             for n in out["nodes"][1:]}  # fmt: skip
    method = spans["A.f"]
    assert text[method["start"] : method["end"]] == b"def f(self):\n        return 1"
    labels = [n["labels"][0] for n in out["nodes"]]
    assert labels == ["FILE", "CLASS", "METHOD"]
    (imp,) = [r for r in out["relationships"] if r["type"] == "IMPORTS"]
    assert imp["properties"] == {"module": "os"}


def test_file_id_is_stable_per_repo_and_path_and_errors_are_counted() -> None:
    a = _run(b"def f(:\n    pass\n", "pkg/m.py", {"repo": "r"})
    b = _run(b"def g():\n    pass\n", "pkg/m.py", {"repo": "r"})
    assert a["nodes"][0]["id"] == b["nodes"][0]["id"]  # a new version upserts the FILE
    assert a["nodes"][0]["id"] != _run(b"x = 1\n", "pkg/m.py", {"repo": "other"})["nodes"][0]["id"]
    assert a["stats"]["syntax_errors"] >= 1 and b["stats"]["syntax_errors"] == 0


@pytest.mark.parametrize(
    ("raw", "name", "options", "reason"),
    [
        (b"x", "notes.unknown", {}, "unsupported_feature: language"),
        (b"\xff\xfe\x00", "m.py", {}, "corrupt_input"),
        (b"x", "m.py", {"lang": "py"}, "unsupported_feature: option"),
    ],
)
def test_bad_inputs(raw: bytes, name: str, options: dict[str, Any], reason: str) -> None:
    with pytest.raises(Exception) as failure:
        _run(raw, name, options)
    assert classify(failure.value)[0].startswith(reason)


def test_language_option_overrides_the_extension() -> None:
    out = _run(b"fn main() {}\n", "script.txt", {"language": "rust"})
    assert out["stats"]["language"] == "rust" and out["stats"]["definitions"] == {"FUNCTION": 1}


def test_same_file_calls() -> None:
    src = (
        b"def helper(x):\n    return x\n\ndef main():\n    return helper(1) + len([])\n\n"
        b"class A:\n    def m(self):\n        return self.n()\n"
        b"    def n(self):\n        return main()\n\nmain()\n"
    )
    out = _run(src, "m.py")
    names = {i: n["properties"].get("qualified_name", "FILE") for i, n in enumerate(out["nodes"])}
    calls = sorted(
        (names[r["fromRef"]], names[r["toRef"]])
        for r in out["relationships"]
        if r["type"] == "CALLS"
    )
    # len() is not defined in the file: no edge (calls across files are not resolved).
    assert calls == [("A.m", "A.n"), ("A.n", "main"), ("FILE", "main"), ("main", "helper")]
    assert out["stats"]["calls"] == 4


@pytest.mark.parametrize(
    ("source", "lines"), [("", 0), ("x = 1", 1), ("x = 1\n", 1), ("x = 1\n\ny = 2\n", 3)]
)
def test_file_lines_count_lines_not_newlines(source: str, lines: int) -> None:
    assert _run(source.encode(), "m.py")["nodes"][0]["properties"]["lines"] == lines
