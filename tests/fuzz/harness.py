"""The per-format fuzzer's harness (docs/testing.md, "The fuzzer").

Each mutant runs through its worker's handler directly (``handle(job)``, a generator driven
as the consumer drives it), in a child process the parent watches: every mutant must end
``completed`` with a submission core's validator accepts (spans inside the text, on UTF-8
boundaries, so they slice exactly) or a typed failure other than ``transient`` —
``corrupt_input``, ``unsupported_feature`` or ``resource_limit`` — within the timeout, and the
child must survive it. A mutant that does not is written to ``tests/fuzz/found/`` (named
``<format>-<blake3 prefix>-<seed file name>``) and kept there as a regression input.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import blake3

from tests.fuzz.mutate import mutants

__all__ = ["FORMATS", "FOUND", "Fuzzer", "Outcome", "seeds"]

HERE = Path(__file__).resolve().parent
FOUND = HERE / "found"
CORPUS = HERE.parents[1].parent / "shared" / "corpus"
#: Seeds larger than this are left out (mutants of big files cost time, not coverage).
MAX_SEED_BYTES = 128 * 1024
#: Seconds a mutant may take (docling's own child timeout is below it, plus its fallback).
TIMEOUT_S = 120.0
#: Outcomes that pass: the kinds a mutant may end with.
PASSING = frozenset({"completed", "corrupt_input", "unsupported_feature", "resource_limit"})

#: Format → (worker module, corpus globs or seed files of tests/fuzz/seeds).
FORMATS: dict[str, tuple[str, list[str]]] = {
    "csv": ("tabular_worker", ["csv/*.csv"]),
    "tsv": ("tabular_worker", ["tsv/*"]),
    "xlsx": ("tabular_worker", ["xlsx/*"]),
    "eml": ("email_worker", ["eml/*"]),
    "msg": ("email_worker", ["msg/*"]),
    "code": ("code_worker", ["code/*/*"]),
    "markdown": ("text_worker", ["seeds:notes.md"]),
    "text": ("text_worker", ["seeds:plain.txt"]),
    "html": ("docling_worker", ["html/*"]),
    "docx": ("docling_worker", ["docx/*"]),
    "pptx": ("docling_worker", ["pptx/*"]),
    "pdf": ("docling_worker", ["pdf/*"]),
}


def seeds(fmt: str) -> list[tuple[str, bytes]]:
    """``(file name, bytes)`` of the seed files of ``fmt``, in name order."""
    out: list[tuple[str, bytes]] = []
    for pattern in FORMATS[fmt][1]:
        if pattern.startswith("seeds:"):
            paths = [HERE / "seeds" / pattern.removeprefix("seeds:")]
        else:
            paths = sorted(CORPUS.glob(pattern))
        for path in paths:
            if path.is_file() and path.stat().st_size <= MAX_SEED_BYTES:
                out.append((path.name, path.read_bytes()))
    if not out:
        raise FileNotFoundError(f"no seed files for {fmt} (looked in {CORPUS})")
    return out


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one input ended: ``kind`` is ``completed``, a failure kind, ``invalid`` (the
    submission failed core's validation), ``crash`` or ``timeout``; ``detail`` says more."""

    kind: str
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.kind in PASSING


def _drive(result: Any) -> list[bytes]:
    """Every submission of a handler's result as JSON bytes (generators driven with ids)."""
    if isinstance(result, bytes | bytearray):
        return [bytes(result)]
    if isinstance(result, dict):
        return [json.dumps(result, ensure_ascii=False).encode()]
    subs: list[bytes] = []
    sub = next(result)
    while True:
        subs.append(json.dumps(sub, ensure_ascii=False).encode())
        try:
            sub = result.send([str(uuid.uuid4()) for _ in sub["nodes"]])
        except StopIteration:
            return subs


def _check(subs: list[bytes]) -> Outcome:
    """Core's validation of every part, and each span sliced from the whole text."""
    from telha.domain.submission import decode_submission, to_projection

    base = 0
    text = b""
    spans: list[tuple[int, int]] = []
    try:
        for raw in subs:
            sub = decode_submission(raw)
            to_projection(sub, base)
            part = sub.canonical_text.encode("utf-8")
            text += part
            base += len(part)
            spans.extend((s.start, s.end) for s in sub.spans)
        for start, end in spans:
            if not 0 <= start <= end <= len(text):
                return Outcome("invalid", f"span [{start}, {end}) outside the text")
            text[start:end].decode("utf-8")
    except Exception as exc:  # the validator's refusal is this mutant's finding
        return Outcome("invalid", f"{type(exc).__name__}: {exc}"[:300])
    return Outcome("completed", f"{len(subs)} part(s), {len(text)} bytes")


def _run_one(fmt: str, name: str, raw: bytes) -> Outcome:
    from workers_common import Job, classify

    module = importlib.import_module(FORMATS[fmt][0])
    digest = blake3.blake3(raw).hexdigest()
    job = Job("fuzz", f"ingest:{fmt}", fmt, name, raw, digest, {}, 0, "fuzz", "fuzz")
    try:
        subs = _drive(module.handle(job))
    except BaseException as exc:  # every escape is classified, as the consumer does
        reason, _permanent, kind = classify(exc)
        return Outcome(kind, reason[:300])
    return _check(subs)


def _child(conn: Connection) -> None:
    """The child's loop: ``(format, name, bytes)`` in, :class:`Outcome` out."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    while True:
        try:
            fmt, name, raw = conn.recv()
        except EOFError:
            return
        outcome = _run_one(fmt, name, raw)
        conn.send((outcome.kind, outcome.detail))


@dataclass(slots=True)
class Fuzzer:
    """Runs inputs in a watched child process (restarted after a crash or a timeout) and
    counts outcomes per format (``counts[format][kind]``); failing inputs are saved."""

    timeout_s: float = TIMEOUT_S
    save: bool = True
    counts: dict[str, Counter[str]] = field(default_factory=dict)
    failures: list[tuple[str, str, Outcome]] = field(default_factory=list)
    _conn: Connection | None = None
    _proc: Any = None

    def _start(self) -> None:
        os.environ.setdefault("TELHA_DOCLING__TIMEOUT_S", "45")
        ctx = multiprocessing.get_context("spawn")
        self._conn, child_conn = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(child_conn,), daemon=False)
        self._proc.start()
        child_conn.close()

    def close(self) -> None:
        """Stop the child."""
        if self._proc is not None:
            assert self._conn is not None
            self._conn.close()
            self._proc.join(10)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(5)
            self._proc = self._conn = None

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(5)
            assert self._conn is not None
            self._conn.close()
            self._proc = self._conn = None

    def run(self, fmt: str, name: str, raw: bytes) -> Outcome:
        """The outcome of one input, counted (and saved under :data:`FOUND` when failing)."""
        if self._proc is None:
            self._start()
        assert self._conn is not None
        try:
            self._conn.send((fmt, name, raw))
            if self._conn.poll(self.timeout_s):
                outcome = Outcome(*self._conn.recv())
            else:
                self._kill()
                outcome = Outcome("timeout", f"over {self.timeout_s:g} s")
        except (EOFError, OSError, BrokenPipeError):
            code = self._proc.exitcode if self._proc is not None else None
            self._kill()
            outcome = Outcome("crash", f"the child died (exit code {code})")
        self.counts.setdefault(fmt, Counter())[outcome.kind] += 1
        if not outcome.passed:
            self.failures.append((fmt, name, outcome))
            if self.save:
                digest = blake3.blake3(raw).hexdigest()[:12]
                FOUND.mkdir(exist_ok=True)
                (FOUND / f"{fmt}-{digest}-{name}").write_bytes(raw)
        return outcome

    def fuzz(self, fmt: str, count: int, seed: int) -> Iterator[Outcome]:
        """Run ``count`` seeded mutants of ``fmt``'s seeds; yields each outcome."""
        files = seeds(fmt)
        for k, raw in mutants([data for _, data in files], count, seed):
            yield self.run(fmt, files[k][0], raw)


def found_inputs() -> list[tuple[str, str, Path]]:
    """``(format, job name, path)`` of every saved regression input."""
    out = []
    for path in sorted(FOUND.glob("*-*-*")):
        fmt, _digest, name = path.name.split("-", 2)
        if fmt in FORMATS:
            out.append((fmt, name, path))
    return out
