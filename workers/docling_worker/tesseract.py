"""Tesseract, driven as Debian's ``tesseract`` binary (``tesseract-ocr`` 5.x; never downloaded
at run time): orientation detection and word recognition of one page image.

Settings are pinned so the same image always gives the same words (docs/formats.md, "OCR"):
LSTM engine (``--oem 1``), fully automatic page segmentation without OSD (``--psm 3``),
one thread (``OMP_THREAD_LIMIT=1``), TSV output. Orientation is a separate pass
(``--psm 0``, ``osd.traineddata``) whose answer the caller applies before recognising again.

Each call is one ``tesseract`` process, a child of the docling child process: it inherits
that child's address-space ceiling (``RLIMIT_AS``) and dies with it (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from workers_common import CorruptInput, ResourceLimit, UnsupportedFeature

__all__ = [
    "ENGINE_MODE", "SEGMENTATION_MODE", "Word", "binary", "check_languages", "orientation",
    "recognise",
]  # fmt: skip

#: ``--oem``: the LSTM engine only.
ENGINE_MODE = 1
#: ``--psm``: fully automatic page segmentation, no OSD (orientation is its own pass).
SEGMENTATION_MODE = 3
#: Least OSD orientation confidence that turns a page (below: left as it is).
MIN_OSD_CONFIDENCE = 1.0
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True, slots=True)
class Word:
    """One recognised word: its text, confidence (0–100), the line it belongs to
    (``line``: tesseract's block, paragraph and line numbers) and its box ``[x0, y0, x1, y1]``
    in pixels of the image, top-left origin."""

    text: str
    confidence: float
    line: tuple[int, int, int]
    box: tuple[int, int, int, int]


def binary() -> str | None:
    """The ``tesseract`` executable (``TELHA_OCR__TESSERACT``, else ``tesseract`` on
    ``PATH``), or ``None`` when it is not installed."""
    named = os.environ.get("TELHA_OCR__TESSERACT", "").strip()
    if named:
        return named if os.access(named, os.X_OK) else None
    return shutil.which("tesseract")


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _unavailable() -> UnsupportedFeature:
    return UnsupportedFeature(
        "ocr_unavailable: tesseract is not installed (Debian's tesseract-ocr, which"
        " `make setup` installs)"
    )


def _run(args: list[str], timeout_s: float, what: str) -> subprocess.CompletedProcess[bytes]:
    exe = binary()
    if exe is None:
        raise _unavailable()
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        return subprocess.run(
            [exe, *args], capture_output=True, timeout=timeout_s, env=env, check=False,
            preexec_fn=_die_with_parent,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ResourceLimit(f"ocr: {what} took over {timeout_s:g} s") from None


def _dpi(dpi: int | None) -> list[str]:
    return ["--dpi", str(dpi)] if dpi else []


def orientation(image: Path, timeout_s: float, what: str, dpi: int | None = None) -> int:
    """Degrees (0, 90, 180, 270) to turn ``image`` counter-clockwise so its text reads
    upright; 0 when OSD is unsure or finds too little text. ``dpi``: the image's resolution
    when known (else tesseract estimates it).

    :raises ResourceLimit: OSD took over ``timeout_s``.
    """
    done = _run([str(image), "stdout", "--psm", "0", *_dpi(dpi)], timeout_s, what)
    fields: dict[str, str] = {}
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        rotate = int(fields["Rotate"])
        confidence = float(fields["Orientation confidence"])
    except (KeyError, ValueError):
        return 0
    if confidence < MIN_OSD_CONFIDENCE or rotate not in (90, 180, 270):
        return 0
    # tesseract's "Rotate" is clockwise; callers turn counter-clockwise.
    return (360 - rotate) % 360


@cache
def _installed(exe: str) -> frozenset[str]:
    done = subprocess.run([exe, "--list-langs"], capture_output=True, timeout=60, check=False)
    lines = done.stdout.decode("utf-8", "replace").splitlines()[1:]  # after the heading
    return frozenset(line.strip() for line in lines if line.strip())


def check_languages(languages: list[str]) -> None:
    """Raise unless tesseract and every language's data (``<name>.traineddata``) are
    installed.

    :raises UnsupportedFeature: ``ocr_unavailable: …`` naming what is missing.
    """
    exe = binary()
    if exe is None:
        raise _unavailable()
    missing = sorted(set(languages) - _installed(exe))
    if missing:
        raise UnsupportedFeature(
            f"ocr_unavailable: tesseract language data not installed: {', '.join(missing)}"
            " (Debian packages tesseract-ocr-<name>)"
        )


def recognise(
    image: Path, languages: list[str], timeout_s: float, what: str, dpi: int | None = None
) -> list[Word]:
    """The words of ``image`` in tesseract's reading order (module docstring settings);
    ``dpi`` as for :func:`orientation`.

    :raises ResourceLimit: recognition took over ``timeout_s``.
    :raises UnsupportedFeature: a language whose data is not installed (``ocr_unavailable``).
    :raises CorruptInput: tesseract cannot read the image.
    """
    args = [str(image), "stdout", "--oem", str(ENGINE_MODE), "--psm", str(SEGMENTATION_MODE),
            "-l", "+".join(languages), *_dpi(dpi), "tsv"]  # fmt: skip
    done = _run(args, timeout_s, what)
    err = done.stderr.decode("utf-8", "replace")
    if done.returncode != 0:
        if "traineddata" in err or "language" in err.lower():
            raise UnsupportedFeature(f"ocr_unavailable: {err.strip()[:200]}")
        raise CorruptInput(f"ocr: tesseract cannot read {what}: {err.strip()[:200]}")
    words: list[Word] = []
    for row in done.stdout.decode("utf-8", "replace").splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5" or not cols[11].strip():
            continue
        left, top, width, height = (int(c) for c in cols[6:10])
        words.append(
            Word(
                cols[11].strip(),
                max(float(cols[10]), 0.0),
                (int(cols[2]), int(cols[3]), int(cols[4])),
                (left, top, left + width, top + height),
            )
        )
    return words
