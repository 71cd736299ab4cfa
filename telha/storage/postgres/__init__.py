"""The PostgreSQL engine (asyncpg): several ``telha serve`` replicas on one database."""

from telha.storage.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
