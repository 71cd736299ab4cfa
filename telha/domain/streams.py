"""The stream-part state machine: what a streamed submission does given the job's
checkpoint (docs/architecture.md, "Streaming"). Pure; storage reads the checkpoint under the
job row's lock, asks :func:`plan_part`, and writes what it decides.

A checkpoint (:class:`~telha.domain.model.Continuation`) is fenced by the worker id and the
lease generation that wrote it: one written under another lease (an earlier attempt, or
another worker) is abandoned, never continued. Under the fence, the next part must have
seq ``next_seq`` and be built on exactly the bytes the stream holds; a partial repeating the
last accepted seq is a replay (nothing written, the same node ids answered).
"""

from __future__ import annotations

from dataclasses import dataclass

from telha.domain.errors import OutOfSync
from telha.domain.model import Continuation, StreamPart

__all__ = ["PartPlan", "fenced", "live_length", "plan_part", "single_shot_allowed"]


def fenced(c: Continuation | None, worker_id: str, lease_generation: int) -> bool:
    """Whether checkpoint ``c`` belongs to the stream of ``worker_id`` under
    ``lease_generation`` (``False`` for no checkpoint)."""
    return c is not None and (c.worker_id, c.lease_generation) == (worker_id, lease_generation)


def live_length(c: Continuation | None, worker_id: str, lease_generation: int) -> int:
    """Bytes the caller's live stream holds: the ``base`` a partial's offsets are validated
    against before it is applied (0 when there is no checkpoint, or it is another
    lease's)."""
    return c.length if c is not None and fenced(c, worker_id, lease_generation) else 0


def single_shot_allowed(c: Continuation | None, worker_id: str, lease_generation: int) -> None:
    """Check a single-shot submission against the job's checkpoint: allowed unless the same
    worker has a stream open under the same lease (then the single shot is out of sequence).
    A checkpoint of another lease is abandoned by the caller.

    :raises OutOfSync: the caller's own stream is open.
    """
    if c is not None and fenced(c, worker_id, lease_generation):
        raise OutOfSync(f"a stream is open: expected seq {c.next_seq}, got 0")


@dataclass(frozen=True, slots=True)
class PartPlan:
    """What to do with one streamed part.

    ``abandon``: the stored checkpoint is another lease's; close its stream first.
    ``live``: the caller's checkpoint to continue (``None``: this part pins a new version).
    ``replay``: the part repeats the last accepted partial; write nothing but the lease
    extension and answer ``live.node_ids``.
    """

    abandon: bool
    live: Continuation | None
    replay: bool = False

    @property
    def pin(self) -> bool:
        """The part starts the stream: pin a new version."""
        return self.live is None and not self.replay


def plan_part(c: Continuation | None, part: StreamPart) -> PartPlan:
    """Decide what ``part`` does against the job's checkpoint ``c`` (read under the job
    row's lock): abandon a foreign checkpoint, replay the last partial, or continue (pin
    first when there is no live stream) after the seq and base checks.

    :raises OutOfSync: a seq that is neither the next one nor a replay of the last partial,
        or a part built on a different text length than the stream holds.
    """
    own = fenced(c, part.worker_id, part.lease.lease_generation)
    live = c if own else None
    abandon = c is not None and not own
    if live is not None and part.partial and part.seq + 1 == live.next_seq:
        return PartPlan(abandon, live, replay=True)
    expected = 0 if live is None else live.next_seq
    if part.seq != expected:
        raise OutOfSync(f"expected seq {expected}, got {part.seq}")
    held = 0 if live is None else live.length
    if part.base != held:
        raise OutOfSync(f"partial built on {part.base} bytes; the stream holds {held}")
    return PartPlan(abandon, live)
