"""``AsyncTelha``'s versions calls against a real ``telha serve`` on each engine: ``diff``
(every page joined) and ``diff_page``, ``retire`` (again, 404, 409 as ``Conflict``), the
source's version states, and ``as_of`` on ``nodes`` and ``edges``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import msgspec
import pytest

from telha.client import (
    AsyncTelha,
    Conflict,
    ContentErased,
    IngestApplied,
    InvalidRequest,
    NotFound,
)
from tests.support.inproc import InProcessServer
from tests.support.server import write_config

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("client-versions")
    with InProcessServer(write_config(folder, engine, workers={"in_process": []})) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
async def telha(server: InProcessServer) -> AsyncIterator[AsyncTelha]:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    async with AsyncTelha(server.base_url, key, timeout=30, retries=0) as client:
        yield client


async def _json(telha: AsyncTelha, name: str, records: list[dict[str, object]]) -> IngestApplied:
    out = await telha.ingest("json", name, content=msgspec.json.encode(records).decode())
    assert isinstance(out, IngestApplied)
    return out


async def test_diff_joins_every_page(telha: AsyncTelha) -> None:
    first = await _json(telha, "d.json", [{"n": i} for i in range(25)])
    src = first.source_id
    await _json(telha, "d.json", [{"n": i + 100 if i < 9 else i} for i in range(20)])
    whole = await telha.diff(src, page_size=4)
    assert whole.next_cursor is None
    assert (len(whole.added), len(whole.removed), len(whole.changed)) == (9, 14, 0)
    assert whole.unchanged == 11
    one = await telha.diff_page(src, limit=1000)
    assert one == whole
    page = await telha.diff_page(src, whole.from_, whole.to, limit=4)
    assert page.next_cursor is not None and len(page.added) + len(page.removed) == 4
    (old_tx, new_tx) = (v.source_version_tx for v in reversed((await telha.source(src)).versions))
    assert (whole.from_, whole.to) == (old_tx, new_tx)
    first_only = await telha.diff(src, to_tx=old_tx)
    assert first_only.from_ is None and len(first_only.added) == 25
    with pytest.raises(InvalidRequest):
        await telha.diff(src, new_tx, old_tx)
    with pytest.raises(NotFound):
        await telha.diff(src, old_tx - 1)
    with pytest.raises(NotFound):
        await telha.diff(str(uuid.uuid4()))
    with pytest.raises(InvalidRequest):
        await telha.diff_page(src, cursor="bad")


async def test_retire_and_as_of(telha: AsyncTelha) -> None:
    first = await _json(telha, "r.json", [{"a": 1}, {"a": 2}])
    src = first.source_id
    done = await telha.retire(src, reason="replaced by s.json")
    assert done.source_id == src and done.nodes_closed == 2
    assert done.version_tx == first.source_version_tx
    assert done.retired.reason == "replaced by s.json"
    assert await telha.retire(src) == done  # again: the first answer
    source = await telha.source(src)
    assert source.retired == done.retired and [v.state for v in source.versions] == ["retired"]
    assert source.versions[0].changes is not None and source.versions[0].changes.nodes_added == 2
    assert [n async for n in telha.nodes(source_id=src)] == []
    then = [n async for n in telha.nodes(source_id=src, as_of=done.retired.tx - 1)]
    assert sorted(n.node_id for n in then) == sorted(first.node_ids)
    assert await telha.edges(first.node_ids[0], as_of=done.retired.tx - 1) == []
    with pytest.raises(NotFound):
        await telha.edges(first.node_ids[0])  # not in the current graph
    with pytest.raises(NotFound):
        await telha.retire(str(uuid.uuid4()))
    with pytest.raises(InvalidRequest):
        await telha.retire(src, reason="")


async def test_retire_of_an_erased_source_is_a_conflict(telha: AsyncTelha) -> None:
    first = await _json(telha, "e.json", [{"who": "x"}])
    resp = await telha._http.post(
        f"/v1/sources/{first.source_id}/erase", json={"reason": "a request"}
    )
    assert resp.status_code == 200, resp.text
    with pytest.raises(Conflict) as caught:
        await telha.retire(first.source_id)
    assert caught.value.status == 409 and caught.value.code == "CONFLICT"
    with pytest.raises(ContentErased):
        await telha.diff(first.source_id)
