"""``options`` of a ``format=web`` job, validated into frozen dataclasses (docs/formats.md).

Keys (all optional):

- ``timeout_s`` (float, default 30): the fetch — navigation, settling, reading the rendered
  HTML — must finish within this many seconds once the origin's turn is ours (opening the
  page has a budget of its own), else ``transient`` (``timeout``).
- ``max_bytes`` (int, default 16 MiB): largest rendered HTML (UTF-8 bytes) or non-HTML body
  accepted; more is ``resource_limit``.
- ``wait_until`` (``"load"`` default, ``"domcontentloaded"``, ``"networkidle"``): the
  navigation event the page must reach; ``"load"`` runs every synchronous and ``onload``
  script, ``"networkidle"`` also waits for 500 ms without requests (slower).
- ``wait_for`` (CSS selector, default none): after navigation, wait until it matches (within
  what is left of ``timeout_s``); use it for pages that render after their own fetches.
- ``clarify`` (bool): report temporal ambiguities, as the docling ``html`` format does.
- ``crawl`` (object): fan-out, see :class:`CrawlOptions`.

An unknown key or a wrong type is ``unsupported_feature`` (``option: …``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast

from workers_common import UnsupportedFeature
from workers_common.format_options import option_names

__all__ = ["CRAWL_DELAY_S", "DEFAULT_MAX_BYTES", "CrawlOptions", "WebOptions", "parse_options"]

#: The navigation events ``options.wait_until`` may name.
WaitUntil = Literal["load", "domcontentloaded", "networkidle"]

#: Default ``crawl.delay_s`` of a crawl (``max_depth`` > 0), in seconds.
CRAWL_DELAY_S = 1.0
#: Default ``options.max_bytes``: 16 MiB.
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
_WAIT_UNTIL = ("load", "domcontentloaded", "networkidle")
_KEYS = frozenset(option_names("web"))  # declared once: workers_common.format_options
_CRAWL_KEYS = frozenset(option_names("web", "crawl"))


@dataclass(frozen=True, slots=True)
class CrawlOptions:
    """``options.crawl``: which discovered links become child ``web`` jobs.

    :ivar max_depth: link hops from the crawl's first page that are still fetched (0: none).
    :ivar max_pages: pages this job and all its descendants may fetch at most (>= 1); a
        job keeps one for itself and splits the rest among its children.
    :ivar same_origin: only links on the crawl's first page's origin (``scheme://host:port``).
    :ivar include: glob patterns (``fnmatch``, on the absolute URL); when given, a link must
        match one of them.
    :ivar exclude: glob patterns; a link matching one is never followed.
    :ivar delay_s: least seconds between two fetches of one origin by this worker process;
        default :data:`CRAWL_DELAY_S` when ``max_depth`` > 0 (a crawl), else 0.
    :ivar depth: this job's depth (0 for the submitted page; set by the parent in children).
    :ivar origin: the crawl's origin (set by the parent in children; ``None`` at depth 0).
    """

    max_depth: int = 0
    max_pages: int = 50
    same_origin: bool = True
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    delay_s: float = 0.0
    depth: int = 0
    origin: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``crawl`` object as child options carry it."""
        out: dict[str, Any] = {
            "max_depth": self.max_depth,
            "max_pages": self.max_pages,
            "same_origin": self.same_origin,
            "include": list(self.include),
            "exclude": list(self.exclude),
            "delay_s": self.delay_s,
            "depth": self.depth,
        }
        if self.origin is not None:
            out["origin"] = self.origin
        return out


@dataclass(frozen=True, slots=True)
class WebOptions:
    """A ``format=web`` job's options (module docstring); ``raw`` is what was given, passed on
    to children with only ``crawl`` changed."""

    timeout_s: float = 30.0
    max_bytes: int = DEFAULT_MAX_BYTES
    wait_until: WaitUntil = "load"
    wait_for: str | None = None
    clarify: bool = False
    crawl: CrawlOptions = field(default_factory=CrawlOptions)
    raw: dict[str, Any] = field(default_factory=dict)


def _bad(key: str, what: str) -> UnsupportedFeature:
    return UnsupportedFeature(f"option: {key} must be {what}")


def _number(options: dict[str, Any], key: str, default: float, *, minimum: float) -> float:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise _bad(key, f"a number >= {minimum:g}")
    return float(value)


def _int(options: dict[str, Any], key: str, default: int, *, minimum: int) -> int:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _bad(key, f"an integer >= {minimum}")
    return value


def _patterns(options: dict[str, Any], key: str) -> tuple[str, ...]:
    value = options.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise _bad(f"crawl.{key}", "a list of glob patterns")
    return tuple(value)


def _crawl(value: Any) -> CrawlOptions:
    if value is None:
        return CrawlOptions()
    if not isinstance(value, dict):
        raise _bad("crawl", "an object")
    unknown = sorted(set(value) - _CRAWL_KEYS)
    if unknown:
        raise UnsupportedFeature(f"option: unknown crawl option(s) {', '.join(unknown)}")
    same_origin = value.get("same_origin", True)
    if not isinstance(same_origin, bool):
        raise _bad("crawl.same_origin", "true or false")
    origin = value.get("origin")
    if origin is not None and not isinstance(origin, str):
        raise _bad("crawl.origin", "a string")
    max_depth = _int(value, "max_depth", 0, minimum=0)
    return CrawlOptions(
        max_depth=max_depth,
        max_pages=_int(value, "max_pages", 50, minimum=1),
        same_origin=same_origin,
        include=_patterns(value, "include"),
        exclude=_patterns(value, "exclude"),
        delay_s=_number(value, "delay_s", CRAWL_DELAY_S if max_depth else 0.0, minimum=0),
        depth=_int(value, "depth", 0, minimum=0),
        origin=origin,
    )


def parse_options(options: dict[str, Any]) -> WebOptions:
    """Validate a job's ``options``.

    :raises UnsupportedFeature: an unknown key or a value of the wrong type or range.
    """
    unknown = sorted(set(options) - _KEYS)
    if unknown:
        raise UnsupportedFeature(f"option: unknown option(s) {', '.join(unknown)}")
    wait_until = options.get("wait_until", "load")
    if wait_until not in _WAIT_UNTIL:
        raise _bad("wait_until", " or ".join(_WAIT_UNTIL))
    wait_for = options.get("wait_for")
    if wait_for is not None and (not isinstance(wait_for, str) or not wait_for.strip()):
        raise _bad("wait_for", "a CSS selector")
    clarify = options.get("clarify", False)
    if not isinstance(clarify, bool):
        raise _bad("clarify", "true or false")
    timeout_s = _number(options, "timeout_s", 30.0, minimum=0.1)
    return WebOptions(
        timeout_s=timeout_s,
        max_bytes=_int(options, "max_bytes", DEFAULT_MAX_BYTES, minimum=1),
        wait_until=cast(WaitUntil, wait_until),
        wait_for=wait_for,
        clarify=clarify,
        crawl=_crawl(options.get("crawl")),
        raw=dict(options),
    )
