"""How each engine's store is composed (telha/storage/core/operations.py): every operation
mixin stands before the engine's base in the method resolution order, so a mixin's
cooperative ``__init__`` (say RawOps's locks) runs before the base's, and an engine's fast
path answers before the general path it overrides."""

from __future__ import annotations

import pytest

from telha.storage.core.engine import EngineOps
from telha.storage.core.jobs import JobOps
from telha.storage.core.operations import SharedOps
from telha.storage.core.versions import VersionOps
from telha.storage.postgres.base import PgBase
from telha.storage.postgres.fast import FastJobOps, FastVersionOps
from telha.storage.postgres.store import PostgresStore
from telha.storage.sqlite.base import SqliteBase
from telha.storage.sqlite.store import SqliteStore


@pytest.mark.parametrize(("store", "base"), [(PostgresStore, PgBase), (SqliteStore, SqliteBase)])
def test_the_engine_base_comes_after_every_operation(store: type, base: type) -> None:
    mro = store.__mro__
    assert mro[-3:] == (base, EngineOps, object)
    for ops in (*SharedOps.__bases__, VersionOps, JobOps):
        assert mro.index(ops) < mro.index(base), ops


def test_postgres_fast_paths_answer_first() -> None:
    mro = PostgresStore.__mro__
    assert mro.index(FastVersionOps) < mro.index(VersionOps)
    assert mro.index(FastJobOps) < mro.index(JobOps)
    assert PostgresStore.enqueue_job is FastJobOps.enqueue_job
    assert PostgresStore._commit_fast is FastVersionOps._commit_fast
