"""The page image route's part of the OpenAPI document (:mod:`telha.rest.openapi`)."""

from __future__ import annotations

from typing import Any

from telha.rest.page_routes import MAX_SCALE, MIN_SCALE

__all__ = ["page_paths"]


def page_paths(
    source: Any, tx: Any, param: Any, errors: dict[str, Any], erased: Any, secured: list[Any]
) -> dict[str, Any]:
    """``/v1/sources/{sourceId}/versions/{tx}/pages/{n}.png``, built with
    :mod:`telha.rest.openapi`'s helpers (``source`` and ``tx`` its path parameters,
    ``param(name, where, schema, description)``)."""
    return {
        "/v1/sources/{sourceId}/versions/{tx}/pages/{n}.png": {
            "get": {
                "summary": "Page n of a PDF version rendered as PNG",
                "description": (
                    "Rendered server-side from the version's raw bytes (PDFium), cached by"
                    " version, page and scale. At scale s one PDF point is s pixels, so a"
                    " node's bbox (points, top-left origin) times s is its box in the image."
                ),
                "security": secured,
                "parameters": [
                    source,
                    tx,
                    param("n", "path", {"type": "integer", "minimum": 1}, "page number, from 1"),
                    param(
                        "scale",
                        "query",
                        {"type": "number", "minimum": MIN_SCALE, "maximum": MAX_SCALE},
                        "pixels per PDF point (default 1: 72 dpi)",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "the page",
                        "headers": {
                            "x-page-size": {
                                "description": "the page's width and height in PDF points",
                                "schema": {"type": "string"},
                            }
                        },
                        "content": {
                            "image/png": {"schema": {"type": "string", "format": "binary"}}
                        },
                    },
                    "410": erased,
                    **errors,
                },
            }
        },
    }
