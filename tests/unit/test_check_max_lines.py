"""``scripts/check_max_lines.py``: the module cap warns (a split follows a named seam, never
the line), and fails only with ``--strict`` (docs/architecture.md, "Module size")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_max_lines.py"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    pkg = tmp_path / "pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "long.py").write_text("x = 1\n" * 12)
    (pkg / "short.py").write_text("y = 2\n" * 3)
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--max", "10", *args, str(pkg)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_module_over_the_cap_is_a_warning(tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 0
    assert "warning: " in done.stderr
    assert "long.py: 12 lines (cap 10)" in done.stderr
    assert "short.py" not in done.stderr


def test_strict_fails_on_a_module_over_the_cap(tmp_path: Path) -> None:
    done = _run(tmp_path, "--strict")
    assert done.returncode == 1
    assert "long.py: 12 lines (cap 10)" in done.stderr


def test_no_such_folder_is_an_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "absent")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "no such folder" in done.stderr
