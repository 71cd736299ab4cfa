"""The checked-in telha_proto/ is exactly what `make proto` generates from proto/."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_current(tmp_path: Path) -> None:
    out = tmp_path / "telha_proto"
    out.mkdir()
    bin_dir = Path(sys.executable).parent
    subprocess.run(
        [
            sys.executable, "-m", "grpc_tools.protoc", "-I", str(ROOT / "proto"),
            f"--python_betterproto2_out={out}",
            "--python_betterproto2_opt=client_generation=async,server_generation=async",
            str(ROOT / "proto/telha/worker/v1/worker.proto"),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
    )  # fmt: skip
    generated = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    checked_in = sorted(
        p.relative_to(ROOT / "telha_proto")
        for p in (ROOT / "telha_proto").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert generated == checked_in, "run `make proto` and commit telha_proto/"
    for rel in generated:
        assert filecmp.cmp(out / rel, ROOT / "telha_proto" / rel, shallow=False), (
            f"{rel} is stale: run `make proto`"
        )
