"""``python -m tests.fuzz [--mutants N] [--seed S] [format ...]`` (``make fuzz``): a long
fuzzing run, printing mutants and outcomes by kind per format as a Markdown table; failing
inputs are saved under tests/fuzz/found/. Exits 1 when any mutant failed."""

from __future__ import annotations

import argparse
import sys
import time

from tests.fuzz.harness import FORMATS, PASSING, Fuzzer

KINDS = ["completed", "corrupt_input", "unsupported_feature", "resource_limit",
         "transient", "invalid", "crash", "timeout"]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz")
    parser.add_argument("--mutants", type=int, default=2000, help="mutants per format")
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("formats", nargs="*", default=list(FORMATS))
    args = parser.parse_args()
    fuzzer = Fuzzer()
    print("| format | mutants | " + " | ".join(KINDS) + " | seconds |")
    print("|---" * (len(KINDS) + 3) + "|")
    try:
        for fmt in args.formats:
            start = time.monotonic()
            for _ in fuzzer.fuzz(fmt, args.mutants, args.seed):
                pass
            counts = fuzzer.counts.get(fmt, {})
            cells = " | ".join(str(counts.get(k, 0)) for k in KINDS)
            took = time.monotonic() - start
            print(f"| {fmt} | {args.mutants} | {cells} | {took:.0f} |", flush=True)
    finally:
        fuzzer.close()
    for fmt, name, outcome in fuzzer.failures:
        print(f"FAILED {fmt} {name}: {outcome.kind}: {outcome.detail}")
    return 1 if any(o.kind not in PASSING for _, _, o in fuzzer.failures) else 0


if __name__ == "__main__":
    sys.exit(main())
