"""Benchmark: OCR pages/s through Telha end to end vs ``tesseract`` alone on the same pages.

Pages: ``--pages`` (20) US-letter pages of corpus prose (``pdf/multi_page.pdf``'s words,
about 250 a page), drawn with Pillow at 300 dpi (tests/support/ocr_pages.py) and saved as PNG.

End to end: a real ``telha serve`` subprocess on 127.0.0.1 with ``docling_worker`` in-process
(one consumer: one page at a time, like the floor); each page is POSTed as a ``png`` job
(JSON body, base64), timed from the first POST to the last ``completed``, after one warm-up
job (the parse child's start-up is not counted). Peak RSS: the largest ``VmHWM`` of the
server's descendants (the parse child and its ``tesseract`` processes), read from ``/proc``
every 0.25 s by a thread while the jobs run.

Floor, in the same run: one ``tesseract`` process reading the same PNG files from a list with
the same settings (``--oem 1 --psm 3 --dpi 300 -l eng tsv``, ``OMP_THREAD_LIMIT=1``); its peak
RSS from ``getrusage``. The two alternate ``--chunk`` (5) pages at a time, so a change in a
shared machine's load falls on both alike. Telha's orientation check (OSD) runs only on pages
read with low confidence, so these upright pages cost it nothing.

Run: ``.venv/bin/python bench/ocr.py [--pages 20]``. Exits 0 whether targets pass or not; 1 if
a job fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds queue.py: replace it (sys.path[0]) with the repo root so ``import queue`` is
# the stdlib's and ``telha``/``tests`` import from the checkout.
sys.path[0] = str(Path(__file__).resolve().parent.parent)
sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "workers"))

import argparse
import base64
import os
import resource
import subprocess
import tempfile
import threading
import time

import httpx

from tests.support.ocr_pages import corpus_words, render_page
from tests.support.server import ServerProcess, write_config

TARGET_RATIO = 1.3
TARGET_RSS_MB = 1024
WORDS_PER_PAGE = 250
#: docling's published CPU figures for its OCR pipeline (arXiv 2408.09869, Xeon), pages/s.
DOCLING_PUBLISHED = "0.6-0.9"


def make_pages(folder: Path, count: int) -> list[Path]:
    """``count`` PNG pages of corpus prose in ``folder``."""
    words = list(corpus_words())
    paths = []
    for i in range(count):
        start = (i * WORDS_PER_PAGE) % max(len(words) - WORDS_PER_PAGE, 1)
        image, _text = render_page(words[start : start + WORDS_PER_PAGE], 300)
        path = folder / f"page-{i:02d}.png"
        image.save(path, format="PNG", dpi=(300, 300))
        paths.append(path)
    return paths


def _processes() -> dict[int, tuple[int, str, float]]:
    """pid → (parent pid, name, ``VmHWM`` MB) of every process, read from ``/proc``."""
    found: dict[int, tuple[int, str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        hwm = int(fields.get("VmHWM", "0 kB").split()[0]) / 1024
        found[int(entry.name)] = (int(fields["PPid"]), fields["Name"].strip(), hwm)
    return found


def _ocr_hwm_mb(server_pid: int) -> float:
    """Largest ``VmHWM`` of the server's descendants (the parse child, tesseract), MB."""
    procs = _processes()
    family, peak = {server_pid}, 0.0
    for _ in range(4):  # server → parse child → tesseract: a few generations
        for pid, (ppid, _name, hwm) in procs.items():
            if ppid in family and pid not in family:
                family.add(pid)
                peak = max(peak, hwm)
    return peak


class _Sampler(threading.Thread):
    """Samples :func:`_ocr_hwm_mb` every 0.25 s until stopped (a thread, not a busy loop in
    the timed path)."""

    def __init__(self, server_pid: int) -> None:
        super().__init__(daemon=True)
        self.server_pid = server_pid
        self.peak = 0.0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.25):
            self.peak = max(self.peak, _ocr_hwm_mb(self.server_pid))


def run_both(tmp: Path, pages: list[Path], chunk: int) -> tuple[float, float, float, float]:
    """Seconds for all pages through ``telha serve`` and through the floor, and each one's
    peak RSS (MB). The two alternate, ``chunk`` pages at a time, so a change in the machine's
    load falls on both alike."""
    config = write_config(
        tmp, workers={"in_process": ["docling_worker"], "concurrency": 1},
        docling={"timeout_s": 600},
    )  # fmt: skip
    server = ServerProcess(config).start()
    try:
        key = server.create_key("bench", "org")
        assert server.proc is not None
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=60) as c:

            def post(name: str, path: Path) -> str:
                resp = c.post(
                    "/v1/ingest",
                    json={"format": "png", "name": name,
                          "contentBase64": base64.b64encode(path.read_bytes()).decode()},
                )  # fmt: skip
                resp.raise_for_status()
                return str(resp.json()["jobId"])

            def wait(job_id: str) -> None:
                while (job := c.get(f"/v1/ingest/{job_id}").json())["state"] not in (
                    "completed", "dead",
                ):  # fmt: skip
                    time.sleep(0.2)
                if job["state"] != "completed":
                    raise RuntimeError(f"{job_id}: {job['failureReason']}")

            sampler = _Sampler(server.proc.pid)
            sampler.start()
            wait(post("warm-up.png", pages[0]))
            seconds = floor_s = floor_mb = 0.0
            for i in range(0, len(pages), chunk):
                part = pages[i : i + chunk]
                part_s, floor_mb = run_floor(tmp, part)
                floor_s += part_s
                started = time.perf_counter()
                jobs = [post(f"bench/{p.name}", p) for p in part]
                for job_id in jobs:
                    wait(job_id)
                seconds += time.perf_counter() - started
            sampler.stopped.set()
            sampler.join()
            peak = max(sampler.peak, _ocr_hwm_mb(server.proc.pid))
    finally:
        server.stop()
    return seconds, peak, floor_s, floor_mb


def run_floor(tmp: Path, pages: list[Path]) -> tuple[float, float]:
    """Seconds for ``pages`` through one ``tesseract`` process, and the peak RSS (MB) of the
    processes it ran so far."""
    listing = tmp / "pages.txt"
    listing.write_text("".join(f"{p}\n" for p in pages))
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    args = ["tesseract", str(listing), "stdout", "--oem", "1", "--psm", "3", "--dpi", "300",
            "-l", "eng", "tsv"]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(args, capture_output=True, env=env, check=True)
    seconds = time.perf_counter() - started
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> int:
    """Run both paths and print the table; 1 if a job failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--chunk", type=int, default=5, help="pages per alternation")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="telha-bench-ocr-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "pages").mkdir()
        pages = make_pages(tmp / "pages", args.pages)
        try:
            e2e_s, e2e_mb, floor_s, floor_mb = run_both(tmp, pages, args.chunk)
        except RuntimeError as exc:
            print(f"ocr: job failed: {exc}", file=sys.stderr)
            return 1
    n = len(pages)
    ratio = e2e_s / floor_s
    print(f"ocr: {n} rendered pages (300 dpi, ~{WORDS_PER_PAGE} words each), one at a time")
    print("| path | s | pages/s | peak RSS MB |")
    print("|---|---|---|---|")
    print(f"| Telha end to end (png jobs, in-process worker) | {e2e_s:.1f} | {n / e2e_s:.2f} |"
          f" {e2e_mb:.0f} |")  # fmt: skip
    print(f"| tesseract alone (one process, same settings) | {floor_s:.1f} | {n / floor_s:.2f} |"
          f" {floor_mb:.0f} |")  # fmt: skip
    print(f"| docling OCR pipeline, published (Xeon CPU) | | {DOCLING_PUBLISHED} | |")
    rss = max(e2e_mb, floor_mb)
    print(f"ratio end-to-end / floor: {ratio:.2f} (target <= {TARGET_RATIO:g}); peak RSS of"
          f" OCR processes {rss:.0f} MB (target <= {TARGET_RSS_MB})")  # fmt: skip
    verdict = ratio <= TARGET_RATIO and rss <= TARGET_RSS_MB
    print(f"targets: {'PASS' if verdict else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
