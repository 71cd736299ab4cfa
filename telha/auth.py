"""REST API keys: minted at random, stored only as a BLAKE3 hash."""

from __future__ import annotations

import secrets
import uuid

import blake3

from telha.domain.ids import new_id

__all__ = ["hash_key", "mint_api_key"]

_PREFIX = "telha_"


def mint_api_key() -> tuple[str, str]:
    """A new key: ``(key_id, key)``; the key is ``telha_`` + 43 url-safe characters (256 bits)."""
    return str(uuid.UUID(bytes=new_id())), _PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    """The stored form of a key: BLAKE3 of its UTF-8 bytes (32 bytes). Keys carry 256 random
    bits, so a fast hash is enough; no key can be recovered from the store."""
    return blake3.blake3(key.encode("utf-8", "surrogateescape")).digest()
