"""The REST front: a starlette app (``/v1``) served by hypercorn (DESIGN.md §5)."""
