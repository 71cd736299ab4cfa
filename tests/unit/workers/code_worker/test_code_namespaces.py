"""Declarations inside inline modules and nested namespaces become nodes nested under their
module (code_worker.languages; docs/formats.md, "Code"): Rust, TypeScript, C#, C++."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.workers.code_worker.test_code_worker import _run


def _tree(out: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    """qualified name → (label, the qualified name of the node that CONTAINS it)."""
    nodes = out["nodes"]
    qual = [n["properties"].get("qualified_name") for n in nodes]
    parent: dict[int, int] = {}
    for rel in out["relationships"]:
        if rel["type"] == "CONTAINS" and "fromRef" in rel and "toRef" in rel:
            parent[rel["toRef"]] = rel["fromRef"]
    return {
        qual[i]: (n["labels"][0], qual[parent[i]] if i in parent else None)
        for i, n in enumerate(nodes)
        if n["labels"] != ["FILE"]
    }


RUST = b"""mod util {
    pub fn clamp(x: i32) -> i32 { x }
    mod inner {
        pub fn deep() {}
        struct S;
    }
}
mod elsewhere;
fn main() {}
"""
TS = b"""namespace Outer {
  export function f() {}
  export namespace Inner { export class C { m() {} } }
}
module M { function g() {} }
function top() {}
"""
CS = b"""using System;
namespace A.B {
  class C { C() {} void M() {} }
  namespace D { struct S {} enum E { X } }
}
"""
CS_FILE_SCOPED = b"namespace Top;\nclass K { void m() {} }\ninterface I {}\n"
CPP = b"""namespace a {
namespace b { int f(int x) { return x; } class K { void m() {} }; class Fwd; }
struct S { int g(); };
}
void a::b::K::m2() {}
"""
CASES = {
    "lib.rs": (RUST, {
        "util": ("MODULE", None), "util.clamp": ("FUNCTION", "util"),
        "util.inner": ("MODULE", "util"), "util.inner.deep": ("FUNCTION", "util.inner"),
        "util.inner.S": ("STRUCT", "util.inner"), "main": ("FUNCTION", None),
    }),
    "a.ts": (TS, {
        "Outer": ("MODULE", None), "Outer.f": ("FUNCTION", "Outer"),
        "Outer.Inner": ("MODULE", "Outer"), "Outer.Inner.C": ("CLASS", "Outer.Inner"),
        "Outer.Inner.C.m": ("METHOD", "Outer.Inner.C"), "M": ("MODULE", None),
        "M.g": ("FUNCTION", "M"), "top": ("FUNCTION", None),
    }),
    "a.cs": (CS, {
        "A.B": ("MODULE", None), "A.B.C": ("CLASS", "A.B"), "A.B.C.C": ("METHOD", "A.B.C"),
        "A.B.C.M": ("METHOD", "A.B.C"), "A.B.D": ("MODULE", "A.B"),
        "A.B.D.S": ("STRUCT", "A.B.D"), "A.B.D.E": ("ENUM", "A.B.D"),
    }),
    "b.cs": (CS_FILE_SCOPED, {
        "Top": ("MODULE", None), "Top.K": ("CLASS", "Top"), "Top.K.m": ("METHOD", "Top.K"),
        "Top.I": ("INTERFACE", "Top"),
    }),
    "a.cpp": (CPP, {
        "a": ("MODULE", None), "a.b": ("MODULE", "a"), "a.b.f": ("FUNCTION", "a.b"),
        "a.b.K": ("CLASS", "a.b"), "a.b.K.m": ("METHOD", "a.b.K"), "a.S": ("STRUCT", "a"),
        "m2": ("FUNCTION", None),
    }),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_declarations_nest_under_their_module(name: str) -> None:
    raw, expected = CASES[name]
    out = _run(raw, name)
    assert _tree(out) == expected
    assert out["stats"]["syntax_errors"] == 0


def test_rust_mod_without_body_is_an_import() -> None:
    out = _run(RUST, "lib.rs")
    assert [r["properties"]["module"] for r in out["relationships"] if r["type"] == "IMPORTS"] == [
        "elsewhere"
    ]
