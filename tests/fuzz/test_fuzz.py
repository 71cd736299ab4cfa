"""The per-format fuzzer in CI (docs/testing.md, "The fuzzer"): a seeded budget of mutants
per format (``TELHA_FUZZ_MUTANTS``, default 50; ``TELHA_FUZZ_SEED``), each through its
worker's handler in a watched child; every one must complete with valid spans or fail typed
and permanent (or ``resource_limit``), never ``transient``, never crash or hang. Inputs it
ever found failing are replayed from tests/fuzz/found/."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.fuzz.harness import FORMATS, Fuzzer, Outcome, found_inputs

MUTANTS = int(os.environ.get("TELHA_FUZZ_MUTANTS", "50"))
SEED = int(os.environ.get("TELHA_FUZZ_SEED", "20261202"))


@pytest.fixture(scope="module")
def fuzzer() -> Iterator[Fuzzer]:
    f = Fuzzer()
    yield f
    f.close()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_mutants_end_completed_or_typed(fuzzer: Fuzzer, fmt: str) -> None:
    outcomes = list(fuzzer.fuzz(fmt, MUTANTS, SEED))
    assert len(outcomes) == MUTANTS
    bad = [(name, o) for f, name, o in fuzzer.failures if f == fmt]
    assert not bad, f"{len(bad)} mutant(s) of {fmt} failed (saved in tests/fuzz/found/): {bad[:3]}"


def test_found_inputs_stay_fixed(fuzzer: Fuzzer) -> None:
    """Every input the fuzzer ever found failing (tests/fuzz/found/) now passes."""
    failing = []
    for fmt, name, path in found_inputs():
        outcome: Outcome = fuzzer.run(fmt, name, path.read_bytes())
        if not outcome.passed:
            failing.append((path.name, outcome))
    assert not failing, failing


def test_a_transient_or_crash_is_a_finding() -> None:
    """The harness itself: an outcome outside the passing kinds fails."""
    assert Outcome("completed").passed and Outcome("corrupt_input").passed
    assert not Outcome("transient").passed and not Outcome("crash").passed
    assert not Outcome("timeout").passed and not Outcome("invalid").passed
