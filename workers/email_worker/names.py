"""Source names of a message's attachment child jobs (docs/formats.md, "Email"): an
attachment Telha ingests is its own source named ``<message's source name>/<file name>``, so
a person finds it under its message, and its name (and so its source id, xxh3 of the name)
derives only from the message's name and bytes.

**Rules**, applied to the attachments in the order the message lists them:

- the file name has ``/`` and ``\\`` replaced by ``_`` (the first ``/`` after the message's
  name always separates message and file) and control characters dropped; an empty one is
  ``attachment``;
- the same file name with the same bytes again (a file attached twice) is the same child:
  one source, one job;
- the same file name with other bytes takes the first free ``<stem> (2)<ext>``,
  ``<stem> (3)<ext>``…, as a browser names a second download, so two attachments never
  share a source;
- the result is deterministic: the same message bytes under the same name give the same
  child names (and so the same child sources) every time.
"""

from __future__ import annotations

import re

__all__ = ["attachment_names", "safe_file_name"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def safe_file_name(name: str) -> str:
    """``name`` as the last segment of a child's source name: ``/`` and ``\\`` become
    ``_``, control characters are dropped, surrounding whitespace stripped; ``attachment``
    when nothing is left."""
    out = _CONTROL.sub("", name.replace("/", "_").replace("\\", "_")).strip()
    return out or "attachment"


def _numbered(name: str, n: int) -> str:
    """``report (n).pdf`` of ``report.pdf``; ``notes (n)`` of ``notes``; a leading dot is
    part of the stem (``.profile (n)``)."""
    dot = name.rfind(".")
    if dot <= 0:
        return f"{name} ({n})"
    return f"{name[:dot]} ({n}){name[dot:]}"


def attachment_names(parent: str, items: list[tuple[str, str]]) -> list[str]:
    """The source name of each attachment child of the message ingested as ``parent``.

    :param parent: the message's source name (the job's ``name``).
    :param items: ``(file name, content digest)`` per attachment, in the message's order.
    :returns: one name per item, in order; equal for items with equal file name and digest,
        distinct otherwise (module docstring).
    """
    taken: dict[str, str] = {}  # file name given → digest of the bytes it names
    out = []
    for raw, digest in items:
        base = safe_file_name(raw)
        name, n = base, 1
        while name in taken and taken[name] != digest:
            n += 1
            name = _numbered(base, n)
        taken[name] = digest
        out.append(f"{parent}/{name}")
    return out
