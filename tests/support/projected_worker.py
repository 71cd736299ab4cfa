"""A worker module for tests: ``text_worker``'s projection of ``text`` and ``markdown`` under
the projection version ``TELHA_TEST_PROJECTION_VERSION`` (1 by default), read when the module
is imported — a server started with another value is a worker whose projection was bumped
(docs/architecture.md, "Dedup, identity and versions")."""

from __future__ import annotations

import os

from text_worker import FORMATS, handle

__all__ = ["FORMATS", "PROJECTION_VERSION", "handle", "parser_versions"]

PROJECTION_VERSION = int(os.environ.get("TELHA_TEST_PROJECTION_VERSION", "1"))


def parser_versions() -> dict[str, str]:
    """No parser library: the projection is text_worker's own code."""
    return {}
