"""Each engine's numbered SQL migrations (``<engine package>/migrations/NNNN_name.sql``), as
its migrator applies them in order; shipped migrations are never edited, only added to."""

from __future__ import annotations

import re
from importlib import resources

from telha.domain.errors import StorageError

__all__ = ["numbered_migrations", "require_current"]

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def numbered_migrations(package: str) -> list[tuple[int, str, str]]:
    """The migrations shipped in ``package`` as ``(number, file name, sql)``, by number."""
    found = []
    for entry in resources.files(package).joinpath("migrations").iterdir():
        m = _NAME.match(entry.name)
        if m:
            found.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def require_current(location: str, current: int, package: str) -> None:
    """Check a store opened read-only against this build's schema.

    :raises StorageError: ``current`` (the store's schema version) is older than the newest
        migration in ``package``.
    """
    latest = numbered_migrations(package)[-1][0]
    if current < latest:
        raise StorageError(
            f"{location} has schema version {current}, this build needs {latest}"
            " (run `telha migrate`)"
        )
