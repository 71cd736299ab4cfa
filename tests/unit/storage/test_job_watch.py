"""The in-process wake-ups of job event readers (:mod:`telha.storage.job_watch`): a signal
wakes only the readers armed on that job, one wake-up serves every reader of a job, a
signal before the reader waits is not lost, and nothing is kept for a job nobody watches."""

from __future__ import annotations

import anyio
import pytest

from telha.storage.job_watch import JobEventSignal

pytestmark = pytest.mark.anyio

A, B = b"a" * 16, b"b" * 16


async def test_a_signal_wakes_the_readers_of_that_job_only() -> None:
    signal = JobEventSignal()
    with signal.watch(A) as wa, signal.watch(A) as wa2, signal.watch(B) as wb:
        assert signal.watching == 3
        ea, ea2, eb = wa.armed(), wa2.armed(), wb.armed()
        assert ea is ea2  # one wake-up per job, whoever armed it
        signal.signal([A])
        assert ea.is_set() and not eb.is_set()
        fresh = wa.armed()
        assert fresh is not ea and not fresh.is_set()  # re-armed after the signal
        signal.signal([b"c" * 16])  # nobody watches it: nothing happens, nothing is kept
        assert not fresh.is_set() and not eb.is_set()


async def test_a_signal_between_arming_and_waiting_is_not_lost() -> None:
    signal = JobEventSignal()
    with signal.watch(A) as watch:
        armed = watch.armed()  # before the read
        signal.signal([A])  # an event committed while the reader was reading
        with anyio.fail_after(1):
            await armed.wait()


async def test_nothing_stays_behind_when_the_last_reader_leaves() -> None:
    signal = JobEventSignal()
    with signal.watch(A) as first:
        with signal.watch(A):
            first.armed()
        assert signal.watching == 1 and A in signal._wakeups  # the other reader still waits
    assert signal.watching == 0
    assert signal._wakeups == {} and signal._watchers == {}
