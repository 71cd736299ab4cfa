"""Benchmark: the first sync of an IMAP mailbox (bench/RESULTS.md; docs/connectors.md, "The
imap kind").

A throwaway Dovecot on 127.0.0.1 (tests/support/dovecot.py) gets ``--messages`` messages
(default 2,000) by ``APPEND``: distinct plain-text messages of about 1 KB, without
attachments (an attachment is a further child job of another format: the corpus's
``.eml`` files carry PDFs and nested messages, which would time the PDF worker too). An
``imap`` connector (the connector worker, the email and text workers in-process, plain
IMAP) syncs the mailbox once; the run is timed from its start until it and its item jobs
(one ``ingest:eml`` per message) ended. Target: ≥ 100 messages/s. A second run with nothing
changed is timed too, with the bodies Dovecot says it served (0 expected). The
floor, in the same run on the same server: the same messages by ``POST /v1/ingest`` (8 at
once) into a fresh scope, until their jobs ended — what ingesting them costs without IMAP.
On SQLite the end is read from the database file (as bench/email_code.py does: polling
through REST would cost the server's own CPU); on PostgreSQL through REST every 0.1 s.

Run: ``.venv/bin/python bench/sync_imap.py [--messages N] [--engine sqlite|postgres]``.
Exits 0 whether the target passes or not; 1 if the load could not be run.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Drop bench/ (sys.path[0]): its queue.py would shadow the stdlib ``queue``.
sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import base64
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from email.message import EmailMessage
from typing import Any

import httpx

from tests.support.dovecot import Dovecot
from tests.support.server import ServerProcess, wait_jobs_finished, write_config

_POLL_S = 0.1
_SECRET_ENV = "TELHA_SECRET_BENCH_IMAP"
_WORDS = [
    "ledger", "supplier", "invoice", "quarter", "freight", "delay", "contract", "audit",
    "budget", "forecast", "warehouse", "shipment", "payment", "review", "schedule",
]  # fmt: skip


def _messages(n: int) -> list[bytes]:
    """``n`` distinct plain-text messages (deterministic), replies among them."""
    out = []
    for i in range(n):
        msg = EmailMessage()
        msg["From"] = f"Person {i % 37} <p{i % 37}@example.com>"
        msg["To"] = ", ".join(f"p{(i + k) % 37}@example.com" for k in (1, 2))
        msg["Subject"] = f"{'Re: ' if i % 2 else ''}Status {i // 2}"
        msg["Date"] = f"Tue, {1 + i % 28:02d} Sep 2026 {i % 24:02d}:00:00 +0000"
        msg["Message-ID"] = f"<m{i}@example.com>"
        if i % 2:
            msg["In-Reply-To"] = f"<m{i - 1}@example.com>"
        words = [_WORDS[(i * 7 + k) % len(_WORDS)] for k in range(90)]
        paras = (" ".join(words[k : k + 30]).capitalize() + "." for k in (0, 30, 60))
        msg.set_content("\n\n".join(paras) + "\n")
        out.append(bytes(msg))
    return out


def _run(
    srv: ServerProcess, c: httpx.Client, cid: str, engine: str
) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    started = c.post(f"/v1/connectors/{cid}/runs")
    started.raise_for_status()
    run_id = started.json()["runId"]
    while True:
        if engine == "sqlite":
            wait_jobs_finished(srv.db)  # the run's children are enqueued as it completes
        elapsed = time.perf_counter() - t0
        runs = c.get(f"/v1/connectors/{cid}/runs").json()["runs"]
        run = next(r for r in runs if r["runId"] == run_id)
        if run["state"] in ("completed", "dead") and not {"pending", "leased"} & set(
            run["children"]
        ):
            return elapsed, run
        time.sleep(_POLL_S)


def _floor(srv: ServerProcess, key: str, messages: list[bytes], engine: str) -> float:
    """Seconds to ingest ``messages`` by ``POST /v1/ingest`` until their jobs ended."""
    bodies = [
        {"format": "eml", "name": f"m{i}.eml", "contentBase64": base64.b64encode(m).decode()}
        for i, m in enumerate(messages)
    ]
    with httpx.Client(base_url=srv.base_url, headers={"x-api-key": key}, timeout=120) as c:

        def post(body: dict[str, Any]) -> str:
            resp = c.post("/v1/ingest", json=body)
            resp.raise_for_status()
            return str(resp.json()["jobId"])

        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            jobs = list(pool.map(post, bodies))
        if engine == "sqlite":
            wait_jobs_finished(srv.db)
        else:
            for job in jobs:
                while c.get(f"/v1/ingest/{job}").json()["state"] in ("pending", "leased"):
                    time.sleep(_POLL_S)
        return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite")
    args = parser.parse_args()
    messages = _messages(args.messages)
    with Dovecot() as dovecot, tempfile.TemporaryDirectory(prefix="telha-bench-imap-") as tmp:
        t0 = time.perf_counter()
        dovecot.append(messages)
        append_s = time.perf_counter() - t0
        workers = {"in_process": ["email_worker", "text_worker", "connectors"]}
        config = write_config(
            Path(tmp),
            args.engine,
            workers=workers,
            quotas={"max_pending_jobs": 0},
            connectors={"allowed_hosts": ["127.0.0.1"], "secrets": [f"{_SECRET_ENV}=bench/imap"]},
        )
        os.environ[_SECRET_ENV] = dovecot.password
        with ServerProcess(config) as srv:
            key = srv.create_key("bench", "imap")
            with httpx.Client(base_url=srv.base_url, headers={"x-api-key": key}, timeout=120) as c:
                settings = {
                    "host": "127.0.0.1", "port": dovecot.port, "username": dovecot.user,
                    "passwordEnv": _SECRET_ENV, "tls": "none",
                }  # fmt: skip
                made = c.post("/v1/connectors", json={"kind": "imap", "settings": settings})
                made.raise_for_status()
                cid = made.json()["connectorId"]
                first_s, first = _run(srv, c, cid, args.engine)
                mark = dovecot.log_mark()
                second_s, second = _run(srv, c, cid, args.engine)
                sessions, bodies = dovecot.bodies_fetched(mark)
            floor_s = _floor(srv, srv.create_key("bench", "imap-floor"), messages, args.engine)
            srv.stop()
    if first["state"] != "completed" or first["added"] != args.messages:
        print(f"first run did not add every message: {first}")
        return 1
    run_s = (first["updatedAt"] - first["createdAt"]) / 1e6
    rate = args.messages / first_s
    print(f"messages {args.messages} ({sum(map(len, messages)) / 1e6:.2f} MB), engine"
          f" {args.engine}; APPEND into Dovecot {append_s:.2f} s")  # fmt: skip
    print(f"first run: {first_s:.2f} s = {rate:.0f} messages/s (children {first['children']})")
    print(f"  of which the run job (lease, listing, {args.messages} body fetches, report, apply):"
          f" {run_s:.2f} s; the eml item jobs after it: {first_s - run_s:.2f} s")  # fmt: skip
    print(f"second run, nothing changed: {second_s:.2f} s, unchanged {second['unchanged']},"
          f" bodies fetched {bodies} in {sessions} session(s)")  # fmt: skip
    print(f"floor: the same messages by POST /v1/ingest: {floor_s:.2f} s ="
          f" {args.messages / floor_s:.0f} messages/s; first run / floor ="
          f" {first_s / floor_s:.2f}")  # fmt: skip
    print(f"first run >= 100 messages/s: {'PASS' if rate >= 100 else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
