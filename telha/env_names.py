"""Stray ``TELHA_*`` environment variables (docs/operations.md, "Environment variables").

``telha serve`` reads ``TELHA_<SECTION>__<KEY>`` as configuration overrides
(:mod:`telha.config`); the client commands, workers, tests and scripts read a known set of
other ``TELHA_*`` names (:data:`KNOWN`, :data:`KNOWN_PREFIXES`). Any other ``TELHA_*``
name is most likely a misspelling (``TELHA_SERVER_REST_ADDR``, one underscore) that would
otherwise be ignored in silence: :func:`stray_names` finds them, each with the closest
name it may have meant (``difflib``'s ratio, the same a ``did you mean`` in Python
itself uses). Names with ``__`` are left to :func:`telha.config.load_config`, which
refuses an unknown section or key.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

import msgspec
import structlog

from telha.config import Config

__all__ = ["KNOWN", "KNOWN_PREFIXES", "config_names", "stray_names", "warn_stray_env"]

#: Every ``TELHA_*`` name without ``__`` that something in Telha reads: the client
#: commands (``TELHA_URL``, ``TELHA_API_KEY``, ``TELHA_PRINCIPALS``), workers
#: (``TELHA_GRPC_TARGET``, ``TELHA_WORKER_TOKEN``, ``TELHA_HEARTBEAT_INTERVAL_SECS``),
#: ``telha serve``'s debug switches, and the tests', bench's and scripts' own. A new one
#: belongs here.
KNOWN = frozenset({
    "TELHA_URL", "TELHA_API_KEY", "TELHA_PRINCIPALS", "TELHA_GRPC_TARGET", "TELHA_WORKER_TOKEN",
    "TELHA_HEARTBEAT_INTERVAL_SECS", "TELHA_DEBUG_MEMORY", "TELHA_CORPUS",
    "TELHA_CRASH_SEED", "TELHA_REGENERATE_GOLDEN", "TELHA_PG_DIR", "TELHA_PG_PORT",
    "TELHA_PG_OPTS",
})  # fmt: skip
#: Families of names read by tests, fuzzing and fault injection, and the secrets a
#: connector's settings name (``passwordEnv``: docs/connectors.md, "The imap kind").
KNOWN_PREFIXES = ("TELHA_TEST_", "TELHA_FUZZ_", "TELHA_FAILPOINT_", "TELHA_SECRET_")
#: How alike (``difflib.SequenceMatcher.ratio``, 0..1) a name must be to be suggested.
CUTOFF = 0.75


def config_names() -> list[str]:
    """Every ``TELHA_<SECTION>__<KEY>`` name a configuration key can be set by."""
    names = []
    for section in msgspec.structs.fields(Config):
        for key in msgspec.structs.fields(section.type):
            names.append(f"TELHA_{section.name.upper()}__{key.name.upper()}")
    return names


def stray_names(environ: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """The ``TELHA_*`` names in ``environ`` that nothing reads, sorted, each with the
    closest name it may have meant (a configuration key's or a known one), or ``None``
    when nothing is alike enough (:data:`CUTOFF`)."""
    candidates: Iterable[str] = [*config_names(), *sorted(KNOWN)]
    out: list[tuple[str, str | None]] = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith("TELHA_") or "__" in name or upper in KNOWN:
            continue
        if upper.startswith(KNOWN_PREFIXES):
            continue
        close = difflib.get_close_matches(upper, candidates, n=1, cutoff=CUTOFF)
        out.append((name, close[0] if close else None))
    return out


def warn_stray_env(environ: Mapping[str, str]) -> None:
    """Log one ``unknown_env_var`` warning a stray name (:func:`stray_names`) at start-up:
    ``name`` and a ``detail`` such as ``TELHA_SERVER_REST_ADDR is not read by telha (it is
    ignored); did you mean TELHA_SERVER__REST_ADDR?``."""
    log = structlog.get_logger("telha.env")
    for name, close in stray_names(environ):
        hint = f"; did you mean {close}?" if close else ""
        log.warning(
            "unknown_env_var",
            name=name,
            suggestion=close,
            detail=f"{name} is not read by telha (it is ignored){hint}",
        )
