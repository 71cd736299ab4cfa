"""Principals and source ACLs (docs/rest-api.md, "Principals"): who a request acts for, and
whether a source's ACL admits it. Pure; no I/O.

A source's ACL is advisory and floor-only. *Advisory*: Telha does not authenticate a
principal; the caller (or its API key) asserts them. *Floor-only*: an ACL can only narrow
what a scope already shows, never widen it: a source without an ACL is visible to the whole
scope, a request without principals sees every source of its scope (as before ACLs), and a
request with principals sees a source with an ACL only when the ACL names one of them. A
source a request may not see answers as if absent (404), never 403.

The rule is written twice, side by side and held equal by a test on both engines: here in
Python (:func:`admits`) and as one SQL condition (:func:`telha.storage.reads.acl.admitted`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from telha.domain.errors import Forbidden, RequestError

__all__ = [
    "MAX_PRINCIPALS",
    "PRINCIPALS_HEADER",
    "Principals",
    "admits",
    "narrow",
    "parse_principals",
]

#: The request header naming the principals a request acts for (lower case, as starlette
#: and HTTP/2 spell header names): ``X-Telha-Principals: user:alice, group:eng``.
PRINCIPALS_HEADER = "x-telha-principals"

#: Most principals one request (or one API key) may name.
MAX_PRINCIPALS = 100

#: Longest principal, in characters.
MAX_PRINCIPAL_CHARS = 256

#: Sorted, without repeats (the form every function here returns).
Principals = tuple[str, ...]

#: ``kind:name``: a lower-case kind (``user``, ``group``, or another word an ACL uses) and a
#: non-empty name of printable characters without commas or spaces at its ends.
_PRINCIPAL = re.compile(
    r"[a-z][a-z0-9_.-]*:[^\s,\x00-\x1f\x7f](?:[^,\x00-\x1f\x7f]*[^\s,\x00-\x1f\x7f])?"
)


def parse_principals(text: str, what: str = "x-telha-principals") -> Principals:
    """The principals a header (or a ``--principals`` option) names: comma-separated
    ``kind:name`` items (``user:alice, group:eng``), spaces around each ignored, names
    case-sensitive; sorted, repeats dropped.

    :raises RequestError: no principal named, an item not of the form ``kind:name`` (kind
        lower-case letters, digits, ``_.-``; name without commas or control characters),
        longer than :data:`MAX_PRINCIPAL_CHARS`, or more than :data:`MAX_PRINCIPALS`
        (the message names ``what``).
    """
    items = [p.strip() for p in text.split(",")]
    if not any(items):
        raise RequestError(
            f"{what}: names no principal (give user:NAME or group:NAME, comma-separated)"
        )
    if len(items) > MAX_PRINCIPALS:
        raise RequestError(f"{what}: at most {MAX_PRINCIPALS} principals")
    for item in items:
        if len(item) > MAX_PRINCIPAL_CHARS or not _PRINCIPAL.fullmatch(item):
            raise RequestError(
                f"{what}: {item[:80]!r} is not a principal (kind:name, such as user:alice"
                f" or group:eng, at most {MAX_PRINCIPAL_CHARS} characters)"
            )
    return tuple(sorted(set(items)))


def narrow(key_principals: Principals | None, asked: Principals | None) -> Principals | None:
    """The principals a request acts for: those it ``asked`` for (the header), else its
    API key's; ``None``: none (the whole scope, as without ACLs). A key with principals
    can only narrow: every principal asked for must be one of the key's.

    :raises Forbidden: ``asked`` names a principal the key does not carry.
    """
    if asked is None:
        return key_principals
    if key_principals is not None:
        extra = sorted(set(asked) - set(key_principals))
        if extra:
            raise Forbidden(
                f"x-telha-principals: {', '.join(extra[:5])} not among this API key's"
                " principals (a key with principals can only narrow them)"
            )
    return asked


def admits(acl: Sequence[str] | None, principals: Principals | None) -> bool:
    """Whether a request acting for ``principals`` sees a source whose ACL is ``acl``:
    always without principals (``None``) or without an ACL (``None``); otherwise when the
    ACL names one of them (exact, case-sensitive match; an empty ACL admits nobody)."""
    if principals is None or acl is None:
        return True
    return not set(acl).isdisjoint(principals)
