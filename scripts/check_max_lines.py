#!/usr/bin/env python3
"""Warn when a Python module under the checked folders is longer than the cap (``make lint``).

    scripts/check_max_lines.py [--max N] [--strict] [FOLDER ...]  # default: 600, telha workers

Every ``*.py`` file counts; there is no ignore list. Generated code (``telha_proto/``) lives
outside the checked folders. The cap is a prompt to look for a seam, not a reason to cut a
module where it happens to cross the line: a split must follow a seam with a name
(docs/architecture.md, "Module size"). Every module over the cap is listed on standard error,
longest first, as a warning; the exit is 0, or 1 with ``--strict``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MAX_LINES = 600
FOLDERS = ("telha", "workers")


def line_count(path: Path) -> int:
    """Lines in ``path`` (a last line without its newline counts)."""
    with path.open("rb") as f:
        return sum(1 for _ in f)


def too_long(folders: list[Path], max_lines: int) -> list[tuple[int, Path]]:
    """``(lines, path)`` of every ``*.py`` module under ``folders`` over ``max_lines``,
    longest first."""
    found = [
        (n, path)
        for folder in folders
        for path in sorted(folder.rglob("*.py"))
        if (n := line_count(path)) > max_lines
    ]
    return sorted(found, key=lambda item: (-item[0], item[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=MAX_LINES, help="lines allowed per module")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a module is over the cap"
    )
    parser.add_argument("folders", nargs="*", type=Path, default=[Path(f) for f in FOLDERS])
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.folders if not f.is_dir()]
    if missing:
        sys.stderr.write(f"check_max_lines: no such folder: {', '.join(missing)}\n")
        return 2
    over = too_long(args.folders, args.max)
    for lines, path in over:
        sys.stderr.write(f"warning: {path}: {lines} lines (cap {args.max})\n")
    if over:
        sys.stderr.write(
            f"check_max_lines: {len(over)} module(s) over {args.max} lines: split each along a"
            " named seam (docs/architecture.md, 'Module size')\n"
        )
        return 1 if args.strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
