"""The closing table of ``telha ingest`` as a person sees it (docs/cli-and-client.md,
"The closing table"), through real subprocesses against a real ``telha serve``: on an
80-column pseudo-terminal no line is wider than the terminal, ids are short and whole on
one line, ``--wide`` shows them in full; piped, the TSV has full ids; both end with the
summary line."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.inproc import InProcessServer
from tests.support.server import child_environ, write_config
from tests.support.tty import run_on_tty

HEADER = "file\tsource id\tjob id\tstate\tnodes\tfailure"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SUMMARY = re.compile(r"^(\d+ [a-z]+)(, \d+ [a-z]+)* in \d+\.\d s$")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("cli-table")
    config = write_config(folder, workers={"in_process": ["text_worker"], "concurrency": 2})
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _env(url: str, key: str, columns: int) -> dict[str, str]:
    return {**child_environ(), "TELHA_API_KEY": key, "TELHA_URL": url, "COLUMNS": str(columns),
            "LINES": "40", "PYTHONUNBUFFERED": "1"}  # fmt: skip


def _folder(tmp_path: Path) -> Path:
    """Five markdown files with long names (one twice as bytes: deduplicated on a second
    run) and one file no format is known for (refused)."""
    work = tmp_path / "work"
    deep = work / "quarterly-reports" / "north-east-region"
    deep.mkdir(parents=True)
    for n in range(5):
        (deep / f"meeting-notes-of-the-planning-committee-{n}.md").write_text(
            f"# Notes {n}\n\n{uuid.uuid4()} agreed.\n"
        )
    (work / "mystery.blob").write_bytes(bytes(range(256)) * 4)
    return work


def _tsv(stdout: str) -> dict[str, dict[str, str]]:
    lines = stdout.splitlines()
    start = lines.index(HEADER)
    rows = [dict(zip(HEADER.split("\t"), x.split("\t"), strict=True)) for x in lines[start + 1 :]]
    return {r["file"]: r for r in rows}


def test_the_table_fits_80_columns_with_short_whole_ids_and_a_summary(
    server: InProcessServer, tmp_path: Path
) -> None:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    work = _folder(tmp_path)
    cmd = [sys.executable, "-m", "telha", "ingest", "--root", str(work), str(work)]
    code, out = run_on_tty(cmd, _env(server.base_url, key, 80))
    assert code == 1, out  # the refused file
    out = ANSI.sub("", out)
    table = out[out.index(" file ") :]  # the bars before it redraw in place
    lines = table.splitlines()
    # The root line is the whole path, never folded (a path to copy; the terminal wraps it).
    assert lines[-2] == f"root: {work}", lines[-2]
    rest = lines[:-2] + lines[-1:]
    assert all(len(line) <= 80 for line in rest), "\n".join(x for x in rest if len(x) > 80)
    assert SUMMARY.match(lines[-1]), lines[-1]
    assert lines[-1].startswith("5 completed, 1 refused in "), lines[-1]

    # Piped: the same files, full ids, the summary on stderr (stdout stays the table).
    piped = subprocess.run(
        cmd, capture_output=True, text=True, env=_env(server.base_url, key, 80), timeout=120,
        check=False,
    )  # fmt: skip
    assert piped.returncode == 1, piped.stderr
    rows = _tsv(piped.stdout)
    assert len(rows) == 6
    assert piped.stderr.splitlines()[-1].startswith("1 refused, 5 deduplicated in ")
    assert rows["mystery.blob"]["state"] == "refused"
    sources = [r["source id"] for r in rows.values() if r["source id"]]
    assert len(sources) == 5 and all(len(s) == 36 for s in sources)

    # Each full source id shows on the terminal as a short form on one line, and the
    # short form names that id only.
    for full in sources:
        shown = [w for line in lines for w in line.split() if w and full.startswith(w)]
        shown = [w for w in shown if len(w) >= 8]
        assert shown, (full, table)
        assert len(shown[0]) < 36
        assert sum(s.startswith(shown[0]) for s in sources) == 1
    # Job ids (UUIDv7: the start is the time, shared by ids made together) are told apart
    # by their ends (…abcdef12), or their starts when those differ as soon.
    words = {w for line in lines for w in line.split()}
    with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}) as c:
        job_ids = [j["jobId"] for j in c.get("/v1/ingest").json()["jobs"]]
    assert len(job_ids) == 5
    for full in job_ids:
        shown = [w for w in words if len(w) >= 8 and (
            full.startswith(w) or (w.startswith("…") and full.endswith(w[1:])))]  # fmt: skip
        assert len(shown) == 1 and len(shown[0]) <= 13, (full, table)

    # --wide: full ids whole on a line (the terminal wraps what is wider than 80).
    code, out = run_on_tty([*cmd[:4], "--wide", *cmd[4:]], _env(server.base_url, key, 80))
    assert code == 1, out
    out = ANSI.sub("", out)
    for full in sources:
        assert full in out, out
    assert out.splitlines()[-1].startswith("1 refused, 5 deduplicated in ")


def test_one_file_is_said_in_the_singular(server: InProcessServer, tmp_path: Path) -> None:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    (tmp_path / "a.md").write_text(f"# A\n\n{uuid.uuid4()}\n")
    code, out = run_on_tty(
        [sys.executable, "-m", "telha", "ingest", str(tmp_path / "a.md")],
        _env(server.base_url, key, 80),
    )
    assert code == 0, out
    out = ANSI.sub("", out)
    assert out.splitlines()[-1].startswith("1 completed in "), out
