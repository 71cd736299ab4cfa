"""The state cell of ``telha ingest``'s table for a file with child jobs
(docs/cli-and-client.md, "Child jobs"): what did not make it in, counted against all of
them, named for the parent's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from telha.cli.children import Children, children_note, noun
from telha.cli.ingest import _File, state_cell


@pytest.mark.parametrize(
    ("counts", "hint", "fmt", "note"),
    [
        ({}, "", "eml", ""),
        ({"completed": 3}, "", "eml", ""),
        ({"completed": 1, "dead": 2}, "", "eml", "2 of 3 attachments dead"),
        ({"completed": 1, "dead": 1, "cancelled": 1}, "", "msg",
         "1 of 3 attachments dead, 1 cancelled"),
        ({"cancelled": 2}, "", "code", "2 of 2 files cancelled"),
        ({"completed": 1, "pending": 1}, "no worker polls format pdf", "eml",
         "1 of 2 attachments pending (no worker polls format pdf)"),
        ({"dead": 1}, "", "web", "1 of 1 child jobs dead"),
    ],
)  # fmt: skip
def test_children_note(counts: dict[str, int], hint: str, fmt: str, note: str) -> None:
    assert children_note(Children(counts, hint), fmt) == note


def test_state_cell_composes_the_state_and_its_children() -> None:
    f = _File(Path("a.eml"), "a.eml", "eml", state="completed")
    assert state_cell(f) == "completed"  # no children waited for
    f.children = Children({"completed": 2, "dead": 1})
    assert state_cell(f) == "completed, 1 of 3 attachments dead"
    f.children = Children({"completed": 3})
    assert state_cell(f) == "completed"
    assert noun(None) == "child jobs"
