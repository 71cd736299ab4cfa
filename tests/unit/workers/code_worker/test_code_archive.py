"""code_worker archive fan-out: a ``.zip``/``.tar.gz`` of source files is a MANIFEST
with one child job per source file whose FILE id the manifest already names; hostile paths
and links are refused; file-count and size limits are ``resource_limit``."""

from __future__ import annotations

import base64
import io
import json
import tarfile
import zipfile
from typing import Any

import blake3
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


def _failure(raw: bytes, name: str, options: dict[str, Any] | None = None) -> str:
    with pytest.raises(Exception) as failure:
        _run(raw, name, options)
    return classify(failure.value)[0]


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    return buf.getvalue()


def _tar(files: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mtime = len(data), 0
            t.addfile(info, io.BytesIO(data))
        for path, target in (links or {}).items():
            info = tarfile.TarInfo(path)
            info.type, info.linkname = tarfile.SYMTYPE, target
            t.addfile(info)
    return buf.getvalue()


def _corpus() -> dict[str, bytes]:
    root = CORPUS / "code"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob("*/*"))}


@pytest.mark.parametrize(("name", "pack"), [("code.zip", _zip), ("code.tar.gz", _tar)])
def test_archive_fans_out_one_child_per_source_file(name: str, pack: Any) -> None:
    files = {**_corpus(), "README.md": b"# not code\n"}
    out = _run(pack(files), name, {"repo": "corpus"})
    (manifest,) = out["nodes"]
    assert manifest["labels"] == ["MANIFEST"]
    sources = sorted(_corpus())
    assert manifest["properties"]["files"] == sources
    assert manifest["properties"]["file_count"] == len(sources) == out["stats"]["files"]
    assert out["stats"]["skipped_files"] == 1  # README.md
    text = out["canonicalText"].encode()
    assert [text[s["start"] : s["end"]].decode() for s in out["spans"]] == sources
    children = out["childJobs"]
    assert [c["name"] for c in children] == [f"{name}/{p}" for p in sources]
    edges = out["relationships"]
    for ordinal, (child, edge) in enumerate(zip(children, edges, strict=True)):
        path = child["options"]["path"]
        assert child["format"] == "code" and child["options"]["repo"] == "corpus"
        content = base64.b64decode(child["contentB64"])
        assert content == files[path]
        assert edge["type"] == "CONTAINS" and edge["properties"] == {"ord": ordinal, "path": path}
        # The child's own job creates exactly the FILE node the manifest points at.
        projected = _run(content, child["name"], child["options"])
        assert projected["nodes"][0]["id"] == edge["toId"]
        assert projected["nodes"][0]["properties"]["path"] == path


def test_archive_is_deterministic_and_last_copy_wins() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z, pytest.warns(UserWarning, match="Duplicate name"):
        z.writestr("b.py", "x = 1\n")
        z.writestr("a.py", "def f():\n    pass\n")
        z.writestr("b.py", "x = 2\n")
    raw = buf.getvalue()
    first, second = _run(raw, "dup.zip"), _run(raw, "dup.zip")
    digest = blake3.blake3(json.dumps(first, sort_keys=True).encode()).hexdigest()
    assert digest == blake3.blake3(json.dumps(second, sort_keys=True).encode()).hexdigest()
    assert first["nodes"][0]["properties"]["files"] == ["a.py", "b.py"]
    assert base64.b64decode(first["childJobs"][1]["contentB64"]) == b"x = 2\n"
    assert first["nodes"][0]["properties"]["repo"] == "dup.zip"  # no options.repo


@pytest.mark.parametrize(
    "raw",
    [
        _zip({"ok.py": b"", "../evil.py": b"x = 1\n"}),
        _zip({"/etc/evil.py": b"x = 1\n"}),
        _zip({"C:/evil.py": b"x = 1\n"}),
        _tar({"src/../../evil.py": b"x = 1\n"}),
        _tar({"ok.py": b""}, links={"src/link.py": "../../etc/passwd"}),
        _tar({"ok.py": b""}, links={"link.py": "/etc/passwd"}),
    ],
    ids=["zip-dotdot", "zip-absolute", "zip-drive", "tar-dotdot", "tar-symlink-out", "tar-abs"],
)
def test_path_traversal_refuses_the_archive(raw: bytes) -> None:
    assert _failure(raw, "evil.tar.gz").startswith("corrupt_input: path traversal")


def test_a_link_inside_the_archive_is_skipped_not_refused() -> None:
    out = _run(_tar({"src/a.py": b"x = 1\n"}, links={"src/b.py": "../src/a.py"}), "l.tgz")
    assert out["nodes"][0]["properties"]["files"] == ["src/a.py"]
    assert out["stats"]["skipped_files"] == 1


def test_limits_are_resource_limit() -> None:
    raw = _zip({f"m{i}.py": b"x = 1\n" for i in range(3)})
    assert _failure(raw, "a.zip", {"max_files": 2}).startswith("resource_limit: archive: 3")
    assert _failure(raw, "a.zip", {"max_bytes": 10}).startswith("resource_limit: archive: 18")
    assert _failure(raw, "a.zip", {"max_files": 0}).startswith("corrupt_input: options.max_files")
    assert _run(raw, "a.zip", {"max_files": 3})["stats"]["files"] == 3


def test_bad_archives_and_options() -> None:
    assert _failure(b"PK\x03\x04 not really", "x.zip").startswith("corrupt_input: not a readable")
    assert _failure(b"just text", "x.tar").startswith("corrupt_input: not a readable")
    # options.language: the bytes are one source file, as asked (a zip is not UTF-8 text).
    zipped = _zip({"a.py": b"\xff"})
    assert _failure(zipped, "a.zip", {"language": "python"}).startswith("corrupt_input: not UTF-8")
    assert _failure(_zip({"a.py": b""}), "a.zip", {"path": "x"}).startswith(
        "unsupported_feature: option"
    )
