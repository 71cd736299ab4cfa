"""The shared log configuration: JSON lines, bound job fields, the redaction backstop."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from telha.domain.model import NewJob, Scope
from telha.logs import fields_of
from workers_common.logs import (
    QUIET_LOGGERS,
    REDACTED,
    bound_job,
    configure_logging,
    is_secret_key,
    job_fields,
    redact,
    redact_url,
)


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """Logging configured to a StringIO (not a TTY: JSON lines); restored afterwards, the
    structlog configuration included (an in-process server started later in the same test
    process logs through the one it found: structlog's defaults would print to stdout)."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, {n: logging.getLogger(n).level for n in QUIET_LOGGERS})
    found = structlog.get_config()
    stream = io.StringIO()
    configure_logging("debug", stream)
    try:
        yield stream
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
        for name, level in saved[2].items():
            logging.getLogger(name).setLevel(level)
        structlog.configure(**found)
        structlog.contextvars.clear_contextvars()


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


@pytest.mark.parametrize(
    "key",
    ["api_key", "X-Api-Key", "authorization", "token", "worker_token", "content", "content_b64",
     "contentBase64", "password", "result_json", "refresh_token", "child_content"],
)  # fmt: skip
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key", ["job_id", "kind", "source_id", "key_id", "content_hash", "bytes", "event", "tokens_n"]
)
def test_ordinary_keys(key: str) -> None:
    assert not is_secret_key(key)


def test_redact_top_level_and_one_level_down() -> None:
    event = {
        "event": "x",
        "api_key": "telha_secret",
        "headers": {"authorization": "Bearer abc", "accept": "*/*"},
        "job_id": "j",
    }
    out = redact(None, "info", event)
    assert out["api_key"] == REDACTED
    assert out["headers"] == {"authorization": REDACTED, "accept": "*/*"}
    assert out["job_id"] == "j"


@pytest.mark.parametrize(
    ("url", "logged"),
    [
        ("http://user:pw@127.0.0.1:9/h?token=s3cret", "http://127.0.0.1:9/h?token=[redacted]"),
        (
            "https://h.example.com/a?x=1&flag&y=2#frag",
            "https://h.example.com/a?x=[redacted]&[redacted]&y=[redacted]",
        ),
        ("https://a:b@c@h.example.com/p", "https://h.example.com/p"),
        ("http://h.example.com/plain", "http://h.example.com/plain"),
        ("http://user:pw@[::1/x?token=s3cret", "http://[::1/x"),  # does not split: still cut
        ("not a url?k=v", "not a url?k=[redacted]"),
    ],
)
def test_redact_url(url: str, logged: str) -> None:
    assert redact_url(url) == logged


def test_url_fields_are_logged_redacted(log_stream: io.StringIO) -> None:
    url = "http://user:pw@127.0.0.1:9/h?token=s3cret"
    structlog.get_logger("telha.test").info("webhook_retry", url=url, callback_url=url)
    [line] = _lines(log_stream)
    assert line["url"] == line["callback_url"] == "http://127.0.0.1:9/h?token=[redacted]"
    assert "pw" not in log_stream.getvalue() and "s3cret" not in log_stream.getvalue()


def test_json_lines_carry_bound_job_fields_and_redact(log_stream: io.StringIO) -> None:
    fields = job_fields(
        job_id="j1", kind="ingest:text", source_id="s1", attempt=2, tenant_id="t",
        organization_id="o",
    )  # fmt: skip
    with bound_job(**fields):
        structlog.get_logger("telha.test").info("job_completed", token="tok-123", nodes=3)
        logging.getLogger("workers_common").info("job %s failed", "j1")  # a stdlib line
    structlog.get_logger("telha.test").info("after")
    first, second, after = _lines(log_stream)
    for line in (first, second):
        assert {k: line[k] for k in fields} == fields
        assert line["level"] == "info" and "timestamp" in line
    assert first["token"] == REDACTED and first["nodes"] == 3
    assert second["event"] == "job j1 failed" and second["logger"] == "workers_common"
    assert "job_id" not in after  # the binding ended with the block
    assert "tok-123" not in log_stream.getvalue()


def test_value_dumping_libraries_stay_quiet_at_debug(log_stream: io.StringIO) -> None:
    logging.getLogger("aiosqlite").debug("executing %s", ("INSERT", b"content bytes"))
    logging.getLogger("hpack.hpack").debug("Decoded %s", (b"authorization", b"Bearer t"))
    logging.getLogger("telha.x").debug("kept")
    assert [line["event"] for line in _lines(log_stream)] == ["kept"]


def test_fields_of_a_new_job() -> None:
    job = NewJob(b"\x01" * 16, "ingest:text", "text", b"\x02" * 16, None, b"{}")
    fields = fields_of(job, Scope("t", "o"))
    assert fields["attempt"] == 1 and fields["tenant_id"] == "t" and fields["kind"] == "ingest:text"
    assert fields["job_id"] == "01010101-0101-0101-0101-010101010101"
    with pytest.raises(ValueError):
        fields_of(job)


def test_payload_fields_read_the_source_id_from_a_core_payload() -> None:
    from telha.ingest.job_payload import new_job as _new_job
    from telha_proto.telha.worker.v1 import JobPayload
    from workers_common.logs import payload_fields

    job = _new_job("text", "a.txt", b"x" * 100_000, None, {})
    payload = JobPayload(
        job_id="j", tenant_id="t", organization_id="o", kind=job.kind,
        payload_json=job.payload, attempts=2,
    )  # fmt: skip
    fields = payload_fields(payload)
    assert fields["source_id"] == fields_of(job, Scope("t", "o"))["source_id"]
    assert fields["attempt"] == 3 and fields["kind"] == "ingest:text"


def test_a_librarys_own_handler_still_formats_process_and_thread_ids(
    log_stream: io.StringIO,
) -> None:
    """Logging configured as ``telha serve`` does leaves the ids a library's handler may
    format with ``%d`` (hypercorn's default error log: ``[%(process)d]``)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("[%(process)d] [%(thread)d] %(message)s"))
    lib = logging.getLogger("telha.test.library")
    lib.addHandler(handler)
    lib.propagate = False
    saved = logging.raiseExceptions
    logging.raiseExceptions = False  # a formatting failure would only print to stderr
    try:
        lib.warning("served")
    finally:
        logging.raiseExceptions = saved
        lib.removeHandler(handler)
    assert out.getvalue().strip().endswith("served"), out.getvalue()
    assert out.getvalue().startswith("[") and "[None]" not in out.getvalue()
