"""Storage: the domain-level Protocol and its engines (SQLite by default)."""
