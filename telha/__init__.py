"""Telha: an ingestion engine that gets documents into a graph with byte-exact provenance.

Importing ``telha`` imports no parser (docling, Playwright, tree-sitter); those live in
``workers/`` and are loaded only by the worker processes or pools that need them.
"""

__version__ = "0.1.0"
