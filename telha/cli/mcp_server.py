"""``telha mcp``: a Model Context Protocol server over stdio (docs/cli-and-client.md, "MCP"),
so an LLM agent can find passages and cite them to the byte.

It is a client of a running ``telha serve`` like ``telha ingest`` (``--url``/``TELHA_URL``,
``--api-key``/``TELHA_API_KEY``), built on the ``mcp`` SDK's :class:`MCPServer`, and
exposes five tools, each one REST call through :class:`~telha.client.AsyncTelha`:

- ``search(query, sourceId?, label?, limit?)`` — ``GET /v1/search``: hits with their byte
  spans and the byte ranges of the matched words;
- ``locate(text, sourceId?, limit?)`` — ``POST /v1/locate``: where a quote occurs, to the byte;
- ``read_span(sourceId, versionTx, start, end)`` — the canonical text of ``[start, end)``
  (UTF-8 byte offsets into that version's text);
- ``get_node(nodeId)`` — a node with its provenance spans resolved to text;
- ``list_sources(prefix?, limit?)`` — the scope's sources, newest change first.

Tools answer JSON objects shaped like the REST answers (camelCase fields). A refused call
(no such source, a range off UTF-8 boundaries, a bad query) is a tool error carrying the
server's error code and message, never a crash of the server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import msgspec
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

import telha
from telha.client import AsyncTelha, TelhaError

__all__ = ["build_server"]

_T = TypeVar("_T")
#: Most hits or sources one tool call answers.
MAX_LIMIT = 100

_INSTRUCTIONS = (
    "Telha stores documents as a graph whose every node points at exact bytes of a source"
    " version's canonical text (NFC, LF line ends, UTF-8). Use `search` to find passages,"
    " `locate` to check that a quotation really occurs (and where), `read_span` to read the"
    " exact text of a byte range, and cite sources as sourceId, versionTx and [start, end)."
)


def _plain(value: Any) -> Any:
    """A client answer (msgspec structs, renamed to camelCase) as JSON-ready builtins."""
    return msgspec.to_builtins(value)


async def _called(call: Callable[[], Awaitable[_T]]) -> _T:
    """Run one REST call; a refusal becomes a :class:`ToolError` saying its code once:
    ``INVALID_REQUEST (400): <the server's message>`` (the client error's own text)."""
    try:
        return await call()
    except TelhaError as exc:
        raise ToolError(str(exc)) from exc


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ToolError(f"limit must be between 1 and {MAX_LIMIT}")
    return limit


def build_server(url: str, api_key: str, principals: str | None = None) -> MCPServer[None]:
    """The MCP server: its tools call the Telha REST front at ``url`` with ``api_key``
    (and ``principals``, the ``x-telha-principals`` header: the tools then see only the
    sources whose ACL admits one of them) through one :class:`AsyncTelha`, opened for the
    session and closed after it."""

    opened: list[AsyncTelha] = []

    @asynccontextmanager
    async def lifespan(_: MCPServer[None]) -> AsyncIterator[None]:
        async with AsyncTelha(url, api_key=api_key, principals=principals) as client:
            opened.append(client)
            try:
                yield None
            finally:
                opened.remove(client)

    server: MCPServer[None] = MCPServer(
        "telha", instructions=_INSTRUCTIONS, lifespan=lifespan, log_level="WARNING",
        version=telha.__version__,  # the serverInfo an MCP client shows (docs/cli-and-client.md)
    )  # fmt: skip

    def _client() -> AsyncTelha:
        """The client the lifespan opened for this session."""
        return opened[-1]

    @server.tool()
    async def search(
        query: str, sourceId: str | None = None, label: str | None = None, limit: int = 10
    ) -> dict[str, Any]:
        """Full-text search over the current text of every source: phrases in double
        quotes, `term*` for a prefix, all terms required. Each hit names its source,
        version and span [start, end) in UTF-8 bytes, a snippet, and `matches`: the byte
        ranges of the matched words."""
        client = _client()
        page = await _called(
            lambda: client.search(query, source_id=sourceId, label=label, limit=_limit(limit))
        )
        return dict(_plain(page))

    @server.tool()
    async def locate(text: str, sourceId: str | None = None, limit: int = 10) -> dict[str, Any]:
        """Where a quotation occurs in current source versions, also inside words and
        overlapping, compared folded (runs of whitespace as one; case, accents, ligatures
        and soft hyphens folded): each place's source, version, [start, end) in UTF-8
        bytes, node ids, and `match` ("exact": the bytes are the quote's; "folded": equal
        after folding). No places: the quote is not in the store."""
        client = _client()
        found = await _called(lambda: client.locate(text, source_id=sourceId, limit=_limit(limit)))
        return {"places": _plain(found)}

    @server.tool()
    async def read_span(sourceId: str, versionTx: int, start: int, end: int) -> dict[str, Any]:
        """The exact canonical text of bytes [start, end) of a source version (UTF-8 byte
        offsets, as search, locate and node provenance give them); an end past the text's
        end reads to its end, and `end` says where the text really ended."""
        client = _client()
        text = await _called(lambda: client.text(sourceId, versionTx, start, end))
        real_end = start + len(text.encode("utf-8"))
        return {"sourceId": sourceId, "versionTx": versionTx, "start": start, "end": real_end,
                "text": text}  # fmt: skip

    @server.tool()
    async def get_node(nodeId: str) -> dict[str, Any]:
        """A node: its labels, properties, and provenance spans with their text."""
        client = _client()
        return dict(_plain(await _called(lambda: client.node(nodeId))))

    @server.tool()
    async def list_sources(prefix: str | None = None, limit: int = 50) -> dict[str, Any]:
        """The scope's sources, newest change first: id, name, format, state, versions
        and the latest version's tx."""
        client = _client()
        want = _limit(limit)

        async def take() -> list[Any]:
            rows = []
            async for s in client.list_sources(prefix=prefix, page_size=want):
                rows.append(s)
                if len(rows) == want:
                    break
            return rows

        return {"sources": _plain(await _called(take))}

    return server
