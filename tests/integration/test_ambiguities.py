"""Temporal ambiguities: core validates them, stores them (table ``ambiguities``), applies
the first candidate's interval to the node's valid time, and ``GET /v1/nodes/{id}`` shows
them. Real server, real gRPC."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.inproc import InProcessServer
from tests.support.queue_env import Tenant, queue_server, transitions
from tests.support.wait import wait_job
from tests.support.worker import ScriptedWorker
from workers_common import IngestionResultBuilder

pytestmark = pytest.mark.anyio

MARCH_2 = 1_772_409_600_000_000  # 2026-03-02T00:00:00Z in µs
FEB_3 = 1_770_076_800_000_000  # 2026-02-03T00:00:00Z


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    with queue_server(tmp_path_factory, "ambiguities", 30.0, in_process=True) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _row_submission(*, partial: bool | None = None, base: int = 0) -> dict[str, object]:
    b = IngestionResultBuilder(base_offset=base)
    span = b.add_span_text("3/2/2026\tpaid", kind="cell")
    row = b.add_node(["TABLE_ROW"], {"date": "2026-03-02", "status": "paid"}, spans=[span])
    b.add_ambiguity(
        row,
        "day_first_month_first",
        [
            {"label": "2026-03-02 (month-first)", "validFrom": MARCH_2, "spanRef": span},
            {"label": "2026-02-03 (day-first)", "validFrom": FEB_3, "spanRef": span},
        ],
        detector_confidence=0.9,
        applied_candidate_confidence=0.5,
    )
    if partial is not None:
        b.set_partial(partial)
    return b.build()


async def test_ambiguity_is_stored_applied_and_shown(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    posted = await tenant.post("csv", "dates.csv", "date,status\n3/2/2026,paid\n")
    job = await worker.next_job(["csv"])
    resp = await worker.submit(job, _row_submission())
    assert resp.accepted
    node = (await tenant.client.get(f"/v1/nodes/{resp.node_ids[0]}")).json()
    assert node["validTime"] == {"from": MARCH_2, "to": None}
    assert node["ambiguities"] == [
        {
            "kind": "day_first_month_first",
            "candidates": [
                {"label": "2026-03-02 (month-first)", "validFrom": MARCH_2, "validTo": None,
                 "span": [0, 13]},
                {"label": "2026-02-03 (day-first)", "validFrom": FEB_3, "validTo": None,
                 "span": [0, 13]},
            ],
            "detectorConfidence": 0.9,
            "appliedCandidateConfidence": 0.5,
            "severityHint": None,
        }
    ]  # fmt: skip
    # Listings do not carry them (one read per node would be needed).
    listing = (await tenant.client.get("/v1/nodes", params={"sourceId": posted["sourceId"]})).json()
    assert "ambiguities" not in listing["nodes"][0]
    job_after = await wait_job(tenant.client, posted["jobId"], "completed")
    assert transitions(job_after)[-1] == "completed"


async def test_ambiguity_in_a_streamed_partial(tenant: Tenant, worker: ScriptedWorker) -> None:
    await tenant.post("csv", "streamed-dates.csv", "date\n3/2/2026\n")
    job = await worker.next_job(["csv"])
    first = _row_submission()
    first["seq"], first["partial"] = 0, True
    resp = await worker.submit(job, first)
    final = {"v": 1, "canonicalText": "", "seq": 1, "partial": False}
    assert (await worker.submit(job, final)).accepted
    node = (await tenant.client.get(f"/v1/nodes/{resp.node_ids[0]}")).json()
    assert node["validTime"]["from"] == MARCH_2
    assert [a["kind"] for a in node["ambiguities"]] == ["day_first_month_first"]


async def test_invalid_ambiguity_dead_letters_and_writes_nothing(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    posted = await tenant.post("csv", "bad-dates.csv", "d\n1/1/2026\n")
    job = await worker.next_job(["csv"])
    sub = _row_submission()
    sub["ambiguities"][0]["nodeRef"] = 7  # type: ignore[index]
    resp = await worker.submit(job, sub)
    assert not resp.accepted
    dead = await wait_job(tenant.client, posted["jobId"], "dead")
    assert "nodeRef 7 is out of range" in str(dead["failureReason"])
    # No version was written: the source is listed with none, pending, its job dead.
    source = await tenant.client.get(f"/v1/sources/{posted['sourceId']}")
    assert source.status_code == 200, source.text
    assert source.json()["versions"] == [] and source.json()["state"] == "pending"
    assert source.json()["lastJobState"] == "dead"
