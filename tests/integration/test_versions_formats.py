"""Versions that supersede, per format, end to end (docs/architecture.md, "Versions and node
identity"): a real server with in-process workers ingests a corpus file, then a changed
version under the same name. After it the source's current graph is exactly the new
version's, what did not change kept its id, what left is gone now and readable ``asOf`` the
old version, which shows the old graph exactly. Formats: JSON, CSV, XLSX, email (``.eml``
with and without a Message-ID, ``.msg``) and code (a source file, and an archive whose new
version retires the members it no longer holds). DOCX and PDF are in
``test_versions_docling.py``."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from collections.abc import Iterator
from typing import Any

import anyio
import openpyxl
import pytest
from code_worker import file_id

from tests.conftest import CORPUS
from tests.integration.versions_support import Scoped, check_new_version, graph, scoped, streamed
from tests.support.inproc import InProcessServer
from tests.support.server import write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("versions-formats")
    workers = ["text_worker", "tabular_worker", "email_worker", "code_worker"]
    config = write_config(folder, engine, workers={"in_process": workers, "concurrency": 2})
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _reingest(
    server: InProcessServer,
    scope: Scoped,
    fmt: str,
    name: str,
    v1: bytes,
    v2: bytes,
    options: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any], dict[str, Any], int]:
    """Ingest ``v1`` then ``v2`` as ``name`` in ``scope`` and run the common checks
    (:func:`check_new_version`; the reference: ``v2`` first ingested in a fresh scope);
    returns the source id, the graphs before and after (id → print) and a tx the old graph
    is read at (the old version's, or just before the new one when the old one streamed)."""
    async with scoped(server) as ref:
        ref_job = await ref.ingest(fmt, name, v2, options)
        reference = await graph(ref, ref_job["sourceId"])
    job1 = await scope.ingest(fmt, name, v1, options)
    src = str(job1["sourceId"])
    before = await graph(scope, src)
    await scope.ingest(fmt, name, v2, options)
    after = await graph(scope, src)
    first, second = await scope.versions(src)
    v1_tx = None if streamed(job1) else int(first["sourceVersionTx"])
    v2_tx = int(second["sourceVersionTx"])
    await check_new_version(scope, src, before, after, reference, v1_tx, v2_tx)
    return src, before.nodes, after.nodes, v2_tx - 1 if v1_tx is None else v1_tx


def _ids(nodes: dict[str, Any], label: str) -> set[str]:
    return {k for k, v in nodes.items() if label in v[0]}


async def test_json(server: InProcessServer) -> None:
    # The corpus copy ends before the array's closing bracket.
    v1 = (CORPUS / "json" / "dots_simple.json").read_bytes().rstrip() + b"]"
    records = json.loads(v1)
    records[2]["text"] = "Birgit Pfitzmann and Christoph Auer"
    records = [r for r in records if r["category"] != "Picture"]
    v2 = json.dumps(records).encode()
    async with scoped(server) as scope:
        _, before, after, _ = await _reingest(server, scope, "json", "dots.json", v1, v2)
    assert len(after) == len(before) - 1  # one record dropped, one replaced by a new one
    assert len(set(before) & set(after)) == len(before) - 2


async def test_csv(server: InProcessServer) -> None:
    v1 = (CORPUS / "csv" / "countries.csv").read_bytes()
    v2 = v1.replace(b"3,22,Germany,83", b"3,22,Germany,84")
    assert v2 != v1
    async with scoped(server) as scope:
        _, before, after, _ = await _reingest(server, scope, "csv", "countries.csv", v1, v2)
    assert _ids(before, "TABLE") == _ids(after, "TABLE") != set()
    assert len(set(before) - set(after)) == 1  # the edited row: a new node, the old closed


async def test_csv_streamed(server: InProcessServer) -> None:
    """One row per partial: the version streams and publishes at its finalize."""
    rows = [b"%d,name %d,%d" % (i, i, i * 10) for i in range(12)]
    v1 = b"id,name,value\n" + b"\n".join(rows) + b"\n"
    edited = [*rows[:3], b"3,name 3,31", *rows[4:7], *rows[8:]]  # one edited, one dropped
    v2 = b"id,name,value\n" + b"\n".join(edited) + b"\n"
    opts = {"rows_per_partial": 1}
    async with scoped(server) as scope:
        _, before, after, _ = await _reingest(server, scope, "csv", "s.csv", v1, v2, opts)
        assert scope.last is not None
        partials = [e for e in scope.last["events"] if e["transition"] == "partial"]
        assert len(partials) >= 10, partials
    assert _ids(before, "TABLE") == _ids(after, "TABLE") != set()
    assert len(set(before) - set(after)) == 2  # the edited row and the dropped one


async def test_a_streamed_version_reads_as_of_its_published_tx(server: InProcessServer) -> None:
    """A stream pins its sourceVersionTx at its first part and is published at its finalize
    (docs/architecture.md, "Versions and node identity"): asOf the pin shows none of it,
    asOf its publishedTx shows all of it."""
    async with scoped(server) as scope:
        raw = b"id,name\n" + b"".join(b"%d,n%d\n" % (i, i) for i in range(4))
        job = await scope.ingest("csv", "t.csv", raw, {"rows_per_partial": 1})
        assert streamed(job)
        (version,) = await scope.versions(str(job["sourceId"]))
        assert version["publishedTx"] > version["sourceVersionTx"]
        now = await graph(scope, str(job["sourceId"]))
        assert now.nodes
        assert await graph(scope, str(job["sourceId"]), int(version["publishedTx"])) == now
        before = await graph(scope, str(job["sourceId"]), int(version["sourceVersionTx"]))
        assert not before.nodes


def _xlsx_edit(raw: bytes) -> bytes:
    book = openpyxl.load_workbook(io.BytesIO(raw))
    sheet = book.worksheets[0]
    cell = next(c for row in sheet.iter_rows(min_row=2) for c in row if c.value is not None)
    cell.value = f"{cell.value} (edited)"
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


async def test_xlsx(server: InProcessServer) -> None:
    v1 = (CORPUS / "xlsx" / "xlsx_01.xlsx").read_bytes()
    v2 = _xlsx_edit(v1)
    async with scoped(server) as scope:
        _, before, after, _ = await _reingest(server, scope, "xlsx", "book.xlsx", v1, v2)
    assert _ids(before, "WORKBOOK") == _ids(after, "WORKBOOK") != set()
    assert _ids(before, "TABLE") == _ids(after, "TABLE") != set()


_REPLY = (CORPUS / "eml" / "raw_email_reply.eml").read_bytes()


def _eml_edit(raw: bytes) -> bytes:
    out = raw.replace(b"To: Mikel Lindsaar <mikel@xxxx.net>", b"To: Ada <ada@example.test>")
    assert out != raw
    lines = out.split(b"\n")
    body = lines.index(b"") if b"" in lines else lines.index(b"\r")
    lines.insert(body + 1, b"An extra opening paragraph.\n")
    return b"\n".join(lines)


async def test_eml(server: InProcessServer) -> None:
    async with scoped(server) as scope:
        _, before, after, v1_tx = await _reingest(
            server, scope, "eml", "reply.eml", _REPLY, _eml_edit(_REPLY)
        )
        (mikel,) = _ids(before, "PERSON") - _ids(after, "PERSON")
        assert json.loads(before[mikel][1])["address"] == "mikel@xxxx.net"
        assert await scope.status(mikel) == 404 and await scope.status(mikel, v1_tx) == 200
    assert _ids(before, "MESSAGE") == _ids(after, "MESSAGE") != set()
    assert len(_ids(before, "PERSON") & _ids(after, "PERSON")) == 1  # the sender


async def test_eml_without_message_id_keeps_its_message(server: InProcessServer) -> None:
    v1 = b"".join(
        line for line in _REPLY.splitlines(keepends=True) if not line.startswith(b"Message-ID:")
    )
    v2 = v1.replace(b"Subject: Re: Test reply email", b"Subject: Re: Test reply email (v2)")
    assert v2 != v1
    async with scoped(server) as scope:
        _, before, after, _ = await _reingest(server, scope, "eml", "no-id.eml", v1, v2)
    assert _ids(before, "MESSAGE") == _ids(after, "MESSAGE") != set()


async def test_msg_replaced_by_another_message(server: InProcessServer) -> None:
    # A .msg cannot be edited in place here: v2 is another message under the same name, so
    # its MESSAGE is new and the old one leaves the current graph.
    v1 = (CORPUS / "msg" / "test-outlook.msg").read_bytes()
    v2 = (CORPUS / "msg" / "testMSG_chinese.msg").read_bytes()
    async with scoped(server) as scope:
        _, before, after, v1_tx = await _reingest(server, scope, "msg", "mail.msg", v1, v2)
        (old,) = _ids(before, "MESSAGE")
        assert old not in after and await scope.status(old, v1_tx) == 200


def _go_v2(text: str) -> str:
    """``letter_test.go`` without ``TestIsSpace`` and with ``TestTo`` edited."""
    start = text.index("func TestIsSpace(")
    end = text.index("func TestLetterOptimizations(")
    out = text[:start] + text[end:]
    body = out.index("func TestTo(")
    brace = out.index("{", body) + 1
    return out[:brace] + "\n\t_ = 1 // edited" + out[brace:]


async def test_code_file(server: InProcessServer) -> None:
    v1 = (CORPUS / "code" / "go" / "letter_test.go").read_bytes()
    v2 = _go_v2(v1.decode()).encode()
    async with scoped(server) as scope:
        src, before, after, v1_tx = await _reingest(server, scope, "code", "letter_test.go", v1, v2)
        assert _ids(before, "FILE") == _ids(after, "FILE") == {file_id("", "letter_test.go")}

        async def functions(as_of: int | None) -> dict[str, tuple[str, str]]:
            g = await graph(scope, src, as_of)
            return {
                json.loads(p[1])["name"]: (node_id, p[2][0])
                for node_id, p in g.nodes.items()
                if "FUNCTION" in p[0]
            }

        old, new = await functions(v1_tx), await functions(None)
        assert set(old) - set(new) == {"TestIsSpace"}
        removed = old["TestIsSpace"][0]
        assert await scope.status(removed) == 404 and await scope.status(removed, v1_tx) == 200
        assert new["TestTo"][0] != old["TestTo"][0]  # edited: a new node, the old one closed
        assert await scope.status(old["TestTo"][0]) == 404
        for name in set(old) & set(new) - {"TestTo"}:  # the same code keeps its id, moved or not
            assert new[name] == old[name], name


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in sorted(files.items()):
            z.writestr(path, data)
    return buf.getvalue()


async def _until(scope: Scoped, node_id: str, test: Any, within_s: float = 60) -> dict[str, Any]:
    """The node once ``test(node)`` holds (member jobs run after their archive's)."""
    with anyio.fail_after(within_s):
        while True:
            resp = await scope.client.get(f"/v1/nodes/{node_id}")
            if resp.status_code == 200 and test(resp.json()):
                return dict(resp.json())
            await anyio.sleep(0.1)


_MEMBERS = {
    "pkg/a.py": b"def alpha():\n    return 1\n",
    "pkg/b.py": b"def beta():\n    return 2\n",
    "pkg/c.py": b"def gamma():\n    return 3\n",
}


async def test_archive_retires_members_it_no_longer_holds(server: InProcessServer) -> None:
    v1 = _zip(_MEMBERS)
    v2 = _zip({"pkg/a.py": _MEMBERS["pkg/a.py"], "pkg/c.py": b"def gamma():\n    return 33\n"})
    opts = {"repo": "r"}
    ids = {p: file_id("r", p) for p in _MEMBERS}
    async with scoped(server) as scope:
        job = await scope.ingest("code", "repo.zip", v1, opts)
        archive = str(job["sourceId"])
        members = {}
        for path, node_id in ids.items():
            node = await _until(scope, node_id, lambda n: True)
            members[path] = node["provenance"]["spans"][0]["sourceId"]
        before = await graph(scope, archive)
        (manifest,) = before.by_label("MANIFEST")
        (first,) = await scope.versions(archive)
        v1_tx = int(first["sourceVersionTx"])
        # A corrupt new version ends dead and retires nothing.
        bad = await scope.client.post(
            "/v1/ingest",
            json={"format": "code", "name": "repo.zip", "options": opts,
                  "contentBase64": base64.b64encode(b"PK\x03\x04 not a zip").decode()},
        )  # fmt: skip
        dead = await wait_job(scope.client, bad.json()["jobId"], within_s=60)
        assert dead["state"] == "dead", dead
        assert await scope.status(ids["pkg/b.py"]) == 200
        await scope.ingest("code", "repo.zip", v2, opts)
        # b.py left: its member source is retired with the archive's new version.
        b = ids["pkg/b.py"]
        (b_version,) = await scope.versions(members["pkg/b.py"])
        b_tx = int(b_version["sourceVersionTx"])
        assert await scope.status(b) == 404 and await scope.status(b, b_tx) == 200
        assert (await graph(scope, members["pkg/b.py"])).nodes == {}
        assert (await graph(scope, members["pkg/b.py"], b_tx)).nodes != {}
        # a.py is untouched (one version); c.py's member got a new version, the same FILE id.
        assert len(await scope.versions(members["pkg/a.py"])) == 1
        assert await scope.status(ids["pkg/a.py"]) == 200
        await _until(scope, ids["pkg/c.py"], lambda n: "33" in n["provenance"]["spans"][0]["text"])
        assert len(await scope.versions(members["pkg/c.py"])) == 2
        after = await graph(scope, archive)
        assert set(after.by_label("MANIFEST")) == {manifest}
        files = json.loads(next(iter(after.nodes.values()))[1])["files"]
        assert files == ["pkg/a.py", "pkg/c.py"]
        assert await graph(scope, archive, v1_tx) == before
        edges = (
            await scope.client.get(f"/v1/nodes/{manifest}/edges", params={"direction": "out"})
        ).json()["edges"]
        assert sorted(e["to"] for e in edges) == sorted([ids["pkg/a.py"], ids["pkg/c.py"]])
        # b.py back in a third version: its member ingests again (a retired source takes
        # the same bytes as a new version) and its FILE is current again.
        await scope.ingest("code", "repo.zip", v1, opts)
        await _until(scope, b, lambda n: True)
        assert len(await scope.versions(members["pkg/b.py"])) == 2


async def test_archive_leaves_a_file_another_source_wrote(server: InProcessServer) -> None:
    """The same FILE id written since by a source that is not the archive's member: the
    archive's new version does not retire that source."""
    opts = {"repo": "r"}
    async with scoped(server) as scope:
        await scope.ingest("code", "repo.zip", _zip(_MEMBERS), opts)
        b = file_id("r", "pkg/b.py")
        await _until(scope, b, lambda n: True)
        other = await scope.ingest(
            "code",
            "elsewhere.py",
            b"def beta():\n    return 22\n\n# other lines: other properties\n",
            {"repo": "r", "path": "pkg/b.py"},
        )
        node = await _until(scope, b, lambda n: "22" in n["provenance"]["spans"][0]["text"])
        assert node["provenance"]["spans"][0]["sourceId"] == other["sourceId"]
        await scope.ingest("code", "repo.zip", _zip({"pkg/a.py": _MEMBERS["pkg/a.py"]}), opts)
        assert await scope.status(b) == 200
        assert (await graph(scope, str(other["sourceId"]))).by_label("FILE") != {}
