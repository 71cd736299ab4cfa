"""JSON responses, and the one error body shape (docs/rest-api.md, "Errors")."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import Response

from telha.wire import ErrorBody, ErrorDetail

__all__ = ["error_response", "json_response"]


def json_response(body: Any, status: int = 200) -> Response:
    """``body`` (a msgspec Struct or plain data) encoded as JSON."""
    return Response(msgspec.json.encode(body), status_code=status, media_type="application/json")


def error_response(code: str, message: str, status: int) -> Response:
    """The one error body shape: ``{"error": {"code", "message"}}``."""
    return json_response(ErrorBody(error=ErrorDetail(code=code, message=message)), status)
