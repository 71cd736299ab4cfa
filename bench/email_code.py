"""Benchmark: e-mail messages with attachments and a real source tree through Telha, each next
to the parse alone measured in the same run (bench/RESULTS.md).

**E-mail.** 1,000 generated ``.eml`` messages (From/To/Cc, a Date, a Message-ID, half of them
replies, a three-paragraph body), each with a small text attachment of its own, so each
message is two jobs: the message, then its attachment as a ``text`` child job. POSTed as JSON
(base64) by 16 concurrent clients to a real ``telha serve`` on 127.0.0.1 with
``email_worker`` and ``text_worker`` in-process (2 consumers each, the default;
``BENCH_CONSUMERS`` changes it); timed from the first POST until no job is unfinished (read
from the server's SQLite file every 20 ms, so polling costs the server nothing); then every
message *and* every attachment is checked applied (their DOCUMENT nodes), off the clock. Floor:
``email_worker.handle`` then ``text_worker.handle`` on the same bytes in a loop in this
process, no I/O, one core.

**Code.** The project's own ``telha/`` and ``workers/`` ``.py`` files packed as one ``.zip``,
POSTed as ``format=code``: one archive job, then one child job per file; timed the same way,
every file's FILE node checked. Floor: ``code_worker.handle`` on the archive, then on every file.
Each round uses a new tenant (nothing deduplicates across rounds); median of the rounds.

Targets on 2 cores: >= 100 messages/s and >= 50 files/s end to end, ratio end to end / floor
<= 3. Run: ``.venv/bin/python bench/email_code.py [--rounds 3] [--messages 1000]``. Exits 0
whether the targets pass or not; 1 if a job fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds queue.py: replace it (sys.path[0]) with the repo root so ``import queue`` is
# the stdlib's and ``telha``/``tests`` import from the checkout.
ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)
sys.path.insert(1, str(ROOT / "workers"))

import argparse
import base64
import io
import os
import statistics
import tempfile
import time
import zipfile
from collections.abc import Callable
from email.message import EmailMessage
from typing import Any

import anyio
import code_worker
import email_worker
import httpx

import text_worker
from tests.support.server import ServerProcess, wait_jobs_finished, write_config
from workers_common import Job

TARGET_MESSAGES_S = 100
TARGET_FILES_S = 50
TARGET_RATIO = 3.0
CLIENTS = 16
#: Consumers per worker module (the default configuration has 2).
CONSUMERS = int(os.environ.get("BENCH_CONSUMERS", "2"))
WORDS = [
    "ledger", "supplier", "invoice", "quarter", "freight", "delay", "contract", "audit",
    "budget", "forecast", "warehouse", "shipment", "payment", "review", "schedule",
]  # fmt: skip


def make_messages(n: int) -> list[bytes]:
    """``n`` distinct messages, each with one text attachment of its own (deterministic)."""
    out = []
    for i in range(n):
        msg = EmailMessage()
        msg["From"] = f"Person {i % 37} <p{i % 37}@example.test>"
        msg["To"] = ", ".join(f"p{(i + k) % 37}@example.test" for k in (1, 2))
        msg["Cc"] = f"team{i % 5}@example.test"
        msg["Subject"] = f"{'Re: ' if i % 2 else ''}Status {i // 2}"
        msg["Date"] = f"Tue, {1 + i % 28:02d} Sep 2026 {i % 24:02d}:00:00 +0000"
        msg["Message-ID"] = f"<m{i}@example.test>"
        if i % 2:
            msg["In-Reply-To"] = f"<m{i - 1}@example.test>"
        words = [WORDS[(i * 7 + k) % len(WORDS)] for k in range(60)]
        body = "\n\n".join(" ".join(words[k : k + 20]).capitalize() + "." for k in (0, 20, 40))
        msg.set_content(body + "\n")
        note = f"Attachment {i}: " + " ".join(words[:30]) + "\n"
        msg.add_attachment(note.encode(), maintype="text", subtype="plain", filename=f"n{i}.txt")
        out.append(bytes(msg))
    return out


def make_tree_zip() -> tuple[bytes, dict[str, bytes]]:
    """The project's ``telha/`` and ``workers/`` Python files as one zip, and the files."""
    files = {
        str(p.relative_to(ROOT)): p.read_bytes()
        for folder in ("telha", "workers")
        for p in sorted((ROOT / folder).rglob("*.py"))
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    return buf.getvalue(), files


def _job(fmt: str, name: str, raw: bytes, options: dict[str, Any] | None = None) -> Job:
    return Job("bench", f"ingest:{fmt}", fmt, name, raw, None, options or {}, 0, "t", "o")


def floor(fn: Callable[[], None], rounds: int) -> float:
    """Median seconds of ``fn`` over ``rounds`` (after one warm-up call)."""
    fn()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def parse_messages(messages: list[bytes]) -> None:
    for i, raw in enumerate(messages):
        out = email_worker.handle(_job("eml", f"m{i}.eml", raw))
        for child in out["childJobs"]:
            content = base64.b64decode(child["contentB64"])
            text_worker.handle(_job(child["format"], child["name"], content))


def parse_tree(archive: bytes) -> None:
    out = code_worker.handle(_job("code", "tree.zip", archive, {"repo": "bench"}))
    for child in out["childJobs"]:
        content = base64.b64decode(child["contentB64"])
        code_worker.handle(_job("code", child["name"], content, child["options"]))


async def _count(c: httpx.AsyncClient, label: str) -> int:
    total, cursor = 0, None
    while True:
        params = {"label": label, "limit": 1000, **({"cursor": cursor} if cursor else {})}
        page = (await c.get("/v1/nodes", params=params)).json()
        total += len(page["nodes"])
        cursor = page["nextCursor"]
        if not cursor:
            return total


async def _post_all(c: httpx.AsyncClient, bodies: list[dict[str, Any]]) -> list[str]:
    ids: list[str] = [""] * len(bodies)
    limit = anyio.Semaphore(CLIENTS)

    async def post(i: int) -> None:
        async with limit:
            resp = await c.post("/v1/ingest", json=bodies[i])
            resp.raise_for_status()
            ids[i] = resp.json()["jobId"]

    async with anyio.create_task_group() as tg:
        for i in range(len(bodies)):
            tg.start_soon(post, i)
    return ids


async def _check(c: httpx.AsyncClient, label: str, count: int, job_ids: list[str]) -> None:
    """Every posted job completed and ``count`` nodes of ``label`` are visible (run after the
    clock stopped: checking is not part of the work measured).

    :raises RuntimeError: a job did not complete, or nodes are missing.
    """
    for job_id in job_ids:
        job = (await c.get(f"/v1/ingest/{job_id}")).json()
        if job["state"] != "completed":
            raise RuntimeError(f"{job_id}: {job['state']}: {job.get('failureReason')}")
    seen = await _count(c, label)
    if seen != count:
        raise RuntimeError(f"{seen} {label} nodes, expected {count}")


async def end_to_end(
    server: ServerProcess, tenant: str, bodies: list[dict[str, Any]], label: str, count: int
) -> float:
    """Seconds from the first POST until no job is unfinished (children are enqueued in their
    parent's completing transaction, so none can appear later); then checks that every job
    completed and ``count`` nodes of ``label`` exist."""
    key = server.create_key(tenant, "org")
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": key}, timeout=60
    ) as c:
        started = time.perf_counter()
        job_ids = await _post_all(c, bodies)
        await anyio.to_thread.run_sync(wait_jobs_finished, server.db)
        elapsed = time.perf_counter() - started
        await _check(c, label, count, job_ids)
        return elapsed


def main() -> int:
    """Run both workloads both ways and print the table; 1 if a job failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    messages = make_messages(args.messages)
    archive, files = make_tree_zip()
    mail_bodies = [
        {"format": "eml", "name": f"m{i}.eml", "contentBase64": base64.b64encode(raw).decode()}
        for i, raw in enumerate(messages)
    ]
    code_body = {"format": "code", "name": "tree.zip", "options": {"repo": "bench"},
                 "contentBase64": base64.b64encode(archive).decode()}  # fmt: skip
    mail_s, code_s = [], []
    with tempfile.TemporaryDirectory(prefix="telha-bench-") as tmp_name:
        config = write_config(
            Path(tmp_name),
            workers={"in_process": ["email_worker", "text_worker", "code_worker"],
                     "concurrency": CONSUMERS},
            # One tenant's CLIENTS requests at once: it may hold every ingest slot.
            quotas={"max_concurrent_ingests": 0},
        )  # fmt: skip
        server = ServerProcess(config).start()
        try:
            for r in range(args.rounds):
                mail = (server, f"mail-{r}", mail_bodies, "DOCUMENT", len(messages))
                mail_s.append(anyio.run(end_to_end, *mail))
                code_s.append(
                    anyio.run(end_to_end, server, f"code-{r}", [code_body], "FILE", len(files))
                )
        except RuntimeError as exc:
            print(f"email_code: job failed: {exc}", file=sys.stderr)
            return 1
        finally:
            server.stop()
    mail_floor = floor(lambda: parse_messages(messages), args.rounds)
    code_floor = floor(lambda: parse_tree(archive), args.rounds)
    mail_e2e, code_e2e = statistics.median(mail_s), statistics.median(code_s)
    n_mail, n_files = len(messages), len(files)
    print(f"email_code: {n_mail} messages (+{n_mail} attachments), {n_files} source files"
          f" ({len(archive) / 1e6:.2f} MB zip); median of {args.rounds} rounds")  # fmt: skip
    print("| workload | path | s | per s | ratio |")
    print("|---|---|---|---|---|")
    print(f"| e-mail | parse alone (floor) | {mail_floor:.2f} | {n_mail / mail_floor:.0f} msg |"
          " 1.00 |")  # fmt: skip
    mail_ratio = mail_e2e / mail_floor
    print(f"| e-mail | end to end | {mail_e2e:.2f} | {n_mail / mail_e2e:.0f} msg |"
          f" {mail_ratio:.2f} |")  # fmt: skip
    print(f"| code | parse alone (floor) | {code_floor:.2f} | {n_files / code_floor:.0f} files |"
          " 1.00 |")  # fmt: skip
    code_ratio = code_e2e / code_floor
    print(f"| code | end to end | {code_e2e:.2f} | {n_files / code_e2e:.0f} files |"
          f" {code_ratio:.2f} |")  # fmt: skip
    verdict = (
        n_mail / mail_e2e >= TARGET_MESSAGES_S
        and n_files / code_e2e >= TARGET_FILES_S
        and max(mail_ratio, code_ratio) <= TARGET_RATIO
    )
    print(f"targets: >= {TARGET_MESSAGES_S} messages/s, >= {TARGET_FILES_S} files/s,"
          f" ratio <= {TARGET_RATIO:g}: {'PASS' if verdict else 'FAIL'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
