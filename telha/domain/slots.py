"""Slots shared fairly between scopes, pure and non-blocking (docs/operations.md, "Fair
slots").

A :class:`ScopedSlots` counts ``total`` slots — the ingests in progress
(``ingest.max_concurrent``) or the open event streams (``server.max_event_streams``) — and,
per scope, the slots that scope holds. A scope may hold at most its share (by default
:func:`fair_share` of the total, half rounded up), so while one slot is free, a scope that
holds none gets it whatever another scope does. Taking never waits: a refusal is an answer
at once, and every slot taken is given back with :meth:`ScopedSlots.release`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from telha.domain.errors import QuotaExceeded, Unavailable

__all__ = ["SLOT_RETRY_AFTER_S", "ScopedSlots", "fair_share"]

#: ``Retry-After`` of a refusal for a scope's full share, seconds: a slot is given back
#: when one of the scope's own requests ends.
SLOT_RETRY_AFTER_S = 1.0

_K = TypeVar("_K", bound=Hashable)


def fair_share(total: int) -> int:
    """The slots one scope may hold by default: ``ceil(total / 2)`` (``total`` ≥ 1)."""
    return (total + 1) // 2


class ScopedSlots(Generic[_K]):
    """``total`` slots, counted overall and per scope (keys of type ``_K``).

    ``noun`` names what a slot is in messages (``"ingests in progress"``), ``total_key``
    the config key of ``total`` (``"ingest.max_concurrent"``), ``share_key`` the quota key
    of a scope's share (``"max_concurrent_ingests"``). Memory: one counter per scope
    holding a slot, so at most ``total`` of them.
    """

    __slots__ = ("_held", "_in_use", "noun", "share_key", "total", "total_key")

    def __init__(self, total: int, *, noun: str, total_key: str, share_key: str) -> None:
        if total < 1:
            raise ValueError(f"{total_key} must be >= 1, got {total}")
        self.total = total
        self.noun = noun
        self.total_key = total_key
        self.share_key = share_key
        self._in_use = 0
        self._held: dict[_K, int] = {}

    @property
    def in_use(self) -> int:
        """Slots held over every scope (``0 … total``)."""
        return self._in_use

    def held(self, scope: _K) -> int:
        """Slots ``scope`` holds now."""
        return self._held.get(scope, 0)

    def cap(self, share: int) -> int:
        """The slots a scope whose share is ``share`` may hold: ``share`` (``0``: no share
        of its own), never more than ``total``."""
        return min(share, self.total) if share > 0 else self.total

    def take(self, scope: _K, share: int) -> None:
        """Take one slot for ``scope``, whose share is ``share`` (:meth:`cap`).

        :raises QuotaExceeded: ``scope`` holds its share already (``429``, ``Retry-After``
            :data:`SLOT_RETRY_AFTER_S`; the message names ``share_key``), checked first.
        :raises Unavailable: every one of the ``total`` slots is held (``503``; the message
            names ``total_key``).
        """
        held = self._held.get(scope, 0)
        cap = self.cap(share)
        if held >= cap and cap < self.total:
            raise QuotaExceeded(
                f"{self.share_key}: this scope has {held} {self.noun}, its share of the"
                f" {self.total} of {self.total_key}; retry once one of them ends",
                SLOT_RETRY_AFTER_S,
            )
        if self._in_use >= self.total:
            raise Unavailable(f"{self.total} {self.noun} ({self.total_key}); retry shortly")
        self._in_use += 1
        self._held[scope] = held + 1

    def release(self, scope: _K) -> None:
        """Give back one slot ``scope`` took.

        :raises ValueError: ``scope`` holds none (a release without its take: a bug).
        """
        held = self._held.get(scope, 0)
        if held <= 0:
            raise ValueError("release of a slot that was not taken")
        if held == 1:
            del self._held[scope]
        else:
            self._held[scope] = held - 1
        self._in_use -= 1
