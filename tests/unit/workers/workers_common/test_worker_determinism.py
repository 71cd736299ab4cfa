"""Determinism (docs/worker-protocol.md): the same bytes and options give the same
submission bytes — here BLAKE3 of what the consumer sends — for every corpus message and
source file, run in a fresh process so nothing cached in this one can make them agree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import CORPUS

ROOT = Path(__file__).resolve().parents[4]
SCRIPT = """
import sys
from pathlib import Path
import blake3, code_worker, email_worker
from workers_common import Job
from workers_common.handlers import encode
for line in sys.stdin.read().splitlines():
    fmt, path = line.split("\\t")
    module = code_worker if fmt == "code" else email_worker
    job = Job("id", f"ingest:{fmt}", fmt, Path(path).name, Path(path).read_bytes(), None, {},
              0, "t", "o")
    print(blake3.blake3(encode(module.handle(job))).hexdigest())
"""


def _files() -> list[tuple[str, Path]]:
    found = [("eml", p) for p in sorted((CORPUS / "eml").iterdir())]
    found += [("msg", p) for p in sorted((CORPUS / "msg").iterdir())]
    return found + [("code", p) for p in sorted((CORPUS / "code").glob("*/*"))]


def _hashes(files: list[tuple[str, Path]], hash_seed: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        input="\n".join(f"{fmt}\t{path}" for fmt, path in files),
        capture_output=True, text=True, check=True, cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'workers'}", "PYTHONHASHSEED": hash_seed},
    )  # fmt: skip
    return out.stdout.split()


def test_same_bytes_same_submission_hash_across_processes() -> None:
    files = _files()
    first, second = _hashes(files, "1"), _hashes(files, "2")  # set order differs between them
    assert len(first) == len(files) == len(set(first))  # one distinct hash per file
    assert first == second
