"""Small things a person meets at a terminal (docs/cli-and-client.md): a missing key names
the environment variable beside the option."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid


def test_a_missing_key_names_telha_api_key_beside_the_option() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TELHA_API_KEY"}
    for args in (["job", str(uuid.uuid4())], ["search", "words"], ["ingest", "."]):
        out = subprocess.run(
            [sys.executable, "-m", "telha", *args], capture_output=True, text=True, env=env,
            timeout=60, check=False,
        )  # fmt: skip
        assert out.returncode == 2, out.stderr
        assert "Missing option '--api-key' (or TELHA_API_KEY)." in out.stderr, out.stderr
