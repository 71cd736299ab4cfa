"""Which projection each format is read with now (docs/architecture.md, "Dedup, identity and
versions"): what request-level dedup and re-projection compare a version's fingerprint with.

Core learns a format's :class:`~workers_common.projection.ProjectionSpec` from the in-process
worker modules at start (:meth:`Projections.declare_modules`) and from every submission that
declares one (a remote worker's ``projection``, :meth:`Projections.declare`); ``json`` is
core's own. Where several workers read a format the highest projection version counts (a
remote worker of an older version makes versions that re-projection lists as outdated). A
format no worker has declared yet takes the spec of the source's latest version
(:meth:`Projections.spec_for`): its bytes and options are compared, never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import ModuleType

import msgspec

from workers_common.projection import ProjectionSpec, module_spec

__all__ = ["JSON_PROJECTION_VERSION", "JSON_SPEC", "Projections", "spec_of_identity"]

#: The JSON bypass's projection version (telha.ingest.json_projection): raise it whenever the
#: same JSON and options would project differently (record ids by ``options.id_key`` left
#: it at 1: without that option, which earlier versions did not have, nothing changed).
JSON_PROJECTION_VERSION = 1
#: The JSON bypass's spec (``SourceVersion.worker`` is its worker name).
JSON_SPEC = ProjectionSpec(
    "core:json-bypass", JSON_PROJECTION_VERSION, {"msgspec": msgspec.__version__}
)


def spec_of_identity(identity: bytes | None) -> ProjectionSpec | None:
    """The spec a stored identity JSON names (``None``: none stored, or not an identity)."""
    if identity is None:
        return None
    try:
        doc = msgspec.json.decode(identity)
        return ProjectionSpec(str(doc["worker"]), int(doc["projection"]), dict(doc["parsers"]))
    except (msgspec.DecodeError, KeyError, TypeError, ValueError):
        return None


class Projections:
    """Format → the newest :class:`ProjectionSpec` declared for it. Bounded by the formats
    (:data:`telha.ingest.request.KNOWN_FORMATS`): a spec of another format is ignored."""

    def __init__(self, formats: Iterable[str] | None = None) -> None:
        self._formats = frozenset(formats) if formats is not None else None
        self._specs: dict[str, ProjectionSpec] = {"json": JSON_SPEC}

    def declare(self, fmt: str, spec: ProjectionSpec) -> None:
        """``spec`` reads ``fmt``; it counts unless a higher projection version is known."""
        if self._formats is not None and fmt not in self._formats:
            return
        known = self._specs.get(fmt)
        if known is None or spec.version >= known.version:
            self._specs[fmt] = spec

    def declare_modules(self, modules: Mapping[str, ModuleType]) -> None:
        """The specs of in-process worker modules (``PROJECTION_VERSION``,
        ``parser_versions()``), one per format of their ``FORMATS``."""
        for name, module in modules.items():
            spec = module_spec(name, module)
            for fmt in getattr(module, "FORMATS", ()):
                self.declare(fmt, spec)

    def spec(self, fmt: str) -> ProjectionSpec | None:
        """The spec ``fmt`` is read with now; ``None``: no worker declared one yet."""
        return self._specs.get(fmt)

    def spec_for(self, fmt: str, latest_identity: bytes | None) -> ProjectionSpec:
        """The spec to expect for a request of ``fmt``: the declared one, else the one the
        source's latest version was read with, else version 0 of an unknown worker (which
        never matches a stored fingerprint: the bytes are read again)."""
        return (
            self.spec(fmt) or spec_of_identity(latest_identity) or ProjectionSpec("unknown", 0, {})
        )
