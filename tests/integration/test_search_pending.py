"""Search while the index catches up, as a person meets it (docs/rest-api.md, "Search";
docs/cli-and-client.md): with the indexer held back (``[search] settle_ms`` an hour, and
``catch_up_ms = 0`` so a search does none of the work itself) a search answers
``indexPending`` and ``telha search`` says ``(1 version still being indexed)``;
``telha ingest --wait-index`` waits for the index, and only returns once search finds
what it ingested. On each engine."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.inproc import InProcessServer
from tests.support.pg import ENGINES, require_engine
from tests.support.server import child_environ, write_config

HOUR_MS = 3_600_000


def _server(folder: Path, engine: str, **search: int) -> Iterator[InProcessServer]:
    config = write_config(
        folder, require_engine(engine), workers={"in_process": ["text_worker"], "concurrency": 1},
        search=search,
    )  # fmt: skip
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture(scope="module", params=ENGINES)
def held(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessServer]:
    """The index is never written while the test runs."""
    yield from _server(
        tmp_path_factory.mktemp("held"), str(request.param),
        catch_up_ms=0, settle_ms=HOUR_MS, max_defer_ms=HOUR_MS,
    )  # fmt: skip


@pytest.fixture(scope="module", params=ENGINES)
def background(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessServer]:
    """Only the background indexer writes the index (a search does none of it)."""
    yield from _server(tmp_path_factory.mktemp("background"), str(request.param), catch_up_ms=0)


def _env(server: InProcessServer, key: str) -> dict[str, str]:
    return {**child_environ(), "TELHA_URL": server.base_url, "TELHA_API_KEY": key,
            "PYTHONUNBUFFERED": "1"}  # fmt: skip


def _telha(server: InProcessServer, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "telha", *args], capture_output=True, text=True,
        env=_env(server, key), timeout=120, check=False,
    )  # fmt: skip


def _note(tmp_path: Path, word: str) -> Path:
    path = tmp_path / f"{word}.md"
    path.write_text(f"# Note\n\nThe {word} is in this note.\n")
    return path


def test_a_search_says_how_many_versions_wait_for_the_index(
    held: InProcessServer, tmp_path: Path
) -> None:
    key = held.create_key(f"t-{uuid.uuid4()}", "org")
    word = f"w{uuid.uuid4().hex[:12]}"
    ingested = _telha(held, key, "ingest", str(_note(tmp_path, word)))
    assert ingested.returncode == 0, ingested.stderr
    with httpx.Client(base_url=held.base_url, headers={"x-api-key": key}) as c:
        answer = c.get("/v1/search", params={"q": word})
        assert answer.status_code == 200
        assert answer.json() == {"hits": [], "nextCursor": None, "indexPending": 1}
        # Another scope's waiting versions are not this one's.
        other = held.create_key(f"t-{uuid.uuid4()}", "org")
        alone = c.get("/v1/search", params={"q": word}, headers={"x-api-key": other})
        assert alone.json()["indexPending"] == 0
    said = _telha(held, key, "search", word)
    assert said.returncode == 0, said.stderr
    assert said.stderr.splitlines() == ["telha: no match", "(1 version still being indexed)"]

    # --wait-index waits (the index is held), saying for what.
    proc = subprocess.Popen(
        [sys.executable, "-m", "telha", "ingest", "--wait-index", str(_note(tmp_path, "second"))],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env(held, key),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while not any("still being indexed" in x for x in lines) and time.monotonic() < deadline:
            lines.append(proc.stdout.readline())
        assert "search index: 2 versions still being indexed\n" in lines, lines
        assert proc.poll() is None  # still waiting
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_ingest_wait_index_returns_once_search_finds_it(
    background: InProcessServer, tmp_path: Path
) -> None:
    key = background.create_key(f"t-{uuid.uuid4()}", "org")
    words = [f"w{uuid.uuid4().hex[:12]}" for _ in range(3)]
    for w in words:
        _note(tmp_path, w)
    done = _telha(background, key, "ingest", "--wait-index", str(tmp_path))
    assert done.returncode == 0, done.stderr
    with httpx.Client(base_url=background.base_url, headers={"x-api-key": key}) as c:
        for w in words:  # this server's searches do no index work: the indexer did it
            answer = c.get("/v1/search", params={"q": w}).json()
            assert answer["indexPending"] == 0 and answer["hits"], answer
            assert {h["name"].rsplit("/", 1)[-1] for h in answer["hits"]} == {f"{w}.md"}
    found = _telha(background, key, "search", words[0])
    assert found.returncode == 0 and words[0] in found.stdout
    assert "still being indexed" not in found.stderr
