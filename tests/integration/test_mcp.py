"""``telha mcp`` as an agent reaches it: the ``mcp`` SDK's own client launches ``python -m
telha mcp`` over stdio against a real ``telha serve`` on each engine (``TELHA_URL``,
``TELHA_API_KEY``), lists its tools and calls them; answers carry exact byte ranges, and a
refused call is a tool error, not a dead server."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import httpx
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

import telha
from tests.support.server import ServerProcess

pytestmark = pytest.mark.anyio

_DOC = {"title": "Zen", "lines": ["Beautiful is better than ugly.", "Explicit is better."]}


def _params(server: ServerProcess, key: str) -> StdioServerParameters:
    env = {**os.environ, "TELHA_URL": server.base_url, "TELHA_API_KEY": key}
    return StdioServerParameters(command=sys.executable, args=["-m", "telha", "mcp"], env=env)


def _answer(result: Any) -> dict[str, Any]:
    """A tool call's JSON answer (its first text content)."""
    assert not result.is_error, result
    return dict(json.loads(result.content[0].text))


async def _ingest(client: httpx.AsyncClient) -> tuple[str, int]:
    resp = await client.post(
        "/v1/ingest", json={"format": "json", "name": "zen.json", "content": json.dumps(_DOC)}
    )
    assert resp.status_code == 201, resp.text
    return resp.json()["sourceId"], int(resp.json()["sourceVersionTx"])


async def test_tools_read_spans_nodes_and_sources(
    server: ServerProcess, scope_key: str, client: httpx.AsyncClient
) -> None:
    source_id, tx = await _ingest(client)
    text = (await client.get(f"/v1/sources/{source_id}/versions/{tx}/text")).content
    start = text.index(b"Beautiful")
    end = start + len(b"Beautiful is better than ugly.")
    nodes = (await client.get("/v1/nodes", params={"sourceId": source_id})).json()["nodes"]
    async with Client(_params(server, scope_key)) as mcp:
        info = mcp.server_info
        assert (info.name, info.version) == ("telha", telha.__version__)
        names = {t.name for t in (await mcp.list_tools()).tools}
        assert {"search", "locate", "read_span", "get_node", "list_sources"} <= names
        span = _answer(
            await mcp.call_tool(
                "read_span", {"sourceId": source_id, "versionTx": tx, "start": start, "end": end}
            )
        )
        assert span["text"] == "Beautiful is better than ugly."
        node = _answer(await mcp.call_tool("get_node", {"nodeId": nodes[0]["nodeId"]}))
        assert node["nodeId"] == nodes[0]["nodeId"]
        listed = _answer(await mcp.call_tool("list_sources", {"prefix": "zen"}))
        assert [s["sourceId"] for s in listed["sources"]] == [source_id]
        # An end past the text reads what exists, and says where it ended.
        rest = _answer(
            await mcp.call_tool(
                "read_span", {"sourceId": source_id, "versionTx": tx, "start": start, "end": 10**9}
            )
        )
        assert rest["text"].encode() == text[start:] and rest["end"] == len(text)
        # A range off the text is the server's INVALID_REQUEST as a tool error, the code
        # said once; the server goes on answering.
        bad = await mcp.call_tool(
            "read_span", {"sourceId": source_id, "versionTx": tx, "start": 10**9, "end": 10**9}
        )
        said = bad.content[0].text
        assert bad.is_error and "INVALID_REQUEST (400): start (" in said, said
        assert said.count("INVALID_REQUEST") == 1, said
        gone = await mcp.call_tool("get_node", {"nodeId": "0" * 32})
        assert gone.is_error and "NOT_FOUND" in gone.content[0].text
        again = await mcp.call_tool("list_sources", {"limit": 0})
        assert again.is_error and "limit" in again.content[0].text


async def test_search_and_locate_answer_byte_ranges_that_slice_to_the_words(
    server: ServerProcess, scope_key: str, client: httpx.AsyncClient
) -> None:
    source_id, tx = await _ingest(client)
    text = (await client.get(f"/v1/sources/{source_id}/versions/{tx}/text")).content
    async with Client(_params(server, scope_key)) as mcp:
        found = _answer(await mcp.call_tool("search", {"query": "beautiful ugly"}))
        (hit,) = found["hits"]
        assert hit["sourceId"] == source_id and hit["sourceVersionTx"] == tx
        words = sorted(text[m["start"] : m["end"]].decode() for m in hit["matches"])
        assert words == ["Beautiful", "ugly"]
        assert _answer(await mcp.call_tool("search", {"query": "nowhere"}))["hits"] == []
        # Whitespace differs from the stored text: found, not exact.
        places = _answer(await mcp.call_tool("locate", {"text": "Explicit  is\nbetter."}))
        (place,) = places["places"]
        assert text[place["start"] : place["end"]] == b"Explicit is better."
        assert place["exact"] is False and place["sourceId"] == source_id
        bad = await mcp.call_tool("search", {"query": '"unbalanced'})
        assert bad.is_error and "INVALID_REQUEST" in bad.content[0].text
