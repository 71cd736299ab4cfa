"""Fuzzing the REST front against a real ``telha serve`` on 127.0.0.1:
schemathesis generates requests for every operation of its own ``/openapi.json`` (valid and
invalid ones, a bounded number each); no answer may be a 5xx or carry a status the document
does not list for that operation."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from telha.rest.openapi import openapi_document
from tests.support.server import ServerProcess, write_config

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
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("fuzz")
    # No in-process workers: worker formats are enqueued and stay pending.
    with ServerProcess(write_config(folder, workers={"in_process": []})) as server:
        yield server
        assert server.stop() == 0, server.log_text()


@pytest.fixture(scope="module")
def fuzz_key(fuzz_server: ServerProcess) -> str:
    return fuzz_server.create_key("fuzz", "org")


def test_the_served_document_is_the_one_fuzzed(fuzz_server: ServerProcess) -> None:
    import httpx

    served = httpx.get(f"{fuzz_server.base_url}/openapi.json").json()
    assert served == json.loads(openapi_document())
    assert len(OPERATIONS) == sum(len(methods) for methods in served["paths"].values())


@pytest.mark.parametrize(("label", "mode"), CASES)
def test_no_server_error_and_no_undocumented_status(
    fuzz_server: ServerProcess, fuzz_key: str, label: str, mode: GenerationMode
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
