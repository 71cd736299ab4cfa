"""The options of every worker format, declared once (docs/formats.md, "Options").

Core checks a request's ``options`` against :data:`FORMAT_OPTIONS` at ``POST /v1/ingest``
(``400 INVALID_REQUEST`` naming the option), whether or not the format's worker runs in the
same process; workers read their option names and bounds from here too, so the two never
disagree. Format names are case-insensitive and take the aliases of :data:`ALIASES`
(:func:`canonical_format`). Pure: no I/O, nothing from ``telha`` (workers import it).

A ``null`` option value counts as absent everywhere (core drops it before enqueueing).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = [
    "ALIASES",
    "FETCH_FORMATS",
    "FORMAT_OPTIONS",
    "Option",
    "OptionError",
    "canonical_format",
    "check_name",
    "check_options",
    "drop_nulls",
    "option_names",
]

#: How a value is checked:
#: ``bool``; ``int`` (not a bool) and ``number`` (int or float, not a bool) within
#: ``minimum``/``maximum``; ``string`` (any string) and ``text`` (not blank); ``choice`` (one of
#: ``choices``); ``switch`` (``true``/``false`` or one of ``choices``, any case); ``strings`` (a
#: string or a list of strings); ``char`` (one character, not one of ``choices``); ``codec`` (a
#: Python codec name); ``label`` (UPPER_SNAKE); ``object`` (only ``fields``).
Kind = Literal[
    "bool", "int", "number", "string", "text", "choice", "switch", "strings", "char", "codec",
    "label", "object",
]  # fmt: skip

_LABEL = re.compile(r"^[A-Z0-9]+(?:_[A-Z0-9]+)*$")


@dataclass(frozen=True, slots=True)
class Option:
    """One option of a format.

    :ivar name: its key in ``options``.
    :ivar kind: how its value is checked (:data:`Kind`).
    :ivar choices: the allowed strings (``choice``, ``switch``), or refused characters (``char``).
    :ivar minimum: least value (``int``, ``number``), inclusive.
    :ivar maximum: greatest value (``int``, ``number``), inclusive.
    :ivar fields: the keys of an ``object``.
    :ivar default: the value a worker reads when the option is absent (``None``: absent is its
        own meaning); the effective options of a version's identity fill it in
        (:func:`workers_common.projection.effective_options`).
    """

    name: str
    kind: Kind
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    fields: tuple[Option, ...] = ()
    default: Any = None


class OptionError(ValueError):
    """An unknown or ill-typed option: ``option`` is its dotted name (``crawl.max_depth``),
    ``str(exc)`` is ``"<option>: <problem>"``."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"{option}: {problem}")
        self.option = option
        self.problem = problem


_CLARIFY = Option("clarify", "bool", default=False)
#: Which pages go through OCR (docs/formats.md, "OCR: scanned PDFs and images").
_OCR = Option("ocr", "choice", choices=("auto", "force", "off"), default="auto")
#: Options core itself reads on every format that makes a job (docs/rest-api.md, "Webhooks");
#: core checks their values itself.
CORE_OPTIONS = frozenset({"webhook"})
#: Rows per streamed partial at most (core caps one submission at 1,000,000 nodes).
MAX_ROWS_PER_PARTIAL = 200_000
_TABULAR = (
    Option("delimiter", "char", choices=('"', "\n", "\r", "\x1f")),
    Option("encoding", "codec"),
    Option("header", "switch", choices=("auto", "true", "false"), default="auto"),
    Option("sheets", "strings"),
    Option("rows_per_partial", "int", minimum=1, maximum=MAX_ROWS_PER_PARTIAL),
    Option("label", "label"),
    _CLARIFY,
)
_CRAWL = Option(
    "crawl",
    "object",
    fields=(
        Option("max_depth", "int", minimum=0),
        Option("max_pages", "int", minimum=1),
        Option("same_origin", "bool"),
        Option("include", "strings"),
        Option("exclude", "strings"),
        Option("delay_s", "number", minimum=0),
        Option("depth", "int", minimum=0),
        Option("origin", "string"),
    ),
)
_WEB = (
    Option("timeout_s", "number", minimum=0.1),
    Option("max_bytes", "int", minimum=1),
    Option(
        "wait_until", "choice", choices=("load", "domcontentloaded", "networkidle"), default="load"
    ),
    Option("wait_for", "text"),
    _CLARIFY,
    _CRAWL,
)
#: ``options.language`` of a ``code`` job.
CODE_LANGUAGES = ("cpp", "csharp", "go", "javascript", "python", "rust", "tsx", "typescript")
_CODE = (
    Option("language", "choice", choices=CODE_LANGUAGES),
    Option("repo", "string"),
    Option("path", "string"),
    # An archive's limits (code_worker.archive).
    Option("max_files", "int", minimum=1),
    Option("max_bytes", "int", minimum=1),
)

#: Format → the options its worker takes (besides :data:`CORE_OPTIONS`). ``json`` is core's
#: own (``label``, ``nested``: telha.ingest), so it is not here.
FORMAT_OPTIONS: dict[str, tuple[Option, ...]] = {
    "text": (),
    "markdown": (),
    "pdf": (_CLARIFY, _OCR),
    "docx": (_CLARIFY,),
    "pptx": (_CLARIFY,),
    "html": (_CLARIFY,),
    "csv": _TABULAR,
    "tsv": _TABULAR,
    "xlsx": _TABULAR,
    "web": _WEB,
    "code": _CODE,
    "eml": (_CLARIFY,),
    "msg": (_CLARIFY,),
    "slack": (),
    **{image: (_CLARIFY, _OCR) for image in ("png", "jpeg", "tiff", "bmp", "webp")},
}

#: Other names of formats (lower case): a request may name a format by any of them.
ALIASES = {
    "md": "markdown",
    "txt": "text",
    "htm": "html",
    "jpg": "jpeg",
    "tif": "tiff",
}

#: Formats whose worker fetches the content itself: the request's name is an http(s) URL.
FETCH_FORMATS = frozenset({"web"})


def canonical_format(name: str) -> str:
    """``name`` lower-cased, an alias replaced by its format (``MD`` → ``markdown``); any
    other name comes back lower-cased (the caller decides whether it is known)."""
    lowered = name.strip().lower()
    return ALIASES.get(lowered, lowered)


def option_names(fmt: str, within: str | None = None) -> tuple[str, ...]:
    """The option names a worker of ``fmt`` takes, in declaration order; with ``within``, the
    keys of that ``object`` option (``option_names("web", "crawl")``).

    :raises KeyError: ``fmt`` is not a worker format, or has no option ``within``.
    """
    declared = FORMAT_OPTIONS[fmt]
    if within is not None:
        declared = {o.name: o for o in declared}[within].fields
    return tuple(o.name for o in declared)


def drop_nulls(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` without ``null`` values, in nested objects too (``null`` counts as absent)."""
    return {
        k: drop_nulls(v) if isinstance(v, dict) else v for k, v in options.items() if v is not None
    }


def check_name(fmt: str, name: str) -> None:
    """For a fetch format (``web``): ``name`` must be an absolute ``http``/``https`` URL with a
    host. Other formats take any name.

    :raises OptionError: (option ``name``) not such a URL.
    """
    if fmt not in FETCH_FORMATS:
        return
    try:
        parts = urlsplit(name)
        host = parts.hostname
    except ValueError:
        host = None
        parts = None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not host:
        raise OptionError("name", f"format={fmt} needs an absolute http(s) URL, got {name!r}")


def check_options(fmt: str, options: Mapping[str, Any]) -> None:
    """Check ``options`` of a ``fmt`` job against :data:`FORMAT_OPTIONS` (``null`` values
    count as absent; :data:`CORE_OPTIONS` are left to core).

    :raises OptionError: an unknown option, or a value of the wrong type or range (the first
        one, by name).
    :raises KeyError: ``fmt`` is not a worker format.
    """
    _check_object(FORMAT_OPTIONS[fmt], options, "", CORE_OPTIONS)


def _check_object(
    declared: tuple[Option, ...], value: Mapping[str, Any], prefix: str, extra: frozenset[str]
) -> None:
    by_name = {o.name: o for o in declared}
    for key in sorted(value):
        if key in extra:
            continue
        option = by_name.get(key)
        if option is None:
            known = ", ".join(o.name for o in declared) or "none"
            raise OptionError(f"{prefix}{key}", f"unknown option (known: {known})")
        if value[key] is not None:
            _check_value(option, value[key], f"{prefix}{key}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _range(option: Option) -> str:
    low, high = option.minimum, option.maximum
    if low is not None and high is not None:
        return f" in {low:g}..{high:g}"
    if low is not None:
        return f" >= {low:g}"
    return f" <= {high:g}" if high is not None else ""


def _check_value(option: Option, value: Any, name: str) -> None:
    if option.kind == "object":
        if not isinstance(value, dict):
            raise OptionError(name, f"{value!r} is not an object")
        _check_object(option.fields, value, f"{name}.", frozenset())
    elif not _FITS[option.kind](option, value):
        raise OptionError(name, f"{value!r} is not {_EXPECTED[option.kind](option)}")


def _in_range(option: Option, value: Any) -> bool:
    low, high = option.minimum, option.maximum
    return (low is None or value >= low) and (high is None or value <= high)


def _is_codec(value: Any) -> bool:
    try:
        codecs.lookup(value)
    except LookupError:
        return False
    return True


#: Whether a value fits a scalar kind (:data:`Kind`), and what it should have been.
_FITS: dict[str, Callable[[Option, Any], bool]] = {
    "bool": lambda o, v: isinstance(v, bool),
    "int": lambda o, v: _is_int(v) and _in_range(o, v),
    "number": lambda o, v: (_is_int(v) or isinstance(v, float)) and _in_range(o, v),
    "string": lambda o, v: isinstance(v, str),
    "text": lambda o, v: isinstance(v, str) and bool(v.strip()),
    "choice": lambda o, v: isinstance(v, str) and v in o.choices,
    "switch": lambda o, v: isinstance(v, bool) or (isinstance(v, str) and v.lower() in o.choices),
    "strings": lambda o, v: (
        isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
    ),
    "char": lambda o, v: isinstance(v, str) and len(v) == 1 and v not in o.choices,
    "codec": lambda o, v: isinstance(v, str) and _is_codec(v),
    "label": lambda o, v: isinstance(v, str) and bool(_LABEL.match(v)),
}
_EXPECTED: dict[str, Callable[[Option], str]] = {
    "bool": lambda o: "true or false",
    "int": lambda o: f"an integer{_range(o)}",
    "number": lambda o: f"a number{_range(o)}",
    "string": lambda o: "a string",
    "text": lambda o: "a non-blank string",
    "choice": lambda o: f"one of {', '.join(o.choices)}",
    "switch": lambda o: f"true, false or one of {', '.join(o.choices)}",
    "strings": lambda o: "a string or a list of strings",
    "char": lambda o: f"one character (not one of {o.choices!r})",
    "codec": lambda o: "a known text encoding",
    "label": lambda o: "an UPPER_SNAKE label",
}
