"""Offsets in the ``units`` a request asks for (docs/rest-api.md, "Offsets in other
units"): the glue between :mod:`telha.domain.units` and the store, for every route that
answers offsets (spans, text, node provenance, chunks; search and locate too).

A route parses ``units`` once (:func:`units_param`), and for each version whose offsets it
answers gets an :class:`~telha.domain.units.OffsetConverter` over the stored chunks that
hold them (:func:`converter`): only those chunks are read, and the text before them is
counted, never kept.
"""

from __future__ import annotations

from starlette.requests import Request

from telha.domain.model import Scope
from telha.domain.units import OffsetConverter, Units, parse_units
from telha.storage.protocol import ReadStore

__all__ = ["converter", "units_param"]


def units_param(request: Request) -> Units:
    """The request's ``units`` query parameter (default ``byte``).

    :raises RequestError: not ``byte``, ``codepoint`` or ``utf16``.
    """
    return parse_units(request.query_params.get("units"))


async def converter(
    reads: ReadStore, scope: Scope, source_id: bytes, tx: int, start: int, end: int
) -> OffsetConverter:
    """A converter for the byte offsets ``start..end`` of version ``tx`` of ``source_id``
    (``conv.to_units([...], units)``; byte offsets outside it raise ``ValueError``).

    :raises NotFound: no such version in ``scope``.
    :raises ContentErased: the version was erased.
    """
    window = await reads.text_window(scope, source_id, tx, start, end)
    return OffsetConverter(window.data, window.base, window.before)
