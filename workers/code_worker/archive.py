"""Archive fan-out for ``format=code`` (docs/formats.md): a ``.zip`` or ``.tar`` (plain, gzip, bzip2
or xz) becomes one child ``code`` job per source file, and the archive's own version is a
``MANIFEST`` listing them.

**Reading** uses the standard library (:mod:`zipfile`, :mod:`tarfile`). Members are taken in
path order (a path listed twice: the last copy, as extraction would leave it). Only regular
files whose extension names a language :data:`code_worker.LANGUAGES` knows become children;
directories are skipped silently, other files (and links, devices) are counted in
``stats.skipped_files``.

**Refused.** A member path that is absolute, has a drive letter or a ``..`` part, or a link
member pointing outside the archive: the whole archive is ``corrupt_input`` (``path
traversal: <member>``), since ingesting the rest would hide that the archive is hostile. More
than ``options.max_files`` source files (default 10,000, core's cap on child jobs) or more
than ``options.max_bytes`` uncompressed source bytes in total (default 64 MiB; sizes are
checked as declared before reading and again as read, so a lying header cannot inflate
memory): ``resource_limit``. Bytes that are not a readable archive: ``corrupt_input``.

**Projection.** Canonical text: one line per child, its path. A ``MANIFEST`` node (id: the
job's ``root_node_id``, else uuid5 of the archive's name, so every version of the archive
keeps one manifest; ``name``, ``repo``, ``files``: the paths, ``file_count``, ``bytes``)
holds every line; each line is a span of kind ``body``. A ``CONTAINS`` edge (``ord``,
``path``) goes from the manifest to the ``FILE`` node id each child's job will create (uuid5
of repo + path, :func:`code_worker.file_id`), dangling until that child is applied. Child jobs
are named ``<archive name>/<path>`` (a new archive version re-ingests only the files whose
bytes changed: request-level dedup) with options ``repo`` (``options.repo``, else the
archive's name) and ``path``. A new archive version that no longer holds a path retires that
child's source (:mod:`telha.storage.versions.members`).
"""

from __future__ import annotations

import posixpath
import tarfile
import uuid
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from workers_common import CorruptInput, IngestionResultBuilder, Job, ResourceLimit

__all__ = [
    "ARCHIVE_OPTIONS",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILES",
    "fan_out",
    "is_archive",
    "manifest_id",
]

DEFAULT_MAX_FILES = 10_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Options an archive job accepts besides ``repo``.
ARCHIVE_OPTIONS = frozenset({"max_files", "max_bytes"})
#: Namespace of the MANIFEST node ids (uuid5).
MANIFEST_NAMESPACE = uuid.UUID("9a3e6c1d-4f2b-5e7a-8c90-6d616e696621")
_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


def is_archive(name: str, head: bytes) -> bool:
    """Whether a ``code`` job is an archive: by its name's suffix, or by its first bytes
    (``head``: at least 512 for tar's ``ustar`` magic at offset 257; zip's ``PK\\3\\4``;
    gzip, bzip2 and xz magic numbers)."""
    if name.lower().endswith(_SUFFIXES):
        return True
    magic = (b"PK\x03\x04", b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
    return head.startswith(magic) or head[257:262] == b"ustar"


def manifest_id(name: str) -> str:
    """The ``MANIFEST`` node id of the archive ingested as source ``name`` (uuid5)."""
    return str(uuid.uuid5(MANIFEST_NAMESPACE, f"manifest:{name}"))


@dataclass(frozen=True, slots=True)
class _Member:
    path: str
    size: int
    read: Callable[[], bytes]


def _safe_path(name: str) -> str:
    """The member's path, normalized (``./`` dropped, backslashes as separators).

    :raises CorruptInput: absolute, a drive letter, or a ``..`` part.
    """
    path = name.replace("\\", "/")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if path.startswith("/") or (parts and parts[0].endswith(":")) or ".." in parts:
        raise CorruptInput(f"path traversal: archive member {name!r}")
    return "/".join(parts)


def _capped(stream: IO[bytes], limit: int, path: str) -> bytes:
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise ResourceLimit(f"archive: {path} holds more bytes than its header declares")
    return data


def _zip_members(f: IO[bytes], skipped: list[str]) -> Iterator[_Member]:
    archive = zipfile.ZipFile(f)
    for info in archive.infolist():
        path = _safe_path(info.filename)
        if info.is_dir() or not path:
            continue
        if (info.external_attr >> 16) & 0o170000 == 0o120000:  # a symlink entry
            skipped.append(path)
            continue

        def read(info: zipfile.ZipInfo = info, path: str = path) -> bytes:
            with archive.open(info) as stream:
                return _capped(stream, info.file_size, path)

        yield _Member(path, info.file_size, read)


def _tar_members(f: IO[bytes], skipped: list[str]) -> Iterator[_Member]:
    # Not closed here: members are read later, while the caller keeps ``f`` open.
    archive = tarfile.open(fileobj=f, mode="r:*")  # noqa: SIM115
    for info in archive.getmembers():
        path = _safe_path(info.name)
        if info.isdir() or not path:
            continue
        if info.issym() or info.islnk():  # a link must stay inside the archive
            base = "" if info.islnk() else posixpath.dirname(path)
            target = posixpath.normpath(posixpath.join(base, info.linkname.replace("\\", "/")))
            if info.linkname.startswith("/") or target == ".." or target.startswith("../"):
                raise CorruptInput(f"path traversal: archive link {path!r} → {info.linkname!r}")
        if not info.isfile():
            skipped.append(path)
            continue

        def read(info: tarfile.TarInfo = info, path: str = path) -> bytes:
            stream = archive.extractfile(info)
            return _capped(stream, info.size, path) if stream is not None else b""

        yield _Member(path, info.size, read)


def _members(f: IO[bytes], skipped: list[str]) -> list[_Member]:
    """Every regular member of the archive open as ``f``, last copy of a path wins, in path
    order; their ``read`` works while ``f`` is open.

    :raises CorruptInput: unreadable, or a traversal.
    """
    is_zip = zipfile.is_zipfile(f)
    f.seek(0)
    try:
        found = list(_zip_members(f, skipped) if is_zip else _tar_members(f, skipped))
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise CorruptInput(f"not a readable archive: {type(exc).__name__}: {exc}") from None
    by_path = {m.path: m for m in found}
    return [by_path[p] for p in sorted(by_path)]


def _limit(job: Job, key: str, default: int) -> int:
    value = job.options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CorruptInput(f"options.{key} must be a positive integer")
    return value


def fan_out(
    job: Job, is_source: Callable[[str], bool], file_id: Callable[[str, str], str]
) -> dict[str, Any]:
    """The MANIFEST submission of archive ``job`` with one child job per source file
    (module docstring).

    :param is_source: whether a member path is a file the code worker projects.
    :param file_id: ``(repo, path) → FILE node id`` as the child's job will mint it.
    :raises CorruptInput: unreadable archive, path traversal, a bad limit option.
    :raises ResourceLimit: over ``max_files`` or ``max_bytes``.
    """
    max_files = _limit(job, "max_files", DEFAULT_MAX_FILES)
    max_bytes = _limit(job, "max_bytes", DEFAULT_MAX_BYTES)
    repo = str(job.options.get("repo") or job.name)
    with job.open() as f:
        return _project(job, f, repo, max_files, max_bytes, is_source, file_id)


def _project(
    job: Job,
    f: IO[bytes],
    repo: str,
    max_files: int,
    max_bytes: int,
    is_source: Callable[[str], bool],
    file_id: Callable[[str, str], str],
) -> dict[str, Any]:
    skipped: list[str] = []
    sources: list[_Member] = []
    for member in _members(f, skipped):
        if is_source(member.path):
            sources.append(member)
        else:
            skipped.append(member.path)
    if len(sources) > max_files:
        raise ResourceLimit(f"archive: {len(sources)} source files is over max_files {max_files}")
    declared = sum(m.size for m in sources)
    if declared > max_bytes:
        raise ResourceLimit(f"archive: {declared} source bytes is over max_bytes {max_bytes}")
    b = IngestionResultBuilder()
    spans = []
    for i, member in enumerate(sources):
        if i:
            b.add_text("\n")
        spans.append(b.add_span_text(member.path, "body"))
    paths = [m.path for m in sources]
    props = {"name": job.name, "repo": repo, "files": paths, "file_count": len(paths),
             "bytes": declared}  # fmt: skip
    manifest = b.add_node(
        ["MANIFEST"], props, spans=spans, id=job.root_node_id or manifest_id(job.name)
    )
    for ordinal, member in enumerate(sources):
        try:
            content = member.read()
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            raise CorruptInput(f"archive: {member.path}: {type(exc).__name__}: {exc}") from None
        b.add_child_job(
            "code", f"{job.name}/{member.path}", {"repo": repo, "path": member.path}, content
        )
        b.add_relationship(
            "CONTAINS",
            from_ref=manifest,
            to_id=file_id(repo, member.path),
            properties={"ord": ordinal, "path": member.path},
        )
    b.set_stats({"files": len(sources), "bytes": declared, "skipped_files": len(skipped)})
    return b.build()
