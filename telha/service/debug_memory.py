"""An env-gated memory probe for soak runs (``bench/soak.py``): with
``TELHA_DEBUG_MEMORY=1`` (or ``=tracemalloc``) in ``telha serve``'s environment,
``GET /metrics`` also exports

- ``telha_debug_sqlite_heap_bytes``: bytes SQLite has allocated in this process now
  (``sqlite3_memory_used()``: its page caches — at most the writer's 16 MiB and 8 MiB per
  reader, see ``telha.storage.sqlite.base`` — plus statements and schema), read through
  ``ctypes`` from the same ``libsqlite3`` the ``sqlite3`` module is linked to;
- with ``=tracemalloc`` only, ``telha_debug_python_heap_bytes``: bytes of Python objects
  alive now, as ``tracemalloc`` counts them (started for this: it slows allocation and its
  own bookkeeping adds to the RSS, so such a run is for the breakdown, not the slope).

Unset, nothing is loaded or started. Not for production: it exists to tell bounded cache
fill from a leak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sqlite3
import tracemalloc
from collections.abc import Callable

__all__ = ["ENV", "debug_gauges"]

ENV = "TELHA_DEBUG_MEMORY"


def _sqlite_heap() -> Callable[[], float] | None:
    """``sqlite3_memory_used`` of the library the ``sqlite3`` module uses, or ``None`` when it
    cannot be found (a statically linked build) or is another version."""
    name = ctypes.util.find_library("sqlite3")
    if name is None:
        return None
    lib = ctypes.CDLL(name)
    lib.sqlite3_libversion.restype = ctypes.c_char_p
    if lib.sqlite3_libversion().decode() != sqlite3.sqlite_version:
        return None
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return lambda: float(lib.sqlite3_memory_used())


def debug_gauges(
    environ: dict[str, str] | None = None,
) -> list[tuple[str, str, Callable[[], float]]]:
    """``(name, doc, read)`` of each debug gauge to export, empty unless :data:`ENV` is
    ``1`` or ``tracemalloc`` in ``environ`` (default ``os.environ``); the latter starts
    ``tracemalloc``."""
    env = os.environ if environ is None else environ
    mode = env.get(ENV)
    if mode not in ("1", "tracemalloc"):
        return []
    gauges: list[tuple[str, str, Callable[[], float]]] = []
    sqlite_heap = _sqlite_heap()
    if sqlite_heap is not None:
        gauges.append(
            ("telha_debug_sqlite_heap_bytes", "Bytes SQLite has allocated now", sqlite_heap)
        )
    if mode != "tracemalloc":
        return gauges
    if not tracemalloc.is_tracing():
        tracemalloc.start()
    gauges.append(
        (
            "telha_debug_python_heap_bytes",
            "Bytes of live Python objects (tracemalloc)",
            lambda: float(tracemalloc.get_traced_memory()[0]),
        )
    )
    return gauges
