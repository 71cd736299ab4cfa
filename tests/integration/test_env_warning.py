"""A misspelled ``TELHA_*`` variable as a person meets it: ``telha serve`` starts, and its
log says the variable is ignored and names the key it may have meant (docs/operations.md,
"Environment variables"); the client's and tests' own variables are never warned about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.server import ServerProcess, write_config


def test_serve_warns_of_a_misspelled_variable_naming_the_closest_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELHA_SERVER_REST_ADDR", "127.0.0.1:7999")  # one underscore
    monkeypatch.setenv("TELHA_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("TELHA_API_KEY", "telha_x")
    monkeypatch.setenv("TELHA_TEST_ANYTHING", "1")
    config = write_config(tmp_path, workers={"in_process": []})
    with ServerProcess(config) as server:
        assert server.stop() == 0, server.log_text()
    events = [json.loads(x) for x in server.log_text().splitlines() if x.startswith("{")]
    warned = [e for e in events if e.get("event") == "unknown_env_var"]
    assert [e["name"] for e in warned] == ["TELHA_SERVER_REST_ADDR"], warned
    assert warned[0]["level"] == "warning"
    assert warned[0]["detail"].endswith("did you mean TELHA_SERVER__REST_ADDR?")
    # It was ignored: the server bound the config file's address, not 7999.
    assert not server.base_url.endswith(":7999")
