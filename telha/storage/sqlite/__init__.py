"""The embedded SQLite engine (aiosqlite, WAL, one writer, a pool of readers)."""

from telha.storage.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
