"""Crawl fan-out (docs/formats.md, "Web pages"): which links of a page become child ``web``
jobs, and what each child's options say. Pure; robots.txt answers are passed in.

Scope: nothing when this job is at ``max_depth`` or ``max_pages`` is 1. Otherwise the page's
links in document order, each once, minus the page itself (requested or final URL), minus
links off the crawl's origin when ``same_origin``, not matching ``include`` (when given),
matching ``exclude``, or disallowed by robots.txt.

Budget: ``max_pages`` bounds this job plus all its descendants. The job keeps one page; the
first ``max_pages - 1`` links become children, and the pages left over are shared among them
as evenly as possible (the earlier children get the remainder), so a whole crawl never fetches
more than the first page's ``max_pages``, whatever the link graph, and the split is
deterministic. Children are deduplicated by core against an active job for the same URL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from web_worker.links import matches_any, origin_of
from web_worker.options import CrawlOptions

__all__ = ["candidates", "child_options"]


def candidates(
    links: Iterable[str], crawl: CrawlOptions, *, page_urls: tuple[str, ...], origin: str
) -> list[str]:
    """The links in scope (module docstring), robots.txt not yet applied: in document order,
    each once; :func:`child_options` applies robots.txt and the budget.

    :param links: absolute links of the page in document order (duplicates allowed).
    :param page_urls: the page's own URLs (requested, final), never followed.
    :param origin: the crawl's origin (``crawl.origin``, or this page's at depth 0).
    """
    if crawl.depth >= crawl.max_depth or crawl.max_pages <= 1:
        return []
    seen = set(page_urls)
    out: list[str] = []
    for url in links:
        if url in seen:
            continue
        seen.add(url)
        if crawl.same_origin and origin_of(url) != origin:
            continue
        if crawl.include and not matches_any(url, crawl.include):
            continue
        if matches_any(url, crawl.exclude):
            continue
        out.append(url)
    return out


def child_options(
    allowed: list[str],
    crawl: CrawlOptions,
    raw: dict[str, Any],
    *,
    origin: str,
) -> list[tuple[str, dict[str, Any]]]:
    """``(url, options)`` of each child job: ``allowed`` cut to the budget, each with
    ``crawl.depth + 1``, its share of ``max_pages``, the crawl's ``origin`` and the parent's
    other options unchanged.

    :param allowed: :func:`candidates`' result, minus what robots.txt disallows.
    :param raw: the parent's options as given.
    """
    urls = allowed[: crawl.max_pages - 1]
    if not urls:
        return []
    spare = crawl.max_pages - 1 - len(urls)
    share, extra = divmod(spare, len(urls))
    out: list[tuple[str, dict[str, Any]]] = []
    for i, url in enumerate(urls):
        child = replace(
            crawl, depth=crawl.depth + 1, max_pages=1 + share + (i < extra), origin=origin
        )
        out.append((url, {**raw, "crawl": child.to_json()}))
    return out
