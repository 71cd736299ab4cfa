"""The rules of sync runs (telha.domain.sync_runs: what a run reads, the prune guard,
its pages), the connector settings check, and the SDK driver with a delta connector
shaped like Microsoft Graph's (docs/connectors.md, "The SDK")."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from connectors.sdk import (
    ItemUnreadable,
    ListingIncomplete,
    RemoteItem,
    Removed,
    run_listing,
    run_pages,
)
from telha.domain.connectors import check_connector, connector_source_id
from telha.domain.errors import RequestError
from telha.domain.ids import source_id_for
from telha.domain.submission import InvalidSubmission
from telha.domain.sync_runs import (
    KnownItem,
    ListedIn,
    RunProgress,
    decode_page,
    progress_of,
    prune_warning,
    wanted,
)


def test_listed_items_to_read() -> None:
    """Read: new, retired, changed, no marker, last ingest failed (``None``); the rest are
    unchanged."""
    known = {
        "same": KnownItem("m1", False), "changed": KnownItem("m1", False),
        "retired": KnownItem("m1", True), "failed": KnownItem(None, False),
        "nomarker": KnownItem("m1", False),
    }  # fmt: skip
    listed = [
        ListedIn(external_id="same", marker="m1"), ListedIn(external_id="changed", marker="m2"),
        ListedIn(external_id="retired", marker="m1"), ListedIn(external_id="failed", marker="m1"),
        ListedIn(external_id="nomarker", marker=None), ListedIn(external_id="new", marker="m1"),
    ]  # fmt: skip
    assert wanted(listed, known) == ["changed", "retired", "failed", "nomarker", "new"]


@pytest.mark.parametrize(("gone", "held"), [(0, False), (2, False), (3, True), (10, True)])
def test_the_prune_guard(gone: int, held: bool) -> None:
    assert (prune_warning(gone, 10, 0.2, False) is not None) is held
    assert prune_warning(gone, 10, 0.2, True) is None
    if held:
        assert f"{gone} of 10" in str(prune_warning(gone, 10, 0.2, False))


def test_a_fresh_attempt_starts_its_counts_again() -> None:
    stats = msgspec.json.encode(RunProgress(listed=5, generation=1, next_seq=2))
    assert progress_of(stats, 1).listed == 5
    assert progress_of(stats, 2) == RunProgress(generation=2)
    assert progress_of(None, 3).next_seq == 0


def test_bad_pages_are_invalid_submissions() -> None:
    for raw in (
        b"{nope",
        b'{"complete": true, "partial": false, "surprise": 1}',
        b'{"complete": "yes", "partial": false}',
        b'{"partial": false}',  # the last page says whether the listing completed
        b'{"partial": true, "complete": true}',
        b'{"partial": false, "complete": true, "listed": [{"externalId": "a"}]}',
        b'{"listed": [' + b",".join([b'{"externalId": "a"}'] * 10_001) + b"]}",
    ):
        with pytest.raises(InvalidSubmission):
            decode_page(raw)
    assert decode_page(b'{"partial": false, "complete": false, "error": "503"}').error == "503"


def test_connector_source_ids() -> None:
    a = connector_source_id("c1", "acme", "docs/a.md")
    assert a == connector_source_id("c1", "acme", "docs/a.md")
    assert a != connector_source_id("c2", "acme", "docs/a.md")
    assert a != connector_source_id("c1", "other", "docs/a.md")
    assert a != source_id_for("docs/a.md")
    # The NUL separators keep the fields apart.
    assert connector_source_id("c1", "a", "bc") != connector_source_id("c1", "ab", "c")


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "folder", "settings": {"root": "/x"}, "every": True},
        {"kind": "folder", "settings": {"root": "/x"}, "pruneMaxFraction": float("nan")},
        {"kind": "folder", "settings": {"root": "/x\x00y"}},
        {"kind": "folder", "settings": {"root": "/x", "exclude": [""]}},
        {"kind": None},
    ],
)
def test_bad_connector_bodies(body: dict[str, object]) -> None:
    with pytest.raises(RequestError):
        check_connector(body)


class _Delta:
    """A delta source shaped like Graph's: the first call enumerates, later calls give the
    changes since the token, deletions as ``@removed``."""

    def __init__(self, pages: dict[str | None, list[dict[str, str]]]) -> None:
        self.pages = pages
        self.reads: list[str] = []
        self._next: str | None = None

    def full_listing(self, checkpoint: str | None) -> bool:
        return checkpoint is None

    def list(self, checkpoint: str | None) -> Iterator[RemoteItem | Removed]:
        if checkpoint == "broken":
            yield RemoteItem("x", "x.txt", "e1")
            raise ListingIncomplete("page 2 failed: 503")
        for entry in self.pages[checkpoint]:
            if "@removed" in entry:
                yield Removed(entry["id"])
            else:
                yield RemoteItem(entry["id"], entry["name"], entry.get("eTag"))
        self._next = f"after-{checkpoint}"

    def read(self, item: RemoteItem) -> bytes:
        if item.external_id == "locked":
            raise ItemUnreadable("locked: 423")
        self.reads.append(item.external_id)
        return f"content of {item.external_id}".encode()

    def next_checkpoint(self) -> str | None:
        return self._next


def _drive(
    source: _Delta, known: dict[str, str | None], checkpoint: str | None, **sizes: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the driver as core would answer it (each page's listed items whose marker is not
    ``known``'s); the pages sent and the final page's fields, items and failures gathered."""
    gen = run_pages(source, checkpoint, **sizes)
    pages = [next(gen)]
    while pages[-1]["partial"]:
        wanted = [
            e["externalId"] for e in pages[-1].get("listed", [])
            if e["marker"] is None or known.get(e["externalId"], "\0") != e["marker"]
        ]  # fmt: skip
        pages.append(gen.send(wanted))
    with pytest.raises(StopIteration):
        next(gen)
    final = dict(pages[-1])
    for key in ("items", "failed"):
        final[key] = [x for p in pages for x in p[key]]
    for key in ("listed", "removed"):
        final[key] = [x for p in pages for x in p.get(key, [])]
    return pages, final


def test_the_driver_with_a_delta_source() -> None:
    source = _Delta({
        None: [{"id": "1", "name": "a.txt", "eTag": "v1"},
               {"id": "2", "name": "b.md", "eTag": "v1"},
               {"id": "3", "name": "c.bin", "eTag": "v1"}, {"id": "locked", "name": "d.txt"}],
        "t1": [{"id": "1", "name": "a.txt", "eTag": "v2"}, {"id": "2", "@removed": "deleted"},
               {"id": "9", "name": "new.txt"}],
    })  # fmt: skip
    _, first = _drive(source, {}, None)
    assert first["fullListing"] is True and first["complete"] is True
    assert [e["externalId"] for e in first["listed"]] == ["1", "2", "locked"]  # c.bin: none
    assert [i["externalId"] for i in first["items"]] == ["1", "2"]
    assert first["items"][1]["format"] == "markdown"
    assert base64.b64decode(first["items"][0]["contentB64"]) == b"content of 1"
    assert first["failed"] == [{"externalId": "locked", "reason": "locked: 423"}]
    assert first["checkpoint"] == "after-None"
    source.reads.clear()
    _, second = _drive(source, {"1": "v1", "2": "v1"}, "t1")
    assert second["fullListing"] is False
    assert second["removed"] == ["2"]
    assert [i["externalId"] for i in second["items"]] == ["1", "9"]
    assert source.reads == ["1", "9"]
    # A known item with the same marker is not read.
    source.reads.clear()
    _, third = _drive(source, {"1": "v2"}, "t1")
    assert source.reads == ["9"] and [i["externalId"] for i in third["items"]] == ["9"]
    _, cut = _drive(source, {}, "broken")
    assert cut["complete"] is False and "503" in cut["error"] and cut["checkpoint"] is None
    assert [i["externalId"] for i in cut["items"]] == ["x"]  # what it read is still sent


def test_the_driver_pages_a_large_listing() -> None:
    """Listing pages of at most ``list_page`` entries; read items leave in pages of about
    ``page_bytes``; the last page lists nothing."""
    many = [{"id": str(i), "name": f"{i}.txt", "eTag": "v1"} for i in range(25)]
    source = _Delta({None: many})
    pages, final = _drive(source, {str(i): "v1" for i in range(0, 25, 2)}, None,
                          list_page=10, page_bytes=40)  # fmt: skip
    assert [len(p.get("listed", [])) for p in pages if p.get("listed")] == [10, 10, 5]
    assert all(len(p.get("listed", [])) + len(p.get("removed", [])) <= 10 for p in pages)
    assert len(final["listed"]) == 25 and [p["partial"] for p in pages][-1] is False
    assert "listed" not in pages[-1]
    assert sorted(int(i["externalId"]) for i in final["items"]) == list(range(1, 25, 2))
    assert all(sum(i["size"] for i in p["items"]) < 40 + 20 for p in pages)
    assert sorted(source.reads, key=int) == [str(i) for i in range(1, 25, 2)]


def test_a_dry_run_gathers_one_report() -> None:
    """``run_listing``: the pages gathered, core's answer played from ``known``."""
    source = _Delta({
        None: [{"id": "1", "name": "a.txt", "eTag": "v1"}, {"id": "2", "name": "b.md"}],
        "t1": [{"id": "1", "name": "a.txt", "eTag": "v1"}, {"id": "2", "@removed": "x"}],
    })  # fmt: skip
    full = run_listing(source, {"1": "v1"}, None)
    assert full["seen"] == ["1", "2"] and full["unchanged"] == 1 and full["fullListing"]
    assert [i["externalId"] for i in full["items"]] == ["2"] and source.reads == ["2"]
    delta = run_listing(source, {"1": "v1"}, "t1")
    assert delta["seen"] == [] and delta["removed"] == ["2"] and delta["items"] == []
    assert (delta["complete"], delta["checkpoint"], delta["unchanged"]) == (True, "after-t1", 1)
