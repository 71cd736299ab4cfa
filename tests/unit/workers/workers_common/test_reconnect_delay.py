"""The remote runner's reconnect backoff (:func:`workers_common.run.reconnect_delay`)."""

from __future__ import annotations

import pytest

from workers_common.run import reconnect_delay


def test_backoff_doubles_to_its_cap_while_streams_fail() -> None:
    delays = []
    delay = None
    for _ in range(9):
        delay = reconnect_delay(delay, healthy=False)
        delays.append(delay)
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_a_healthy_stream_starts_the_backoff_over() -> None:
    assert reconnect_delay(30.0, healthy=True) == 0.5
    assert reconnect_delay(reconnect_delay(30.0, healthy=True), healthy=False) == 1.0


def test_a_bad_log_level_is_a_usage_error() -> None:
    from workers_common.run import main

    with pytest.raises(SystemExit) as exited:
        main(["text_worker", "--log-level", "bogus"])
    assert exited.value.code == 2
