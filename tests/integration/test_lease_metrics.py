"""Lease metrics against a real server with short leases and a scripted worker: a lease that
runs out is counted expired, a submission under its old generation lost, an invalid
submission refused; the lease-to-submit histogram sees the job that settles."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from grpclib import GRPCError, Status

from tests.support.inproc import InProcessServer
from tests.support.metrics import scrape, value
from tests.support.queue_env import Tenant, queue_server, text_submission
from tests.support.wait import wait_job
from tests.support.worker import ScriptedWorker

pytestmark = pytest.mark.anyio

LEASE_S = 0.6
KIND = {"kind": "ingest:text"}


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    with queue_server(
        tmp_path_factory, "lease_metrics", LEASE_S, max_attempts=3, in_process=True
    ) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def test_expired_lost_and_invalid(
    queue_srv: InProcessServer, tenant: Tenant, worker: ScriptedWorker
) -> None:
    before = await scrape(queue_srv.base_url)
    posted = await tenant.post("text", "slow.txt", "slow")
    first = await worker.next_job(["text"])
    pending = await scrape(queue_srv.base_url)
    assert value(pending, "telha_jobs", state="leased", **KIND) == 1
    await wait_job(tenant.client, posted["jobId"], "pending", within_s=LEASE_S + 10)
    second = await worker.next_job(["text"])
    with pytest.raises(GRPCError) as err:  # the first generation's lease is gone
        await worker.submit(first, text_submission("slow"))
    assert err.value.status is Status.FAILED_PRECONDITION
    refused = await worker.submit(second, {"v": 1, "canonicalText": "x", "spans": "nope"})
    assert not refused.accepted
    after = await scrape(queue_srv.base_url)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("telha_leases_granted_total", **KIND) == 2
    assert delta("telha_leases_expired_total", **KIND) == 1
    assert delta("telha_job_transitions_total", transition="lease_expired", **KIND) == 1
    assert delta("telha_leases_lost_total", **KIND) == 1
    assert delta("telha_submissions_invalid_total", **KIND) == 1
    assert delta("telha_submissions_applied_total", **KIND) == 0
    # The second lease settled (as dead, invalid) through this process: observed once.
    assert delta("telha_lease_to_submit_seconds_count", **KIND) == 1
    assert value(after, "telha_jobs", state="leased", **KIND) == 0
