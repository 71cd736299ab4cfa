"""Each REST route module describes exactly the routes it serves (``openapi_paths()`` beside
its handlers; telha/rest/openapi.py assembles them), and the route table of docs/rest-api.md
names the same routes: a route without a description, a description of a route the module
does not serve, or a route missing from the table (or one the table names that is gone)
fails here."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import msgspec
import pytest
from starlette.routing import Route

import telha.rest
from telha.rest import openapi

#: A starlette path whose OpenAPI spelling is not its parameters in camelCase.
_SPELLED = {
    "/v1/sources/{sourceId}/versions/{tx}/pages/{page}": (
        "/v1/sources/{sourceId}/versions/{tx}/pages/{n}.png"
    ),
}


def _camel(match: re.Match[str]) -> str:
    head, *rest = match.group(1).split("_")
    return "{" + head + "".join(w.title() for w in rest) + "}"


def _openapi_path(path: str) -> str:
    camel = re.sub(r"\{([a-z_]+)\}", _camel, path)
    return _SPELLED.get(camel, camel)


def _served(module: ModuleType) -> set[tuple[str, str]]:
    out = set()
    for route in module.routes:
        assert isinstance(route, Route)
        for method in route.methods or ():
            if method != "HEAD":  # starlette adds HEAD to every GET
                out.add((_openapi_path(route.path), method.lower()))
    return out


def _described(module: ModuleType) -> set[tuple[str, str]]:
    return {(p, m) for p, ops in module.openapi_paths().items() for m in ops}


#: Every route module but the viewer's static files (``/ui/``, not part of the API).
_ROUTE_MODULES = sorted(
    name
    for _, name, _ in pkgutil.iter_modules(telha.rest.__path__)
    if name.endswith("_routes") and name != "ui_routes"
)


@pytest.mark.parametrize("name", _ROUTE_MODULES)
def test_a_route_module_describes_what_it_serves(name: str) -> None:
    module = importlib.import_module(f"telha.rest.{name}")
    assert _described(module) == _served(module)


def test_the_document_describes_every_route_module() -> None:
    doc = msgspec.json.decode(openapi.openapi_document())
    described = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    served = _served(openapi)
    for name in _ROUTE_MODULES:
        served |= _served(importlib.import_module(f"telha.rest.{name}"))
    assert described == served


def _documented() -> set[tuple[str, str]]:
    """``(path, method)`` of each route the table of docs/rest-api.md ("Routes") names in its
    first column (``POST/GET /v1/connectors``: two methods; a query string dropped)."""
    text = (Path(__file__).parents[3] / "docs" / "rest-api.md").read_text(encoding="utf-8")
    rows = text.split("| method, path | what |", 1)[1].split("\n\n", 1)[0]
    out = set()
    for row in rows.splitlines()[2:]:
        first = row.split(" | ", 1)[0]
        for methods, path in re.findall(r"`([A-Z/]+) (/[^`?]*)[^`]*`", first):
            out |= {(path, m.lower()) for m in methods.split("/")}
    return out


def test_the_rest_api_table_names_every_route_described() -> None:
    doc = msgspec.json.decode(openapi.openapi_document())
    described = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert _documented() - {("/ui/", "get")} == described
