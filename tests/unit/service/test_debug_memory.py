"""The soak's memory probe (:mod:`telha.service.debug_memory`): off unless asked for; on, it reads
the heap of the SQLite library this process uses."""

from __future__ import annotations

import sqlite3

from telha.service.debug_memory import ENV, debug_gauges


def test_no_gauges_unless_the_variable_asks() -> None:
    assert debug_gauges({}) == []
    assert debug_gauges({ENV: "0"}) == []


def test_sqlite_heap_grows_with_a_page_cache() -> None:
    (name, _, read), *_ = debug_gauges({ENV: "1"})
    assert name == "telha_debug_sqlite_heap_bytes"
    before = read()
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x BLOB)")
    conn.executemany("INSERT INTO t VALUES (?)", [(b"x" * 1000,) for _ in range(2000)])
    assert read() > before + 1_000_000  # ~2 MB of pages in its cache
    conn.close()
