"""Worker tokens (docs/worker-protocol.md, "Worker tokens") and connector tokens
(docs/connectors.md, "Connector tokens"): signed, expiring JWTs (HS256, PyJWT) keyed by
``grpc.token_key``. A scoped token carries ``tenant``/``org``; a fleet token ``fleet: true``.
Both fronts check them (the gRPC front worker tokens, the REST front connector tokens), so
they live in neither.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from telha.domain.durations import parse_duration as parse_ttl
from telha.domain.model import Scope

__all__ = [
    "ConnectorAuth",
    "InvalidToken",
    "TokenVerifier",
    "WorkerAuth",
    "load_token_key",
    "mint_connector_token",
    "mint_worker_token",
    "parse_ttl",
    "verify_connector_token",
    "verify_worker_token",
]

_ISSUER = "telha"
_AUDIENCE = "telha-worker"
_CONNECTOR_AUDIENCE = "telha-connector"
KEY_FILE = "grpc_token.key"


class InvalidToken(Exception):
    """Missing, malformed, forged or expired worker token."""


@dataclass(frozen=True, slots=True)
class WorkerAuth:
    """Who a worker is: ``scope`` for a scoped token, ``None`` for a fleet token."""

    scope: Scope | None
    subject: str = "worker"


def load_token_key(configured: str, data_dir: Path) -> bytes:
    """The HMAC key: ``grpc.token_key`` when set, else the key file in ``data_dir``, created
    once (32 random bytes, hex, mode 0600) by whichever process needs it first — written
    under a temporary name and linked into place, so no reader ever sees it half-written.

    :raises ValueError: a configured key shorter than 32 bytes, or an empty key file.
    """
    if configured:
        if len(configured.encode()) < 32:
            raise ValueError("grpc.token_key must be at least 32 bytes")
        return configured.encode()
    path = data_dir / KEY_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=data_dir, prefix=".grpc_token.")
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_hex(32) + "\n")
            os.chmod(tmp, 0o600)
            with contextlib.suppress(FileExistsError):  # another process won the race
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    key = path.read_text(encoding="ascii").strip().encode()
    if not key:
        raise ValueError(f"{path} is empty: delete it to have a new key generated")
    return key


def mint_worker_token(
    key: bytes, scope: Scope | None, ttl_s: int, *, now_s: int | None = None
) -> str:
    """A token for ``scope`` (``None``: fleet) valid for ``ttl_s`` seconds."""
    iat = int(time.time()) if now_s is None else now_s
    claims: dict[str, object] = {
        "iss": _ISSUER,
        "aud": _AUDIENCE,
        "sub": "worker",
        "iat": iat,
        "exp": iat + ttl_s,
    }
    if scope is None:
        claims["fleet"] = True
    else:
        claims["tenant"] = scope.tenant_id
        claims["org"] = scope.organization_id
    return jwt.encode(claims, key, algorithm="HS256")


def verify_worker_token(key: bytes, token: str) -> WorkerAuth:
    """Check signature, issuer, audience and expiry.

    :raises InvalidToken: with the reason (expired, bad signature, malformed, no scope).
    """
    return _verify(key, token)[0]


def _claims(key: bytes, token: str, audience: str, what: str) -> dict[str, Any]:
    """A token's claims once its signature, issuer, ``audience`` and expiry are checked.

    :raises InvalidToken: expired, bad signature or malformed (``what`` names the kind).
    """
    try:
        claims: dict[str, Any] = jwt.decode(
            token, key, algorithms=["HS256"], audience=audience, issuer=_ISSUER,
            options={"require": ["exp", "iat", "iss", "aud"]},
        )  # fmt: skip
    except jwt.ExpiredSignatureError:
        raise InvalidToken(f"{what} token expired") from None
    except jwt.PyJWTError as exc:
        raise InvalidToken(f"invalid {what} token: {exc}") from None
    return claims


def _verify(key: bytes, token: str) -> tuple[WorkerAuth, int]:
    """:func:`verify_worker_token`, and the token's expiry (``exp``, Unix seconds)."""
    claims = _claims(key, token, _AUDIENCE, "worker")
    exp = int(claims["exp"])
    if claims.get("fleet") is True:
        return WorkerAuth(None), exp
    tenant, org = claims.get("tenant"), claims.get("org")
    if not isinstance(tenant, str) or not isinstance(org, str):
        raise InvalidToken("worker token names no scope")
    return WorkerAuth(Scope(tenant, org)), exp


class TokenVerifier:
    """:func:`verify_worker_token` with the tokens it accepted remembered until they expire:
    a worker sends the same token with every RPC, and checking its signature and claims each
    time costs more than the RPC's own work for small jobs. Refused tokens are never
    remembered; a remembered one is refused once past its ``exp``, as a fresh check would.

    :param key: the HMAC key (``grpc.token_key``).
    :param size: most tokens remembered (the oldest is forgotten first).
    :param clock: Unix seconds (injectable for tests).
    """

    def __init__(
        self, key: bytes, *, size: int = 1024, clock: Callable[[], float] = time.time
    ) -> None:
        self._key = key
        self._size = size
        self._clock = clock
        self._known: OrderedDict[str, tuple[WorkerAuth, int]] = OrderedDict()

    def verify(self, token: str) -> WorkerAuth:
        """The worker ``token`` authenticates.

        :raises InvalidToken: as :func:`verify_worker_token` (an expired remembered token:
            ``worker token expired``).
        """
        known = self._known.get(token)
        if known is None:
            known = self._known[token] = _verify(self._key, token)
            if len(self._known) > self._size:
                self._known.popitem(last=False)
        if self._clock() >= known[1]:
            self._known.pop(token, None)
            raise InvalidToken("worker token expired")
        return known[0]


@dataclass(frozen=True, slots=True)
class ConnectorAuth:
    """Who a connector token speaks for: one connector (``connector_id``, 16 bytes) of one
    ``scope`` (docs/connectors.md, "Connector tokens")."""

    scope: Scope
    connector_id: bytes


def mint_connector_token(
    key: bytes, scope: Scope, connector_id: bytes, ttl_s: int, *, now_s: int | None = None
) -> str:
    """A connector token (HS256, audience ``telha-connector``, so a worker token is never
    one and the other way round) for ``connector_id`` of ``scope``, valid ``ttl_s`` s."""
    iat = int(time.time()) if now_s is None else now_s
    claims: dict[str, object] = {
        "iss": _ISSUER,
        "aud": _CONNECTOR_AUDIENCE,
        "sub": "connector",
        "iat": iat,
        "exp": iat + ttl_s,
        "tenant": scope.tenant_id,
        "org": scope.organization_id,
        "connector": connector_id.hex(),
    }
    return jwt.encode(claims, key, algorithm="HS256")


def verify_connector_token(key: bytes, token: str) -> ConnectorAuth:
    """Check a connector token's signature, issuer, audience and expiry (whether its
    connector still exists is the caller's check).

    :raises InvalidToken: with the reason (expired, bad signature, malformed, no connector).
    """
    claims = _claims(key, token, _CONNECTOR_AUDIENCE, "connector")
    tenant, org, conn = claims.get("tenant"), claims.get("org"), claims.get("connector")
    if not isinstance(tenant, str) or not isinstance(org, str) or not isinstance(conn, str):
        raise InvalidToken("connector token names no scope or connector")
    try:
        connector_id = bytes.fromhex(conn)
    except ValueError:
        raise InvalidToken("connector token names no connector") from None
    if len(connector_id) != 16:
        raise InvalidToken("connector token names no connector")
    return ConnectorAuth(Scope(tenant, org), connector_id)
