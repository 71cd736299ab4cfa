"""Shared harness of every Telha format worker (docs/worker-protocol.md).

A worker module exposes ``FORMATS`` (the format names it handles) and ``handle(job)``; the
same module runs inside ``telha serve`` (in-process pools) or remotely through
``python -m workers_common.run <module>``. Nothing here imports ``telha``.

The consumer (:class:`WorkerConsumer`, ``HEARTBEAT_INTERVAL_SECS``) is imported on first
use: it pulls the gRPC stubs and the log stack, which a light submodule (``destinations``,
``hosts``, …) imported through this package (``telha.config`` does) must not pay for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from workers_common.canonical import normalize_canonical
from workers_common.failures import (
    CorruptInput,
    ResourceLimit,
    TransientFailure,
    UnsupportedFeature,
    WorkerFailure,
    classify,
)
from workers_common.job import Job
from workers_common.result import IngestionResultBuilder

if TYPE_CHECKING:
    from workers_common.consumer import HEARTBEAT_INTERVAL_SECS, WorkerConsumer

__all__ = [
    "HEARTBEAT_INTERVAL_SECS",
    "CorruptInput",
    "IngestionResultBuilder",
    "Job",
    "ResourceLimit",
    "TransientFailure",
    "UnsupportedFeature",
    "WorkerConsumer",
    "WorkerFailure",
    "classify",
    "normalize_canonical",
]

#: The names imported on first use, and the submodule each comes from.
_LAZY = {
    "HEARTBEAT_INTERVAL_SECS": "workers_common.consumer",
    "WorkerConsumer": "workers_common.consumer",
}


def __getattr__(name: str) -> object:
    """``WorkerConsumer`` and ``HEARTBEAT_INTERVAL_SECS``, imported on first use.

    :raises AttributeError: any other unknown name.
    """
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'workers_common' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value
