"""Who a request is: its API key's scope and the principals it acts for, and the refusal
of a source those principals may not see (docs/rest-api.md, "Principals")."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from telha.domain.acl import PRINCIPALS_HEADER, Principals, narrow, parse_principals
from telha.domain.errors import NotFound, Unauthenticated
from telha.domain.model import Scope
from telha.rest.access_log import SCOPE_KEY
from telha.rest.state import state

__all__ = ["Access", "require_access", "require_admitted", "require_scope"]


@dataclass(frozen=True, slots=True)
class Access:
    """Who a request is: its key's scope, and the principals it acts for (``None``: none,
    the whole scope; docs/rest-api.md, "Principals")."""

    scope: Scope
    principals: Principals | None


async def require_access(request: Request) -> Access:
    """The scope of the request's ``x-api-key``, once the key's rate limit admits the
    request (:meth:`telha.rest.quotas.Quotas.admit`), and the principals it acts for: the
    ``x-telha-principals`` header's (several such headers are one comma-separated list),
    else the key's (:func:`telha.domain.acl.narrow`).

    :raises Unauthenticated: header missing or key unknown/revoked.
    :raises RateLimited: over the scope's ``requests_per_second``.
    :raises RequestError: a malformed ``x-telha-principals`` header.
    :raises Forbidden: the header names a principal the key (having principals) lacks.
    """
    key = request.headers.get("x-api-key")
    if not key:
        raise Unauthenticated("missing x-api-key header")
    st = state(request)
    granted = await st.keys.access_of(key)
    request.scope[SCOPE_KEY] = granted.scope  # for the access log
    await st.quotas.admit(key, granted.scope)
    named = request.headers.getlist(PRINCIPALS_HEADER)
    asked = parse_principals(", ".join(named)) if named else None
    return Access(granted.scope, narrow(granted.principals, asked))


async def require_scope(request: Request) -> Scope:
    """The scope of the request's ``x-api-key`` (:func:`require_access`: an
    ``x-telha-principals`` header is checked on every route).

    :raises Unauthenticated: header missing or key unknown/revoked.
    :raises RateLimited: over the scope's ``requests_per_second``.
    :raises RequestError: a malformed ``x-telha-principals`` header.
    :raises Forbidden: the header names a principal the key lacks.
    """
    return (await require_access(request)).scope


async def require_admitted(
    request: Request, access: Access, source_id: bytes, missing: str = "no such source"
) -> None:
    """Refuse a read of a source the request's principals may not see as if the source
    were absent (:func:`telha.domain.acl.admits`); nothing is read without principals.

    :raises NotFound: ``missing``, the message the route gives for an absent source.
    """
    if access.principals is None:
        return
    if not await state(request).store.reads.admitted(access.scope, source_id, access.principals):
        raise NotFound(missing)
