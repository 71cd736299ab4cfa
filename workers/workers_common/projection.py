"""What a worker declares about how it reads bytes: its projection version and the parser
library versions that shape its output (docs/architecture.md, "Dedup, identity and versions").

A worker module may set ``PROJECTION_VERSION`` (an int, 1 when absent: raise it whenever the
same bytes and options would project differently) and ``parser_versions()`` (the installed
versions of the libraries whose output it projects, ``{name: version}``). Core reads them from
an in-process module at start; a remote worker sends them with each submission
(``projection`` in the submission JSON, spliced in by the consumer, :func:`with_projection`).
Together with the format and the effective options (:func:`effective_options`) they are a
version's *identity*, whose BLAKE3 is its projection fingerprint.

Pure: no I/O, nothing from ``telha`` (workers import it).
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from workers_common.format_options import CORE_OPTIONS, FORMAT_OPTIONS, drop_nulls

__all__ = [
    "ProjectionSpec",
    "effective_options",
    "identity_json",
    "installed",
    "module_spec",
    "with_projection",
]


@dataclass(frozen=True, slots=True)
class ProjectionSpec:
    """How a worker reads its formats.

    :ivar worker: the worker's name (its module name, ``text_worker``; ``core:json-bypass``
        for core's JSON projection).
    :ivar version: its projection version (``PROJECTION_VERSION``; 0: a worker that declares
        none, which any declared version supersedes).
    :ivar parsers: ``{library: version}`` of the parsers that shape its output.
    """

    worker: str
    version: int
    parsers: Mapping[str, str] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        """The spec as the submission's ``projection`` object."""
        return {"worker": self.worker, "version": self.version, "parsers": dict(self.parsers)}


def installed(*names: str) -> dict[str, str]:
    """``{name: version}`` of the installed distributions ``names`` (``"absent"`` for one that
    is not installed)."""
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def module_spec(name: str, module: ModuleType) -> ProjectionSpec:
    """The spec a worker module declares (``PROJECTION_VERSION``, default 1;
    ``parser_versions()``, default none)."""
    version = int(getattr(module, "PROJECTION_VERSION", 1))
    versions = getattr(module, "parser_versions", None)
    parsers = dict(versions()) if callable(versions) else {}
    return ProjectionSpec(name, version, parsers)


def effective_options(fmt: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as the worker of ``fmt`` reads them: without ``null`` values and core's own
    options (``webhook``), with each declared option's default filled in where absent. A
    format without declared options (``json``) keeps what it was given."""
    kept = {k: v for k, v in drop_nulls(options).items() if k not in CORE_OPTIONS}
    for option in FORMAT_OPTIONS.get(fmt, ()):
        if option.default is not None and option.name not in kept:
            kept[option.name] = option.default
    return kept


def identity_json(spec: ProjectionSpec, fmt: str, options: Mapping[str, Any]) -> bytes:
    """A version's identity as canonical JSON (sorted keys, no spaces, UTF-8):
    ``{"format", "options", "parsers", "projection", "worker"}``; ``options`` are taken as
    effective already (:func:`effective_options`)."""
    doc = {
        "format": fmt,
        "options": dict(options),
        "parsers": dict(spec.parsers),
        "projection": spec.version,
        "worker": spec.worker,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def with_projection(body: bytes, spec: ProjectionSpec) -> bytes:
    """A submission's JSON ``body`` (an object) with the ``projection`` member first. A body
    that is not a JSON object, or names its own ``projection``, is returned as it is."""
    stripped = body.lstrip()
    if not stripped.startswith(b"{") or b'"projection"' in body[:4096]:
        return body
    member = json.dumps({"projection": spec.wire()}, separators=(",", ":")).encode()[:-1]
    rest = stripped[1:].lstrip()
    return member + rest if rest.startswith(b"}") else member + b"," + rest
