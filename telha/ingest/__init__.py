"""Ingestion: request parsing, the JSON bypass projection, submission apply (spec 001, 004)."""
