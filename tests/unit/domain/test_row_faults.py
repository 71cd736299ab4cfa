"""The one rule that tells a stored row's error from the store's (docs/architecture.md,
"Supervision and bad rows"), and the reason a failed row is recorded with."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from telha.domain.errors import StaleLease, StorageError
from telha.domain.policy import FAILURE_REASON_MAX_BYTES, format_reason
from telha.domain.row_faults import FAULT_KIND, RowFault, fault_reason, is_row_error


def _never(exc: BaseException) -> bool:
    return False


def _decode_error() -> Exception:
    try:
        msgspec.json.decode(b"{")
    except msgspec.DecodeError as exc:
        return exc
    raise AssertionError("decoded")


@pytest.mark.parametrize(
    "exc",
    [ValueError("bad"), TypeError("bad"), KeyError("k"),
     UnicodeDecodeError("utf-8", b"\xff", 0, 1, "x"), AssertionError(), LookupError("gone"),
     _decode_error()],
)  # fmt: skip
def test_a_value_that_does_not_process_is_the_rows(exc: Exception) -> None:
    assert is_row_error(exc, _never)


@pytest.mark.parametrize(
    "exc",
    [StorageError("disk"), StaleLease("lost"), OSError("reset"), MemoryError(),
     RowFault("job", b"k", "x"), asyncio.CancelledError(), KeyboardInterrupt()],
)  # fmt: skip
def test_the_store_or_the_process_failing_is_never_the_rows(exc: BaseException) -> None:
    assert not is_row_error(exc, _never)


def test_the_engine_decides_for_its_driver_errors() -> None:
    class DriverDown(Exception):
        pass

    assert not is_row_error(DriverDown(), lambda e: isinstance(e, DriverDown))
    assert is_row_error(ValueError(), lambda e: isinstance(e, DriverDown))


def test_a_reason_names_the_error_and_fits_a_failure_reason() -> None:
    assert fault_reason(ValueError("span past the text")) == "ValueError: span past the text"
    assert fault_reason(AssertionError()) == "AssertionError"
    long = fault_reason(ValueError("é" * 600))
    whole = format_reason(FAULT_KIND, long)
    assert whole == f"{FAULT_KIND}: {long}"  # nothing cut by the job's own limit
    assert len(whole.encode()) <= FAILURE_REASON_MAX_BYTES
    assert long.startswith("ValueError: éé")
