"""Job options of the tabular worker, validated once into a frozen :class:`TabularOptions`.

Every invalid or unknown option raises :class:`~workers_common.UnsupportedFeature` whose
message starts with the option's name (``"delimiter: ..."``), so the dead-letter reason says
which option to fix.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Any

from workers_common import UnsupportedFeature
from workers_common.format_options import MAX_ROWS_PER_PARTIAL, OptionError, check_options

__all__ = ["DEFAULT_ROWS_PER_PARTIAL", "MAX_ROWS_PER_PARTIAL", "TabularOptions", "parse_options"]

#: Rows per streamed partial submission when ``rows_per_partial`` is absent.
DEFAULT_ROWS_PER_PARTIAL = 10_000

_LABEL = re.compile(r"^[A-Z0-9]+(?:_[A-Z0-9]+)*$")
_FORBIDDEN_DELIMITERS = {'"', "\n", "\r", "\x1f"}


@dataclass(frozen=True, slots=True)
class TabularOptions:
    """Validated options.

    :ivar delimiter: one character, or ``None`` to sniff (CSV) / tab (TSV).
    :ivar encoding: a Python codec name, or ``None`` to detect.
    :ivar header: ``"auto"``, ``"true"`` or ``"false"``.
    :ivar sheets: sheet names to read (XLSX), ``None`` for all.
    :ivar rows_per_partial: data rows per streamed submission.
    :ivar label: the label of row nodes (UPPER_SNAKE).
    :ivar clarify: emit day-first/month-first ambiguities.
    """

    delimiter: str | None = None
    encoding: str | None = None
    header: str = "auto"
    sheets: tuple[str, ...] | None = None
    rows_per_partial: int = DEFAULT_ROWS_PER_PARTIAL
    label: str = "TABLE_ROW"
    clarify: bool = False


def _delimiter(value: Any) -> str:
    if not isinstance(value, str) or len(value) != 1 or value in _FORBIDDEN_DELIMITERS:
        raise UnsupportedFeature(
            f"delimiter: {value!r} is not one character (a quote, CR, LF and U+001F are refused)"
        )
    return value


def _encoding(value: Any) -> str:
    if not isinstance(value, str):
        raise UnsupportedFeature(f"encoding: {value!r} is not a string")
    try:
        return codecs.lookup(value).name
    except LookupError:
        raise UnsupportedFeature(f"encoding: unknown codec {value!r}") from None


def _header(value: Any) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str) and value.lower() in ("auto", "true", "false"):
        return value.lower()
    raise UnsupportedFeature(f"header: {value!r} is not one of auto, true, false")


def _sheets(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise UnsupportedFeature(f"sheets: {value!r} is not a list of sheet names")
    return tuple(value)


def _rows_per_partial(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnsupportedFeature(f"rows_per_partial: {value!r} is not an integer")
    if not 1 <= value <= MAX_ROWS_PER_PARTIAL:
        raise UnsupportedFeature(f"rows_per_partial: {value} is not in 1..{MAX_ROWS_PER_PARTIAL}")
    return value


def _label(value: Any) -> str:
    if not isinstance(value, str) or not _LABEL.match(value):
        raise UnsupportedFeature(f"label: {value!r} is not an UPPER_SNAKE label")
    return value


def _clarify(value: Any) -> bool:
    if not isinstance(value, bool):
        raise UnsupportedFeature(f"clarify: {value!r} is not a boolean")
    return value


_PARSERS = {
    "delimiter": _delimiter,
    "encoding": _encoding,
    "header": _header,
    "sheets": _sheets,
    "rows_per_partial": _rows_per_partial,
    "label": _label,
    "clarify": _clarify,
}


def parse_options(options: dict[str, Any]) -> TabularOptions:
    """Validate a job's ``options`` dict (``None`` values count as absent).

    :raises UnsupportedFeature: an unknown option, or a value of the wrong type or range; the
        message starts with the option's name.
    """
    # Names, types and ranges are declared once, for core and workers alike.
    try:
        check_options("csv", options)
    except OptionError as exc:
        raise UnsupportedFeature(str(exc)) from None
    values: dict[str, Any] = {k: _PARSERS[k](v) for k, v in options.items() if v is not None}
    return TabularOptions(**values)
