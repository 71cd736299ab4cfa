"""The retrieval commands of the ``telha`` CLI (docs/cli-and-client.md): ``telha search``,
passages found by ``GET /v1/search`` with their byte ranges, and ``telha mcp``, a Model
Context Protocol server over stdio for LLM agents (:mod:`telha.cli.mcp_server`)."""

from __future__ import annotations

import click
from rich.console import Console
from rich.text import Text

from telha.cli.client import _KEY, _URL, _call
from telha.cli.plural import plural
from telha.client import AsyncTelha, SearchHitOut

__all__ = ["mcp", "search"]

#: Characters of a hit's text shown around its first match.
_WIDTH = 160


def _line(hit: SearchHitOut, span: bytes) -> Text:
    """``name p.N [start,end) text``: the span's text around its first match on one line
    (line ends shown as spaces), the matched words marked (bold yellow), ``…`` where cut.
    ``span`` is the hit's ``[start, end)`` bytes; ``matches`` are byte ranges of the same
    canonical text."""
    pieces: list[tuple[str, bool]] = []
    pos = 0
    for m in sorted(hit.matches, key=lambda r: r.start):
        lo, hi = max(m.start - hit.start, pos), min(m.end - hit.start, len(span))
        if lo >= hi:
            continue
        pieces += [(span[pos:lo].decode("utf-8"), False), (span[lo:hi].decode("utf-8"), True)]
        pos = hi
    pieces.append((span[pos:].decode("utf-8"), False))
    first = 0  # characters before the first match
    for piece, matched in pieces:
        if matched:
            break
        first += len(piece)
    text = Text()
    page = f" p.{hit.page}" if hit.page is not None else ""
    text.append(f"{hit.name}{page} [{hit.start},{hit.end}) ", style="dim")
    shown_from = max(0, first - _WIDTH // 3)
    if shown_from:
        text.append("…")
    at = 0
    for piece, matched in pieces:
        lo, hi = max(shown_from - at, 0), min(shown_from + _WIDTH - at, len(piece))
        if lo < hi:
            flat = piece[lo:hi].replace("\n", " ")
            text.append(flat, style="bold yellow" if matched else None)
        at += len(piece)
    text.rstrip()
    if at > shown_from + _WIDTH:
        text.append("…")
    return text


@click.command()
@click.argument("query")
@click.option("--source", "source_id", default=None, help="only this source's text")
@click.option("--label", default=None, help="only spans of nodes with this label")
@click.option("--format", "fmt", default=None, help="only sources of this format")
@click.option(
    "--limit", default=10, show_default=True, type=click.IntRange(1, 100), help="hits to print"
)
@_URL
@_KEY
def search(
    query: str,
    source_id: str | None,
    label: str | None,
    fmt: str | None,
    limit: int,
    url: str,
    api_key: str,
) -> None:
    """Find passages of the current text of every source: words (all required), "a phrase",
    prefix*. One line per hit, best first: `name p.N [start,end) text`, the offsets UTF-8
    bytes of the version's canonical text, the matched words highlighted on a terminal."""

    async def run(client: AsyncTelha) -> tuple[list[tuple[SearchHitOut, bytes]], int]:
        found = await client.search(
            query, source_id=source_id, label=label, format=fmt, limit=limit
        )
        out = []
        for hit in found.hits:
            text = await client.text(hit.source_id, hit.source_version_tx, hit.start, hit.end)
            out.append((hit, text.encode("utf-8")))
        return out, found.index_pending

    hits, pending = _call(url, api_key, run)
    console = Console(highlight=False, soft_wrap=True)
    for hit, span in hits:
        console.print(_line(hit, span))
    if not hits:
        click.echo("telha: no match", err=True)
    if pending:  # their text may be missing above (docs/cli-and-client.md, "telha search")
        click.echo(f"({plural(pending, 'version')} still being indexed)", err=True)


@click.command()
@_URL
@_KEY
@click.option(
    "--principals", envvar="TELHA_PRINCIPALS", default=None, metavar="LIST",
    help="act for these principals (user:alice,group:eng; env TELHA_PRINCIPALS): the tools"
    " see only sources without an ACL or whose ACL names one of them",
)  # fmt: skip
def mcp(url: str, api_key: str, principals: str | None) -> None:
    """Serve the Model Context Protocol over stdio (tools: search, locate, read_span,
    get_node, list_sources) against the Telha server at --url; for an agent's MCP
    configuration, e.g. command `telha`, args `["mcp"]`, env TELHA_URL and TELHA_API_KEY
    (and TELHA_PRINCIPALS for the people the agent answers for)."""
    import anyio

    from telha.cli.keys import principals_option
    from telha.cli.mcp_server import build_server

    acts_for = principals_option(principals)  # refused here, before any client call
    joined = ",".join(acts_for) if acts_for is not None else None
    anyio.run(build_server(url, api_key, joined).run_stdio_async)
