"""A store whose full-text index was written before one folding for index and query is
indexed again on upgrade, without re-ingesting (docs/architecture.md, "Search: words and
folding"). ``tests/fixtures/search_unicode61/search_unicode61.db`` was written by that code
(``make.py`` beside it): its index, cut and folded by FTS5's ``unicode61``, could never find
Hangul, й and ё, accented Greek, hamza forms, voiced kana or an Indic word. Migration 24
drops it and the start queues every current version; the search indexer writes it again
(``search_index_build_queued`` in the log), after which every one of those words is found
with its whole word highlighted, and ``telha check`` finds the index consistent."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess, telha_check, write_config

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "search_unicode61"


@pytest.fixture
def old_server(tmp_path: Path) -> Iterator[ServerProcess]:
    shutil.copy(FIXTURE / "search_unicode61.db", tmp_path / "telha.db")
    config = write_config(
        tmp_path, workers={"in_process": ["text_worker"], "concurrency": 1},
        search={"enabled": True},
    )  # fmt: skip
    srv = ServerProcess(config).start()
    yield srv
    assert srv.stop() == 0, srv.log_text()


async def test_an_old_index_is_written_again_and_finds_every_script(
    old_server: ServerProcess, tmp_path: Path
) -> None:
    key = (FIXTURE / "search_unicode61_key.txt").read_text().strip()
    async with httpx.AsyncClient(
        base_url=old_server.base_url, headers={"x-api-key": key}, timeout=60
    ) as c:
        for q, word in [("우리는", "우리는"), ("РУССКИЙ", "Русский"), ("ежик", "ёжик"),
                        ("йогурт", "йогурт"), ("κειμενο", "κείμενο"), ("ελληνικα", "Ελληνικά"),
                        ("الإنتاجية", "الإنتاجية"), ("データベース", "データベース"),
                        ("हिन्दी", "हिन्दी"), ("plain", "Plain")]:  # fmt: skip
            resp = await c.get("/v1/search", params={"q": q, "label": "PARAGRAPH"})
            assert resp.status_code == 200, resp.text
            (hit,) = resp.json()["hits"]
            text = await c.get(
                f"/v1/sources/{hit['sourceId']}/versions/{hit['sourceVersionTx']}/text"
            )
            raw = text.content
            assert [raw[m["start"] : m["end"]].decode() for m in hit["matches"]] == [word], q
    assert "search_index_build_queued" in old_server.log_text()
    check = telha_check(tmp_path / "config.toml")
    assert check.returncode == 0, check.stdout + check.stderr
