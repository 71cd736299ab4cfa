"""The ``folder`` connector's listing on real files (docs/connectors.md, "The folder kind"):
include/exclude patterns, symbolic links, markers and a root that is not there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from connectors.folder import FolderConnector
from connectors.sdk import ItemUnreadable, RemoteItem
from workers_common import TransientFailure


def _tree(root: Path) -> None:
    for rel in ("a.md", "notes/b.txt", "notes/drafts/c.txt", "img/d.png", "e.tmp"):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(rel)


def _ids(root: Path, **settings: object) -> list[str]:
    items = FolderConnector({"root": str(root), **settings}).list(None)
    return [i.external_id for i in items if isinstance(i, RemoteItem)]


def test_every_file_depth_first_in_name_order(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _ids(tmp_path) == ["a.md", "e.tmp", "img/d.png", "notes/b.txt", "notes/drafts/c.txt"]


def test_include_and_exclude(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _ids(tmp_path, include=["*.txt"]) == ["notes/b.txt", "notes/drafts/c.txt"]
    assert _ids(tmp_path, include=["*.txt"], exclude=["*/drafts/*"]) == ["notes/b.txt"]
    assert _ids(tmp_path, exclude=["*.tmp", "img/*"]) == [
        "a.md", "notes/b.txt", "notes/drafts/c.txt"
    ]  # fmt: skip


def test_links(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside.txt"
    root.mkdir()
    outside.write_text("secret")
    (root / "real.txt").write_text("real")
    (root / "inside-link.txt").symlink_to(root / "real.txt")
    (root / "outside-link.txt").symlink_to(outside)
    (root / "up.txt").symlink_to("../outside.txt")
    (root / "dangling.txt").symlink_to(root / "nope.txt")
    (root / "dir-link").symlink_to(root)
    assert _ids(root) == ["inside-link.txt", "real.txt"]
    connector = FolderConnector({"root": str(root)})
    escape = RemoteItem("../outside.txt", "../outside.txt", None, ref="../outside.txt")
    with pytest.raises(ItemUnreadable):
        connector.read(escape)
    assert connector.read(RemoteItem("real.txt", "real.txt", None, ref="real.txt")) == b"real"


def test_markers_and_acl(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("12345")
    os.utime(tmp_path / "f.txt", ns=(1, 1_700_000_000_123_456_789))
    (item,) = FolderConnector({"root": str(tmp_path)}).list(None)
    assert isinstance(item, RemoteItem)
    st = (tmp_path / "f.txt").stat()
    assert item.marker == f"1700000000123456789:5:{st.st_uid}:{st.st_gid}" and item.size == 5
    assert item.modified_us == 1_700_000_000_123_456
    assert item.acl is not None and [p.split(":")[0] for p in item.acl] == ["user", "group"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_chown_changes_the_marker_and_the_acl(tmp_path: Path) -> None:
    """A chown leaves mtime and size alone: the marker still changes, so the item is read
    again and its new ACL stored (an unchanged item's ACL is never rewritten)."""
    path = tmp_path / "f.txt"
    path.write_text("12345")
    connector = FolderConnector({"root": str(tmp_path)})
    (before,) = connector.list(None)
    mtime = path.stat().st_mtime_ns
    os.chown(path, 65534, 65534)
    os.utime(path, ns=(mtime, mtime))
    (after,) = connector.list(None)
    assert isinstance(before, RemoteItem) and isinstance(after, RemoteItem)
    assert before.marker != after.marker and before.acl != after.acl
    assert after.acl is not None and after.acl[0] in ("user:nobody", "user:65534")


def test_a_missing_root_is_transient(tmp_path: Path) -> None:
    with pytest.raises(TransientFailure):
        list(FolderConnector({"root": str(tmp_path / "gone")}).list(None))
