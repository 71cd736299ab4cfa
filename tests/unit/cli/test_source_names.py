"""``telha ingest``'s source names (docs/cli-and-client.md, "Source names"): a file's path
relative to the root, however the file was named."""

from __future__ import annotations

from pathlib import Path

import pytest

from telha.cli.ingest import source_name


@pytest.mark.parametrize(
    ("path", "root", "name"),
    [
        ("pdf/simple1.pdf", ".", "pdf/simple1.pdf"),
        ("./pdf/../pdf/simple1.pdf", ".", "pdf/simple1.pdf"),
        ("corpus/pdf/simple1.pdf", "corpus", "pdf/simple1.pdf"),
        ("corpus/pdf/simple1.pdf", "corpus/", "pdf/simple1.pdf"),
        ("other/a.txt", "corpus", "../other/a.txt"),
        ("a.txt", "corpus/pdf", "../../a.txt"),
    ],
)
def test_names_are_relative_to_the_root(path: str, root: str, name: str) -> None:
    assert source_name(Path(path), Path(root)) == name


def test_an_absolute_path_names_the_same_as_a_relative_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rel = source_name(Path("pdf/simple1.pdf"), Path("."))
    absolute = source_name(tmp_path / "pdf" / "simple1.pdf", Path("."))
    rooted = source_name(tmp_path / "pdf" / "simple1.pdf", tmp_path)
    assert rel == absolute == rooted == "pdf/simple1.pdf"
