"""What each group of :class:`telha.client.AsyncTelha`'s calls (chunks, listings, search,
connectors) sends its requests through: the client's ``_request`` and ``_get``, declared once
here and implemented by :class:`~telha.client.AsyncTelha`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import httpx

__all__ = ["Calls"]

_T = TypeVar("_T")


class Calls:
    """Base of the call groups: the two request methods they use."""

    async def _request(
        self, method: str, url: str, build: Callable[[], dict[str, Any]] | None = None
    ) -> httpx.Response:
        """One request (``build`` gives httpx's keyword arguments, again per retry).

        :raises TelhaError: the server's error answer, or no answer after retries.
        """
        raise NotImplementedError

    async def _get(self, url: str, typ: type[_T], params: Mapping[str, Any] | None = None) -> _T:
        """``GET url`` with ``params`` (``None`` values left out), decoded as ``typ``.

        :raises TelhaError: as :meth:`_request`.
        """
        raise NotImplementedError
