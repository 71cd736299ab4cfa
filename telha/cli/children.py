"""The child jobs of a file ``telha ingest`` waited for (docs/cli-and-client.md, "telha
ingest"): an e-mail's attachments, an archive's files. A parent ends ``completed`` before
its children start (core enqueues them with its completion), so after the parent the command
waits for them too, and the file's state cell says how many did not make it in:
``completed, 2 of 3 attachments dead``.

The whole tree is counted: after a job's own children (``children`` of
``GET /v1/ingest/{jobId}``), each completed child that may have children of its own (an
attached message: ``ingest:eml``, ``ingest:msg``) is waited for the same way, and its
children's counts are added: an attached message's dead attachment is one of the file's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from telha.client import AsyncTelha, JobStatus, TelhaError

__all__ = [
    "NESTING_KINDS",
    "UNFINISHED",
    "Children",
    "children_note",
    "noun",
    "wait_children",
    "wait_family",
]

#: Child job states that may still change.
UNFINISHED = ("pending", "leased")
#: Child job kinds that may have children of their own (an attached message's attachments).
NESTING_KINDS = ("ingest:eml", "ingest:msg")
#: What a parent format's children are called in the table.
_NOUNS = {"eml": "attachments", "msg": "attachments", "code": "files"}


def noun(fmt: str | None) -> str:
    """What the children of a job of format ``fmt`` are: ``attachments`` (e-mail),
    ``files`` (a code archive), else ``child jobs``."""
    return _NOUNS.get(fmt or "", "child jobs")


@dataclass
class Children:
    """A parent's children counted by state (``{state: count}``), and the server's ``hint``
    when the command stopped waiting for children no worker polls for."""

    counts: dict[str, int] = field(default_factory=dict)
    hint: str = ""

    @property
    def total(self) -> int:
        """Child jobs of every state."""
        return sum(self.counts.values())

    @property
    def unfinished(self) -> int:
        """Children still ``pending`` or ``leased``."""
        return sum(self.counts.get(s, 0) for s in UNFINISHED)


def children_note(children: Children | None, fmt: str | None) -> str:
    """What the state cell adds after a parent's state: ``""`` when every child completed
    (or it has none); else ``2 of 3 attachments dead``, then ``, 1 cancelled`` and
    ``, 1 pending (no worker polls format pdf)`` for the children that ended so or were
    left waiting."""
    if children is None or children.total == 0:
        return ""
    ended = [(children.counts.get(s, 0), s) for s in ("dead", "cancelled", "pending", "leased")]
    ended = [(n, s) for n, s in ended if n]
    if not ended:
        return ""
    (n, state), rest = ended[0], ended[1:]
    note = ", ".join([f"{n} of {children.total} {noun(fmt)} {state}"]
                     + [f"{n} {s}" for n, s in rest])  # fmt: skip
    return note + (f" ({children.hint})" if children.hint else "")


async def _stalled_hint(client: AsyncTelha, job_id: str) -> str:
    """The ``hint`` of the oldest-listed pending child of ``job_id``, or ``""``."""
    page = await client.jobs_page(parent=job_id, state="pending", limit=1)
    if not page.jobs:
        return ""
    found = await client.job(page.jobs[0].job_id)
    return found.hint or ""


async def wait_children(
    client: AsyncTelha,
    job: JobStatus,
    on_progress: Callable[[Children], None],
    *,
    hint_after_s: float,
    poll_s: float = 0.1,
    max_poll_s: float = 1.0,
) -> Children:
    """Wait until no child of the completed ``job`` is ``pending`` or ``leased``, polling
    ``GET /v1/ingest/{jobId}`` (every ``poll_s`` seconds, doubled up to ``max_poll_s`` while
    nothing changes), calling ``on_progress`` on each change. When no child is leased for
    ``hint_after_s`` seconds (then at doubling intervals) and a pending one has a server
    ``hint`` (no worker polls its format), stop waiting: the children stay counted as they
    are, with that hint.

    :returns: the children counted by state (``hint`` set when it stopped early).
    :raises TelhaError: the server stopped answering (after the client's retries).
    """
    children = Children(dict(job.children))
    on_progress(children)
    interval, next_hint = poll_s, anyio.current_time() + hint_after_s
    pause = hint_after_s
    while children.unfinished:
        await anyio.sleep(interval)
        now = await client.job(job.job_id)
        changed = now.children != children.counts
        children = Children(dict(now.children))
        interval = poll_s if changed else min(interval * 2, max_poll_s)
        if changed:
            on_progress(children)
        if not children.unfinished:
            break
        if children.counts.get("leased", 0) or anyio.current_time() < next_hint:
            continue
        pause = min(pause * 2, 30.0)
        next_hint = anyio.current_time() + pause
        try:
            children.hint = await _stalled_hint(client, job.job_id)
        except TelhaError:
            continue
        if children.hint:
            break
    return children


def _plus(a: Children, b: Children) -> Children:
    counts = dict(a.counts)
    for state, n in b.counts.items():
        counts[state] = counts.get(state, 0) + n
    return Children(counts, a.hint or b.hint)


def _shown_with(on_progress: Callable[[Children], None], above: Children, below: Children) -> None:
    on_progress(_plus(above, below))


async def wait_family(
    client: AsyncTelha,
    job: JobStatus,
    on_progress: Callable[[Children], None],
    *,
    hint_after_s: float,
) -> Children:
    """:func:`wait_children` of ``job``, then of each of its completed children of a
    :data:`NESTING_KINDS` kind that has children, and so on down (the module docstring);
    ``on_progress`` sees the counts of the whole tree so far.

    :returns: the tree's jobs below ``job`` counted by state (``hint``: the first one met).
    :raises TelhaError: the server stopped answering (after the client's retries).
    """
    total = await wait_children(client, job, on_progress, hint_after_s=hint_after_s)
    if not total.counts.get("completed"):
        return total
    for kind in NESTING_KINDS:
        async for kid in client.list_jobs(parent=job.job_id, kind=kind, state="completed"):
            status = await client.job(kid.job_id)
            if not status.children:
                continue
            shown = functools.partial(_shown_with, on_progress, total)
            below = await wait_family(client, status, shown, hint_after_s=hint_after_s)
            total = _plus(total, below)
    return total
