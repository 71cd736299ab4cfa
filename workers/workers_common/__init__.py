"""Shared harness of every Telha format worker (docs/worker-protocol.md).

A worker module exposes ``FORMATS`` (the format names it handles) and ``handle(job)``; the
same module runs inside ``telha serve`` (in-process pools) or remotely through
``python -m workers_common.run <module>``. Nothing here imports ``telha``.
"""

from workers_common.canonical import normalize_canonical
from workers_common.consumer import HEARTBEAT_INTERVAL_SECS, WorkerConsumer
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
