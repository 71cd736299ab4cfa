"""The ``folder`` connector (docs/connectors.md, "folder"): a directory tree.

Settings: ``root`` (absolute), ``include``/``exclude`` (``fnmatch`` patterns over the path
relative to the root, ``/``-separated; ``*`` also crosses ``/``; no include: every file).
External id: the path relative to the root. Change marker: ``<mtime ns>:<size>:<uid>:<gid>``
from one ``lstat`` (no byte is read to tell an unchanged file; the owner and group are in it
because a ``chown`` leaves the mtime alone, and an item's ACL is only rewritten when the
item is reported changed). ACL: ``user:<owner>`` and ``group:<group>`` from POSIX
ownership (names, else numeric ids): a request acting for principals sees the file's source
only when it names its owner or group (docs/rest-api.md, "Principals").

Symbolic links: a link to a directory is never followed (no loops, no escape); a link to a
file is listed only when its target resolves inside the root. A directory that cannot be
listed ends the listing incomplete (:class:`~connectors.sdk.ListingIncomplete`): the run
retires nothing. A file is opened with ``O_NOFOLLOW`` after its path is checked to stay in
the root.
"""

from __future__ import annotations

import fnmatch
import functools
import grp
import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from connectors.sdk import ItemUnreadable, ListingIncomplete, RemoteItem, Removed
from workers_common import TransientFailure

__all__ = ["FolderConnector"]


@functools.lru_cache(maxsize=4096)
def _principal(kind: str, ident: int) -> str:
    """``user:<name>``/``group:<name>`` of a uid/gid (cached: a listing asks once per file,
    and a lookup reads the user and group databases)."""
    try:
        name = pwd.getpwuid(ident).pw_name if kind == "user" else grp.getgrgid(ident).gr_name
    except KeyError:
        name = str(ident)
    return f"{kind}:{name}"


class FolderConnector:
    """A directory tree as a :class:`~connectors.sdk.Connector` (a full listing every run).

    :raises TransientFailure: (from ``list``) the root is missing or not a directory (an
        unmounted share: retried; nothing retired).
    """

    def __init__(self, settings: dict[str, Any]) -> None:
        self._root = Path(settings["root"])
        self._include = list(settings.get("include") or [])
        self._exclude = list(settings.get("exclude") or [])

    def full_listing(self, checkpoint: str | None) -> bool:
        """Always: a walk lists everything."""
        return True

    def next_checkpoint(self) -> str | None:
        """None: a folder has no delta token (markers tell what changed)."""
        return None

    def _wanted(self, rel: str) -> bool:
        if self._include and not any(fnmatch.fnmatchcase(rel, p) for p in self._include):
            return False
        return not any(fnmatch.fnmatchcase(rel, p) for p in self._exclude)

    def list(self, checkpoint: str | None) -> Iterator[RemoteItem | Removed]:
        """Every wanted file under the root, depth first, in name order."""
        if not self._root.is_dir():
            raise TransientFailure(f"settings.root: {self._root} is not a directory")
        root_real = os.path.realpath(self._root)
        stack = [""]
        while stack:
            rel_dir = stack.pop()
            path = os.path.join(root_real, rel_dir) if rel_dir else root_real
            try:
                with os.scandir(path) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as exc:
                raise ListingIncomplete(f"cannot list {rel_dir or '.'}: {exc.strerror}") from None
            subdirs = []
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    raise ListingIncomplete(f"cannot stat {rel}: {exc.strerror}") from None
                if stat.S_ISDIR(st.st_mode):
                    subdirs.append(rel)
                    continue
                if stat.S_ISLNK(st.st_mode):
                    target = os.path.realpath(entry.path)
                    if not target.startswith(root_real + os.sep) or not os.path.isfile(target):
                        continue  # outside the root, dangling, or a directory
                    st = os.stat(target)
                elif not stat.S_ISREG(st.st_mode):
                    continue
                if (self._include or self._exclude) and not self._wanted(rel):
                    continue
                yield RemoteItem(
                    external_id=rel, name=rel,
                    marker=f"{st.st_mtime_ns}:{st.st_size}:{st.st_uid}:{st.st_gid}",
                    modified_us=st.st_mtime_ns // 1000, size=st.st_size,
                    acl=[_principal("user", st.st_uid), _principal("group", st.st_gid)],
                    ref=rel,
                )  # fmt: skip
            stack.extend(reversed(subdirs))

    def read(self, item: RemoteItem) -> bytes:
        """The file's bytes (its path re-checked to stay inside the root).

        :raises ItemUnreadable: it escapes the root, vanished or cannot be opened.
        """
        root_real = os.path.realpath(self._root)
        path = os.path.realpath(os.path.join(root_real, item.ref))
        if not path.startswith(root_real + os.sep):
            raise ItemUnreadable(f"{item.external_id}: outside the root")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            raise ItemUnreadable(f"{item.external_id}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as f:
            return f.read()
