"""``telha api-key create``/``list``/``revoke`` (docs/cli-and-client.md) through real
subprocesses beside a real ``telha serve`` of each engine, and the key operations of the
storage contract on both engines: a key command never creates a store; ``list`` prints
id, scope, created, last used (never the key; TSV piped, a table on a terminal); a revoked
key is refused within the REST front's 10 s key cache."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import blake3
import httpx
import pytest

from telha.domain.model import Scope
from telha.storage import StorageEngine
from tests.support.inproc import InProcessServer
from tests.support.server import child_environ, write_config
from tests.support.tty import run_on_tty

LIST_HEADER = "id\tscope\tcreated\tlast used"


def _telha(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "telha", *args], capture_output=True, text=True, timeout=120,
        check=False, cwd=cwd, env={**child_environ(), "COLUMNS": "200"},
    )  # fmt: skip


def _rows(stdout: str) -> dict[str, dict[str, str]]:
    """``api-key list``'s TSV: key id → its row."""
    lines = stdout.splitlines()
    assert lines[0].startswith(LIST_HEADER), stdout
    header = lines[0].split("\t")
    return {r["id"]: r for r in (dict(zip(header, x.split("\t"), strict=True)) for x in lines[1:])}


@pytest.fixture(scope="module")
def keyed_server(
    engine: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp(f"keys-{engine}")
    with InProcessServer(write_config(folder, engine, workers={"in_process": []})) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def test_list_and_revoke_keys_beside_a_running_server(keyed_server: InProcessServer) -> None:
    config = str(keyed_server.config)
    tenant = f"t-{uuid.uuid4()}"
    keys = {}
    for org in ("one", "two"):
        made = _telha("api-key", "create", "--tenant", tenant, "--org", org, "--config", config)
        assert made.returncode == 0, made.stderr
        keys[org] = made.stdout.strip()

    listed = _telha("api-key", "list", "--config", config)
    assert listed.returncode == 0, listed.stderr
    assert all(key not in listed.stdout for key in keys.values())  # never the key
    rows = _rows(listed.stdout)
    ids = {r["scope"].split("/")[1]: i for i, r in rows.items() if r["scope"].startswith(tenant)}
    assert set(ids) == {"one", "two"}
    assert rows[ids["one"]]["last used"] == "-" and rows[ids["one"]]["created"].endswith("Z")

    with httpx.Client(base_url=keyed_server.base_url, timeout=30) as c:
        one, two = ({"x-api-key": keys[o]} for o in ("one", "two"))
        assert c.get("/v1/sources", headers=one).status_code == 200
        used = _rows(_telha("api-key", "list", "--config", config).stdout)[ids["one"]]
        assert used["last used"] != "-"  # noted by the key lookup
        only = _telha("api-key", "list", "--tenant", tenant, "--org", "two", "--config", config)
        assert set(_rows(only.stdout)) == {ids["two"]}

        revoked = _telha("api-key", "revoke", ids["one"], "--config", config)
        assert revoked.returncode == 0, revoked.stderr
        assert revoked.stdout.startswith(f"{ids['one']}  revoked  ")
        again = _telha("api-key", "revoke", ids["one"], "--config", config)
        assert again.stdout == revoked.stdout  # the first revoke, again
        started = time.monotonic()
        while c.get("/v1/sources", headers=one).status_code != 401:
            assert time.monotonic() - started < 11, "a revoked key still accepted after 10 s"
            time.sleep(0.25)
        assert c.get("/v1/sources", headers=two).status_code == 200

    after = _rows(_telha("api-key", "list", "--config", config).stdout)
    assert ids["one"] not in after and ids["two"] in after
    with_revoked = _telha("api-key", "list", "--revoked", "--config", config)
    assert _rows(with_revoked.stdout)[ids["one"]]["revoked"].endswith("Z")
    unknown = _telha("api-key", "revoke", str(uuid.uuid4()), "--config", config)
    assert unknown.returncode == 1 and "no such key" in unknown.stderr

    # On a terminal: a table, not TSV.
    code, out = run_on_tty(
        [sys.executable, "-m", "telha", "api-key", "list", "--config", config],
        {**child_environ(), "COLUMNS": "200"},
    )
    assert code == 0 and "last used" in out and ids["two"] in out and "\t" not in out, out


@pytest.mark.parametrize("command", ["create", "list", "revoke"])
def test_key_commands_never_create_a_store(tmp_path: Path, command: str) -> None:
    args = {
        "create": ["create", "--tenant", "t", "--org", "o"],
        "list": ["list"],
        "revoke": ["revoke", str(uuid.uuid4())],
    }[command]
    here = _telha("api-key", *args, cwd=tmp_path)
    assert here.returncode == 2, here.stderr
    assert f"no database at {tmp_path / 'data' / 'telha.db'}" in here.stderr
    assert "--config" in here.stderr and here.stdout == ""
    assert list(tmp_path.iterdir()) == []  # nothing created

    elsewhere = tmp_path / "conf"
    elsewhere.mkdir()
    config = write_config(elsewhere)
    named = _telha("api-key", *args, "--config", str(config), cwd=tmp_path)
    assert named.returncode == 2
    assert f"no database at {elsewhere / 'telha.db'} (config {config})" in named.stderr
    assert not (elsewhere / "telha.db").exists()


@pytest.mark.anyio
async def test_key_store_lists_revokes_and_notes_use(store: StorageEngine) -> None:
    a, b = Scope("ta", "o"), Scope("tb", "o")
    ha, hb = blake3.blake3(b"key a").digest(), blake3.blake3(b"key b").digest()
    await store.keys.add(a, "id-a", ha)
    await store.keys.add(b, "id-b", hb)
    listed = await store.keys.listed()
    assert [(k.key_id, k.scope, k.last_used_at, k.revoked_at) for k in listed] == [
        ("id-a", a, None, None),
        ("id-b", b, None, None),
    ]
    assert [k.key_id for k in await store.keys.listed(b)] == ["id-b"]
    assert await store.keys.listed(Scope("nobody", "o")) == []

    await store.keys.used(ha, 2_000_000)
    await store.keys.used(ha, 1_000_000)  # an earlier use noted late: the later kept
    (ka,) = await store.keys.listed(a)
    assert ka.last_used_at == 2_000_000

    at = await store.keys.revoke("id-a")
    assert at is not None and at >= ka.created_at
    assert await store.keys.revoke("id-a") == at  # the first revoke stands
    assert await store.keys.revoke("no-such-id") is None
    assert await store.keys.scope_for(ha) is None and await store.keys.scope_for(hb) == b
    assert [k.key_id for k in await store.keys.listed()] == ["id-b"]
    revoked = {k.key_id: k.revoked_at for k in await store.keys.listed(revoked=True)}
    assert revoked == {"id-a": at, "id-b": None}
