"""A fetched page as a submission (docs/formats.md, "Web pages"): the same projection as docling's
``html`` format, plus the page and its links.

**Rendered HTML.** The serialized DOM goes through docling's HTML conversion and
:func:`docling_worker.projection.project_document` in docling_worker's warm child processes
(:func:`docling_worker.isolation.pool`: memory ceiling, timeout), so a page gives the same
DOCUMENT/SECTION/PARAGRAPH/TABLE/TABLE_ROW nodes and spans as the same HTML sent as
``format=html``. Given to docling with a UTF-8 byte order mark: the DOM is UTF-8 whatever its
``<meta charset>`` still says. The DOCUMENT node then gets ``format: "web"``, ``url`` (the
job's name), ``final_url``, ``title`` and ``status``; the fetch time is not a property (it is
in the job's events), so an unchanged page gives an identical submission.

**Links.** Each hyperlink docling found on a SECTION or PARAGRAPH, made absolute against the
page's base URL (:func:`web_worker.links.absolute_url`), becomes one ``URL_REF`` node per
distinct URL in this submission (``url``; its spans are those of the blocks linking to it),
with a ``LINKS_TO`` edge (``ord``: 0-based, document order; ``anchor``: the link's text) from
each block holding the link to it, once per (block, URL). ``contentHash`` is BLAKE3 of the
rendered HTML bytes.

**Other media.** A response that is not HTML becomes a child job of the matching format
(:func:`route_format`) with the bytes as content, named ``<final URL>#<format>`` (a source of
its own, versioned on recrawl), and this job's version is a DOCUMENT stub (no text) with the
page properties, ``content_type`` and ``routed_to``; its ``contentHash`` is BLAKE3 of the bytes,
so an unchanged file is deduplicated and not routed again.
"""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import blake3
import msgspec
from docling_worker.isolation import pool

from web_worker.fetch import FetchedFile, FetchedPage
from web_worker.links import absolute_url
from workers_common import UnsupportedFeature

__all__ = ["page_links", "project_file", "project_page", "route_format"]

_BOM = b"\xef\xbb\xbf"
_MEDIA_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/csv": "csv",
    "text/tab-separated-values": "tsv",
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "message/rfc822": "eml",
    "application/vnd.ms-outlook": "msg",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
}
_SUFFIX_FORMATS = {
    ".pdf": "pdf", ".csv": "csv", ".tsv": "tsv", ".txt": "text", ".md": "markdown",
    ".eml": "eml", ".msg": "msg", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx",
}  # fmt: skip


def route_format(media_type: str, url: str) -> str:
    """The worker format for a non-HTML response: by media type, else (no type, or
    ``application/octet-stream``) by the URL path's extension.

    :raises UnsupportedFeature: ``content_type: …`` when neither names a format Telha reads.
    """
    fmt = _MEDIA_FORMATS.get(media_type)
    if fmt is None and media_type in ("", "application/octet-stream"):
        path = urlsplit(url).path.lower()
        fmt = next((f for s, f in _SUFFIX_FORMATS.items() if path.endswith(s)), None)
    if fmt is None:
        raise UnsupportedFeature(f"content_type: {media_type or 'none'} at {url} is not ingested")
    return fmt


def _convert(html: bytes, name: str, clarify: bool) -> dict[str, Any]:
    fd, path = tempfile.mkstemp(prefix="telha-web-", suffix=".html")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_BOM + html)
        body = pool().convert(Path(path), "html", name, clarify=clarify, links=True)
    finally:
        os.unlink(path)
    out: dict[str, Any] = msgspec.json.decode(body)
    return out


def _document(sub: dict[str, Any]) -> dict[str, Any]:
    node: dict[str, Any] = next(n for n in sub["nodes"] if "DOCUMENT" in n["labels"])
    return node


def page_links(sub: dict[str, Any], base_url: str) -> list[tuple[int, str, str]]:
    """``(holding node index, absolute URL, anchor text)`` of the projection's hyperlinks, in
    document order (kept: http/https only)."""
    out: list[tuple[int, str, str]] = []
    for ref, href, text in sub.get("links", []):
        url = absolute_url(base_url, str(href))
        if url is not None:
            out.append((int(ref), url, str(text)))
    return out


def project_page(
    page: FetchedPage, name: str, *, clarify: bool
) -> tuple[dict[str, Any], list[str]]:
    """The submission for a rendered page, and its distinct link URLs in document order.
    Runs docling in a child process: call it from a worker thread.

    :raises WorkerFailure: as docling's ``html`` conversion fails.
    """
    sub = _convert(page.html, name, clarify)
    links = page_links(sub, page.base_url)
    sub.pop("links", None)
    doc = _document(sub)
    doc["properties"].update(
        {"format": "web", "url": name, "final_url": page.final_url, "title": page.title,
         "status": page.status}
    )  # fmt: skip
    nodes: list[dict[str, Any]] = sub["nodes"]
    rels: list[dict[str, Any]] = sub["relationships"]
    url_refs: dict[str, int] = {}
    linked: set[tuple[int, int]] = set()
    for ref, url, anchor in links:
        target = url_refs.get(url)
        if target is None:
            target = len(nodes)
            url_refs[url] = target
            nodes.append({"labels": ["URL_REF"], "properties": {"url": url}, "spanRefs": []})
        if (ref, target) in linked:
            continue
        linked.add((ref, target))
        spans = nodes[target]["spanRefs"]
        spans.extend(s for s in nodes[ref]["spanRefs"] if s not in spans)
        rels.append(
            {"type": "LINKS_TO", "properties": {"ord": len(linked) - 1, "anchor": anchor},
             "fromRef": ref, "toRef": target}
        )  # fmt: skip
    sub["contentHash"] = blake3.blake3(page.html).hexdigest()
    stats = dict(sub.get("stats") or {})
    stats.update(
        {"status": page.status, "links": len(url_refs), "html_bytes": len(page.html),
         "blocked_requests": page.blocked_requests}
    )  # fmt: skip
    sub["stats"] = stats
    return sub, list(url_refs)


def project_file(fetched: FetchedFile, name: str) -> dict[str, Any]:
    """The stub submission of a non-HTML response, with its child job (module docstring).

    :raises UnsupportedFeature: a media type no worker reads.
    """
    fmt = route_format(fetched.content_type, fetched.final_url)
    props = {
        "name": name, "format": "web", "url": name, "final_url": fetched.final_url,
        "status": fetched.status, "content_type": fetched.content_type, "routed_to": fmt,
    }  # fmt: skip
    return {
        "v": 1,
        "canonicalText": "",
        "spans": [],
        "nodes": [{"labels": ["DOCUMENT"], "properties": props, "spanRefs": []}],
        "relationships": [],
        "stats": {
            "status": fetched.status,
            "routed_to": fmt,
            "bytes": len(fetched.body),
            "blocked_requests": fetched.blocked_requests,
        },
        "contentHash": blake3.blake3(fetched.body).hexdigest(),
        "childJobs": [
            {
                "format": fmt,
                "name": f"{fetched.final_url}#{fmt}",
                "options": {},
                "contentB64": base64.b64encode(fetched.body).decode(),
            }
        ],
    }
