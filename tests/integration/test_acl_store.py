"""The two forms of the ACL rule agree (docs/rest-api.md, "Principals"): the SQL condition
every listing and search adds (:func:`telha.storage.reads.acl.admitted`) and the Python
check of one source (:func:`telha.domain.acl.admits`, through ``source_admitted``), on
both engines, over items with and without ACLs (an empty one, non-ASCII names, quotes)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from telha.domain.acl import admits
from telha.domain.connectors import ConnectorItem
from telha.domain.model import Scope
from telha.storage.core.tx import Tx
from telha.storage.reads.acl import admitted
from tests.support.pg import ENGINES
from tests.support.stores import fresh_store

pytestmark = pytest.mark.anyio

ACLS: dict[str, list[str] | None] = {
    "none": None,
    "empty": [],
    "alice": ["user:alice"],
    "eng": ["group:eng", "user:bob"],
    "josé": ['group:a "quoted" one', "user:josé"],
    "like": ["user:a_%"],
}
ASKED: list[tuple[str, ...]] = [
    ("user:alice",),
    ("group:eng",),
    ("user:bob", "user:alice"),
    ("user:josé",),
    ('group:a "quoted" one',),
    ("user:ab%",),  # no pattern matching: only exact principals
    ("user:a_%",),
    ("user:ALICE",),
    ("user:nobody",),
]


@pytest.mark.parametrize("engine", ENGINES)
async def test_sql_and_python_forms_agree(engine: str, tmp_path: Path) -> None:
    scope = Scope(f"t-{uuid.uuid4()}", "o")
    connector = uuid.uuid4().bytes
    ids = {name: uuid.uuid4().bytes for name in ACLS}
    async with fresh_store(engine, tmp_path) as store:
        for name, acl in ACLS.items():
            item = ConnectorItem(connector, name, ids[name], name, acl=acl, updated_at=1)
            await store.connectors.record_item(scope, item)
        for asked in ASKED:

            async def seen(tx: Tx, asked: tuple[str, ...] = asked) -> set[bytes]:
                sid = await tx.known_scope_id(scope)
                cond, params = admitted("i", asked, tx.dialect)
                rows = await tx.fetchall(
                    f"SELECT i.source_id FROM connector_items i WHERE i.scope_id = ? AND {cond}",
                    sid, *params,
                )  # fmt: skip
                return {bytes(r[0]) for r in rows}

            by_sql = await store.read(seen)
            by_python = {ids[n] for n, acl in ACLS.items() if admits(acl, asked)}
            assert by_sql == by_python, asked
            for name in ACLS:
                checked = await store.reads.admitted(scope, ids[name], asked)
                assert checked == (ids[name] in by_sql), (asked, name)
        assert await store.reads.admitted(scope, uuid.uuid4().bytes, ("user:x",))  # no ACL
        assert await store.reads.admitted(scope, ids["empty"], None)  # no principals
