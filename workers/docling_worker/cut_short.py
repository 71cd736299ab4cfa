"""A PDF cut short (docs/formats.md, "Warnings"): a PDF ends with ``%%EOF`` after its
cross-reference trailer; one whose last :data:`TAIL_BYTES` hold no ``%%EOF`` lost its end.
PDF readers rebuild the cross-reference from the objects that are there, so what could be
read is projected and the submission gets a ``truncated`` warning."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from workers_common.warnings import Warnings

__all__ = ["TAIL_BYTES", "note_cut_pdf"]

#: How far from the end ``%%EOF`` may stand (the spec allows a little trailing junk).
TAIL_BYTES = 1024


def _cut(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - TAIL_BYTES))
        return b"%%EOF" not in f.read()


def note_cut_pdf(submission: dict[str, Any], path: Path) -> None:
    """Add a ``truncated`` warning to ``submission["stats"]`` when the PDF at ``path`` has no
    ``%%EOF`` near its end."""
    if not _cut(path):
        return
    stats = submission.setdefault("stats", {})
    found = Warnings.of(stats)
    found.add("truncated", 1, "no %%EOF trailer: the file ends early; what could be read is kept")
    found.put(stats)
