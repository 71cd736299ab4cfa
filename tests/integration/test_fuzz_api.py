"""Fuzzing the REST front of the service in-process (:mod:`tests.support.inproc`, real
sockets on 127.0.0.1):
schemathesis generates requests for every operation of its own ``/openapi.json`` (valid and
invalid ones, a bounded number each); no answer may be a 5xx or carry a status the document
does not list for that operation, and the server's log may hold no 5xx and no
``unhandled_error`` when the module ends. The hand-written bad-input shapes (deep nesting,
wrong content types, oversized fields) are in ``test_bad_input_api.py``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from telha.rest.openapi import openapi_document
from tests.support.inproc import InProcessServer
from tests.support.server import write_config

#: Examples per operation and mode (12 operations, valid and invalid requests; well under
#: 2 minutes in all on a loaded 2-core machine).
EXAMPLES = int(os.environ.get("TELHA_FUZZ_EXAMPLES", "20"))

#: The document the server serves (built in-process, so operations are known at collection).
SCHEMA = schemathesis.openapi.from_dict(json.loads(openapi_document()))
OPERATIONS = {op.label: op for op in (r.ok() for r in SCHEMA.get_all_operations())}
#: Invalid requests exist only for operations that take parameters or a body.
CASES = [
    (label, mode)
    for label, op in sorted(OPERATIONS.items())
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE
    or "parameters" in op.definition.raw
    or "requestBody" in op.definition.raw
]


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("fuzz")
    # No in-process workers: worker formats are enqueued and stay pending.
    with InProcessServer(write_config(folder, workers={"in_process": []})) as server:
        yield server
        assert server.stop() == 0, server.log_text()
        assert_no_server_error(server.log_text())


def assert_no_server_error(log: str) -> None:
    """No request answered 5xx and nothing was logged as an unexpected error: the checks
    run per example, this catches a 5xx a check let through (a retry, a shrunk example)."""
    events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    unexpected = [e for e in events if e.get("event") == "unhandled_error"]
    assert not unexpected, unexpected[:3]
    failed = [e for e in events if e.get("event") == "request" and e.get("status", 0) >= 500]
    assert not failed, failed[:3]


@pytest.fixture(scope="module")
def fuzz_key(fuzz_server: InProcessServer) -> str:
    return fuzz_server.create_key("fuzz", "org")


def test_the_served_document_is_the_one_fuzzed(fuzz_server: InProcessServer) -> None:
    import httpx

    served = httpx.get(f"{fuzz_server.base_url}/openapi.json").json()
    assert served == json.loads(openapi_document())
    assert len(OPERATIONS) == sum(len(methods) for methods in served["paths"].values())


@pytest.mark.parametrize(("label", "mode"), CASES)
def test_no_server_error_and_no_undocumented_status(
    fuzz_server: InProcessServer, fuzz_key: str, label: str, mode: GenerationMode
) -> None:
    @given(case=OPERATIONS[label].as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: schemathesis.Case) -> None:
        case.call_and_validate(
            base_url=fuzz_server.base_url,
            headers={"x-api-key": fuzz_key},
            checks=[not_a_server_error, status_code_conformance],
            timeout=30,
        )

    check()


#: The probe's shapes no generated example reaches: nesting past the JSON decoder's guard in
#: a JSON body's ``options`` and in a multipart ``options`` field (the full battery, with
#: each shape's error code: ``test_bad_input_api.py``).
PROBES: dict[str, dict[str, Any]] = {
    "json options 1,000 deep": {
        "content": b'{"format":"text","name":"a","content":"x","options":'
        + b'{"a":' * 1000
        + b"1"
        + b"}" * 1000
        + b"}",
        "headers": {"content-type": "application/json"},
    },
    "multipart options 30,000 deep": {
        "files": {"file": ("a.txt", b"x")},
        "data": {"format": "text", "name": "a", "options": "[" * 30_000 + "]" * 30_000},
    },
}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_the_probes_shapes_are_refused_as_bad_requests(
    fuzz_server: InProcessServer, fuzz_key: str, probe: str
) -> None:
    import httpx

    request = dict(PROBES[probe])
    headers = {"x-api-key": fuzz_key, **request.pop("headers", {})}
    answer = httpx.post(f"{fuzz_server.base_url}/v1/ingest", headers=headers, timeout=30, **request)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "INVALID_REQUEST"
    assert answer.json()["error"]["message"].startswith("options: nested deeper than")
