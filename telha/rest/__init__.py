"""The REST front: a starlette app (``/v1``) served by hypercorn (docs/rest-api.md)."""
