"""Which scopes may use which ``TELHA_SECRET_*`` variable: ``[connectors] secrets``
(docs/connectors.md, "The imap kind"; docs/operations.md, "Environment variables").

An entry is ``"TELHA_SECRET_NAME=tenant/org"``: the variable may be named (an ``imap``
connector's ``passwordEnv``) by connectors of that one scope. A variable listed in several
entries admits each scope listed; a variable listed in none admits no scope. ``telha
serve`` exports the list to its workers as ``TELHA_CONNECTORS__SECRETS`` (entries joined
by commas), as it does its other ``[connectors]`` keys.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["ENV", "grants_from_env", "parse_grants"]

#: The environment variable the grants reach workers in (comma-separated entries).
ENV = "TELHA_CONNECTORS__SECRETS"

_ENTRY = re.compile(r"(TELHA_SECRET_[A-Z0-9_]+)=([^/,=\s]+/[^/,=\s]+)")


def parse_grants(entries: Iterable[str]) -> dict[str, frozenset[str]]:
    """``{variable: {"tenant/org", …}}`` of ``entries`` (blank ones skipped).

    :raises ValueError: an entry not ``TELHA_SECRET_…=tenant/org`` (the message names it).
    """
    grants: dict[str, set[str]] = {}
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        m = _ENTRY.fullmatch(entry)
        if m is None:
            raise ValueError(f"{entry!r}: not TELHA_SECRET_<NAME>=<tenant>/<organization>")
        grants.setdefault(m[1], set()).add(m[2])
    return {var: frozenset(scopes) for var, scopes in grants.items()}


def grants_from_env(environ: Mapping[str, str] | None = None) -> dict[str, frozenset[str]]:
    """The grants a worker was given (:data:`ENV`; unset: none).

    :raises ValueError: an entry that does not parse (:func:`parse_grants`).
    """
    env = os.environ if environ is None else environ
    return parse_grants(env.get(ENV, "").split(","))
