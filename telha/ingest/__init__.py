"""Ingestion: request parsing, the JSON bypass projection, submission apply
(docs/architecture.md)."""
