"""The client commands of ``telha`` (docs/cli-and-client.md): ``job``, ``cancel``,
``source``, ``retire`` and ``diff``, over :class:`telha.client.AsyncTelha`, and what every
client command shares: ``--url``, ``--api-key`` and how an error answer or an unreachable
server is told (``telha ingest`` is :mod:`telha.cli.ingest`).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

import anyio
import click
import msgspec

from telha.client import AsyncTelha, ConnectionFailed, JobStatus, NodeOut, RetiredOut, TelhaError

__all__ = ["DEFAULT_URL", "cancel", "diff", "job", "retire", "source", "unreachable"]

DEFAULT_URL = "http://127.0.0.1:7625"
#: The exit code when no server answers at the URL (as for a usage or configuration error).
EXIT_UNREACHABLE = 2
_T = TypeVar("_T")

_URL = click.option(
    "--url", envvar="TELHA_URL", default=DEFAULT_URL, show_default=True,
    help="the REST front (env TELHA_URL)",
)  # fmt: skip


class _EnvOption(click.Option):
    """An option also read from its environment variable, which its errors name beside
    it: ``Missing option '--api-key' (or TELHA_API_KEY)``."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        hint = super().get_error_hint(ctx)
        return f"{hint} (or {self.envvar})" if isinstance(self.envvar, str) else hint


_KEY = click.option(
    "--api-key", envvar="TELHA_API_KEY", required=True, cls=_EnvOption,
    help="API key (env TELHA_API_KEY; mint one with `telha api-key create`)",
)  # fmt: skip


def unreachable(url: str) -> NoReturn:
    """Say once that nothing answers at ``url`` (and how to name another server); exit 2."""
    click.echo(f"telha: cannot reach {url} (set --url or TELHA_URL)", err=True)
    sys.exit(EXIT_UNREACHABLE)


def _call(url: str, key: str, call: Callable[[AsyncTelha], Awaitable[_T]]) -> _T:
    """``call(client)`` against the server; an error answer is printed (``telha: CODE:
    message`` on stderr) and exits 1; no answer at all exits 2 (:func:`unreachable`)."""

    async def run() -> _T:
        async with AsyncTelha(url, key, retries=1) as client:
            return await call(client)

    try:
        return anyio.run(run)
    except ConnectionFailed:
        unreachable(url)
    except TelhaError as exc:
        click.echo(f"telha: {exc.code}: {exc.message}", err=True)
        sys.exit(1)


@click.command()
@click.argument("job_id")
@_URL
@_KEY
def job(job_id: str, url: str, api_key: str) -> None:
    """Print one job: state, attempts, source, parent job, children by state, failure,
    stats and its events."""
    found = _call(url, api_key, lambda c: c.job(job_id))
    click.echo(f"job       {found.job_id}\nkind      {found.kind}\nstate     {found.state}\n"
               f"attempts  {found.attempts}\nsource    {found.source_id}")  # fmt: skip
    if found.parent_job_id:
        click.echo(f"parent    {found.parent_job_id}")
    if found.children:
        counts = ", ".join(f"{n} {state}" for state, n in sorted(found.children.items()))
        click.echo(f"children  {counts}  (telha jobs --parent {found.job_id})")
    if found.failure_reason:
        click.echo(f"failure   {found.failure_reason}")
    if found.stats:
        click.echo(f"stats     {msgspec.json.encode(found.stats).decode()}")
    click.echo("events")
    for e in found.events:
        click.echo(f"  {e.at}  {e.transition}" + (f"  {e.detail}" if e.detail else ""))


@click.command()
@click.argument("job_ids", metavar="JOB...", nargs=-1, required=True)
@click.option("--children", is_flag=True, help="also cancel each job's unfinished child jobs")
@_URL
@_KEY
def cancel(job_ids: tuple[str, ...], children: bool, url: str, api_key: str) -> None:
    """Cancel jobs: a pending one at once, a leased one's lease revoked (its worker stops;
    a half-streamed version is abandoned). Prints each job and its state (cancelling again
    prints it again); a job that cannot be cancelled prints ``telha: JOB: CODE: message``
    on stderr and the exit code is 1."""

    async def run() -> list[JobStatus | TelhaError]:
        out: list[JobStatus | TelhaError] = []
        async with AsyncTelha(url, api_key, retries=1) as client:
            for job_id in job_ids:
                try:
                    out.append(await client.cancel(job_id, children=children))
                except TelhaError as exc:
                    out.append(exc)
        return out

    failed = False
    for job_id, got in zip(job_ids, anyio.run(run), strict=True):
        if isinstance(got, ConnectionFailed):
            unreachable(url)
        if isinstance(got, TelhaError):
            click.echo(f"telha: {job_id}: {got.code}: {got.message}", err=True)
            failed = True
        else:
            click.echo(f"{got.job_id}  {got.state}")
    sys.exit(1 if failed else 0)


def _retired(r: RetiredOut) -> str:
    return f"{r.tx}" + (f"  ({r.reason})" if r.reason else "")


@click.command()
@click.argument("source_id")
@_URL
@_KEY
def source(source_id: str, url: str, api_key: str) -> None:
    """Print one source (its state and last job) and its versions, newest first, each with
    its state and, for a version a child job wrote, its parent's name, source, version and
    job."""
    found = _call(url, api_key, lambda c: c.source(source_id))
    click.echo(f"source  {found.source_id}\nname    {found.name}\nformat  {found.format}\n"
               f"state   {found.state}")  # fmt: skip
    if found.retired is not None:
        click.echo(f"retired {_retired(found.retired)}")
    if found.last_job_id:
        click.echo(f"last job {found.last_job_id}  {found.last_job_state}")
    click.echo("versions (tx µs, state, bytes, content hash, worker, job)")
    for v in found.versions:
        click.echo(f"  {v.source_version_tx}  {v.state}  {v.size}  {v.content_hash[:16]}…"
                   f"  {v.worker or '-'}  {v.job_id or '-'}")  # fmt: skip
        p = v.parent
        if p is not None:  # a child job wrote it (docs/rest-api.md, "Child jobs")
            click.echo(f"    parent  {p.name or '-'}  source {p.source_id or '-'}"
                       f"  version {p.source_version_tx or '-'}  job {p.job_id}")  # fmt: skip


@click.command()
@click.argument("source_id")
@click.option("--reason", default=None, help="why (kept with the retire)")
@_URL
@_KEY
def retire(source_id: str, reason: str | None, url: str, api_key: str) -> None:
    """Retire a source: its nodes leave the current graph; history, bytes and text stay
    (reads as of an earlier time still show them). Retiring again prints the first retire."""
    done = _call(url, api_key, lambda c: c.retire(source_id, reason))
    click.echo(f"source   {done.source_id}\nretired  {_retired(done.retired)}\n"
               f"version  {done.version_tx}\nclosed   {done.nodes_closed} nodes")  # fmt: skip


#: Longest node text a ``telha diff`` line shows, characters.
_DIFF_TEXT = 72


def _node_line(node: NodeOut) -> str:
    """``id  LABELS  text``: the node's span texts (else its properties), on one line."""
    text = " … ".join(s.text for s in node.provenance.spans)
    if not text:
        text = msgspec.json.encode(node.properties).decode()
    text = " ".join(text.split())
    if len(text) > _DIFF_TEXT:
        text = text[: _DIFF_TEXT - 1] + "…"
    return f"{node.node_id}  {','.join(node.labels)}  {text}"


@click.command()
@click.argument("source_id")
@click.option("--from", "from_tx", type=click.IntRange(min=0), default=None,
              help="a version's tx (µs); default the version before --to")  # fmt: skip
@click.option("--to", "to_tx", type=click.IntRange(min=0), default=None,
              help="a version's tx (µs); default the latest")  # fmt: skip
@_URL
@_KEY
def diff(source_id: str, from_tx: int | None, to_tx: int | None, url: str, api_key: str) -> None:
    """Print what changed between two versions of a source: a summary line, then one line
    a node (+ added, - removed, ~ changed: labels or properties), coloured on a terminal."""
    d = _call(url, api_key, lambda c: c.diff(source_id, from_tx, to_tx))
    click.echo(f"from {d.from_ if d.from_ is not None else '-'} to {d.to}: "
               f"{len(d.added)} added, {len(d.removed)} removed, {len(d.changed)} changed, "
               f"{d.unchanged} unchanged")  # fmt: skip
    for node in d.added:
        click.echo(click.style(f"+ {_node_line(node)}", fg="green"))
    for node in d.removed:
        click.echo(click.style(f"- {_node_line(node)}", fg="red"))
    for change in d.changed:
        keys = sorted(
            k for k in {*change.before.properties, *change.after.properties}
            if change.before.properties.get(k) != change.after.properties.get(k)
        )  # fmt: skip
        what = f"  [{', '.join(keys)}]" if keys else "  [labels]"
        click.echo(click.style(f"~ {_node_line(change.after)}{what}", fg="yellow"))
