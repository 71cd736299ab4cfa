"""Deterministic node ids shared by workers (core upserts a node with a known id instead of
creating one; docs/architecture.md): uuid5 strings, so a worker can name a node another job
creates."""

from __future__ import annotations

import uuid

__all__ = ["ROOT_NAMESPACE", "child_root_id"]

#: Namespace of the ids of child jobs' projection roots.
ROOT_NAMESPACE = uuid.UUID("2d8f3c1a-6b4e-5f70-8a91-726f6f742121")


def child_root_id(name: str) -> str:
    """The id of the projection root of the child job named ``name`` (e.g.
    ``inbox/a.eml/report.pdf``): uuid5 of the name, so every parent naming the same child
    computes the same id. Pass it as ``root_node_id`` to
    :meth:`workers_common.IngestionResultBuilder.add_child_job`."""
    return str(uuid.uuid5(ROOT_NAMESPACE, f"root:{name}"))
