"""The one classification rule (workers_common.failures, docs/worker-protocol.md "Failures"):
exceptions that are a function of the input are permanent ``corrupt_input`` in one attempt;
the service's own I/O, timeouts and unavailability are ``transient``; memory exhaustion is
``resource_limit``. Built from real exceptions raised by the real libraries."""

from __future__ import annotations

import errno
import gzip
import io
import pickle
import zipfile
from collections.abc import Callable

import polars as pl
import pytest

from workers_common import Job, classify
from workers_common.failures import CorruptInput, TransientFailure, as_failure, input_caused
from workers_common.handlers import _handle_in_child


def _raised(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except BaseException as exc:  # the exception under test
        return exc
    raise AssertionError("did not raise")


def _seek_before_start() -> None:
    """What ``zipfile`` meets when a corrupt header puts a member before the file's start (a
    found fuzz input: tests/fuzz/found/xlsx-*)."""
    raise OSError(errno.EINVAL, "Invalid argument")


def _deep(n: int) -> int:
    return _deep(n + 1) + 1


INPUT_CAUSED: list[tuple[str, Callable[[], object]]] = [
    ("unknown charset label", lambda: b"x".decode("uft-8")),
    ("undecodable bytes", lambda: b"\xff\xfe\xfa".decode("utf-8")),
    ("polars schema error", lambda: pl.DataFrame({"a": [1]}).select(pl.col("b"))),
    ("recursion limit", lambda: _deep(0)),
    ("ValueError from a parser", lambda: int("12x")),
    ("bad gzip (errno-less OSError)", lambda: gzip.GzipFile(fileobj=io.BytesIO(b"xx")).read()),
    ("not a ZIP", lambda: zipfile.ZipFile(io.BytesIO(b"PK\x03\x04 broken"))),
    ("a lookup", lambda: {}["missing"]),
    ("a seek to a corrupt offset (EINVAL)", lambda: _seek_before_start()),
]  # fmt: skip


@pytest.mark.parametrize(("what", "fn"), INPUT_CAUSED, ids=[w for w, _ in INPUT_CAUSED])
def test_input_caused_exceptions_are_permanent_corrupt_input(
    what: str, fn: Callable[[], object]
) -> None:
    exc = _raised(fn)
    reason, permanent, kind = classify(exc)
    assert (kind, permanent) == ("corrupt_input", True), what
    assert reason.startswith(f"corrupt_input: {type(exc).__name__}")
    assert input_caused(exc) is True


def test_an_error_raised_inside_a_parser_package_is_the_input() -> None:
    # An AttributeError is no input error by type; raised from inside a parser package
    # (here code running as a polars module) it is about the bytes: the innermost frame
    # decides. The same error raised in our own code stays transient.
    def raise_in(module: str) -> BaseException:
        code = compile("raise AttributeError('NoneType has no attribute text')", module, "exec")
        return _raised(lambda: exec(code, {"__name__": module}))

    assert classify(raise_in("polars.io.csv"))[1:] == (True, "corrupt_input")
    assert classify(raise_in("tabular_worker.table"))[1:] == (False, "transient")


SERVICE: list[tuple[str, BaseException, str]] = [
    ("a timeout", TimeoutError("read timed out"), "transient"),
    ("a reset connection", ConnectionResetError(errno.ECONNRESET, "reset"), "transient"),
    ("a full disk", OSError(errno.ENOSPC, "No space left on device"), "transient"),
    ("a missing spool file", FileNotFoundError(errno.ENOENT, "gone"), "transient"),
    ("memory", MemoryError(), "resource_limit"),
    ("an unknown error of ours", RuntimeError("disk hiccup"), "transient"),
]


@pytest.mark.parametrize(("what", "exc", "kind"), SERVICE, ids=[w for w, _, _ in SERVICE])
def test_service_io_timeouts_and_exhaustion_retry(what: str, exc: BaseException, kind: str) -> None:
    assert classify(exc)[1:] == (False, kind), what


def test_typed_failures_keep_their_kind_and_cross_a_process_boundary() -> None:
    exc = _raised(lambda: b"x".decode("uft-8"))
    typed = as_failure(exc)
    assert isinstance(typed, CorruptInput) and str(typed).startswith("LookupError: ")
    again = pickle.loads(pickle.dumps(typed))  # a pool process's failure, unpickled
    assert classify(again)[:2] == (f"corrupt_input: {typed}", True)
    assert isinstance(as_failure(RuntimeError("x")), TransientFailure)


def _lookup_handler(job: Job) -> dict[str, object]:
    return {"text": job.content.decode("uft-8")}


def test_a_pool_process_reports_an_input_error_typed() -> None:
    job = Job("j", "ingest:text", "text", "a.txt", b"abc", None, {}, 0, "t", "o")
    with pytest.raises(CorruptInput, match="LookupError: unknown encoding: uft-8"):
        _handle_in_child(_lookup_handler, job)
