"""The client commands of ``telha`` (docs/cli-and-client.md): ``ingest``, ``job``,
``source``, ``retire`` and ``diff``, over :class:`telha.client.AsyncTelha`.

``telha ingest PATH...`` walks folders (sorted; hidden files skipped), picks each file's
format (:func:`telha.client.formats.guess_format`, or ``--format``), uploads up to
``--concurrency`` files at once — with a progress bar per file and an overall one on a
terminal, one plain line per step otherwise — waits for each job (``--wait``, the default)
showing its state changes, and ends with a table: file, source id, state, nodes, failure (TSV
with a header line when stdout is not a terminal). Exit code 1 if any file ended ``dead``,
was refused (an error answer, or no format), or failed to upload; else 0.

A file's source name is its path relative to the folder argument's parent (``telha ingest
corpus/docx`` names ``docx/a.docx``), or its file name when given as a file.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click
import msgspec
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
)
from rich.table import Table
from rich.text import Text

from telha.client import (
    AsyncTelha,
    Deduplicated,
    IngestApplied,
    JobEventOut,
    JobStatus,
    NodeOut,
    RetiredOut,
    TelhaError,
)
from telha.client.formats import guess_format

__all__ = ["cancel", "diff", "ingest", "job", "retire", "source"]

DEFAULT_URL = "http://127.0.0.1:7625"
_NODES = re.compile(r"\bnodes=(\d+)")
_T = TypeVar("_T")
_FINAL = frozenset(
    {"completed", "dead", "cancelled", "refused", "applied", "deduplicated", "failed"}
)
#: How a file that did not make it in ended (red in the table; exit code 1).
_BAD = ("dead", "cancelled", "refused", "failed")

_URL = click.option(
    "--url", envvar="TELHA_URL", default=DEFAULT_URL, show_default=True,
    help="the REST front (env TELHA_URL)",
)  # fmt: skip
_KEY = click.option(
    "--api-key", envvar="TELHA_API_KEY", required=True,
    help="API key (env TELHA_API_KEY; mint one with `telha api-key create`)",
)  # fmt: skip


@dataclass
class _File:
    """One file's way through ``telha ingest``."""

    path: Path
    name: str
    format: str | None
    source_id: str = ""
    job_id: str | None = None
    state: str = "refused"
    nodes: int | None = None
    failure: str = ""


def _walk(paths: tuple[Path, ...], fmt: str) -> Iterator[_File]:
    for arg in paths:
        if arg.is_dir():
            files = sorted(p for p in arg.rglob("*") if p.is_file() and not _hidden(p, arg))
            for p in files:
                yield _File(p, str(p.relative_to(arg.parent)), _format(p, fmt))
        else:
            yield _File(arg, arg.name, _format(arg, fmt))


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _format(path: Path, fmt: str) -> str | None:
    if fmt != "auto":
        return fmt
    try:
        return guess_format(path)
    except OSError:
        return None


def _nodes(job: JobStatus) -> int:
    """Nodes the job's version got: the ``nodes=`` counts of its partial/completed events."""
    return sum(int(m.group(1)) for e in job.events for m in _NODES.finditer(e.detail or ""))


class _CountColumn(ProgressColumn):
    """Bytes for a file's bar, ``done/total files`` for the overall one."""

    def __init__(self) -> None:
        super().__init__()
        self._bytes, self._files = DownloadColumn(), MofNCompleteColumn()

    def render(self, task: Task) -> Text:
        if task.fields.get("overall"):
            return Text(f"{self._files.render(task)} files")
        return self._bytes.render(task)


class _Reporter:
    """Progress on a terminal (rich bars), plain lines otherwise."""

    def __init__(self, files: list[_File], console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), _CountColumn(),
            TextColumn("{task.fields[state]}"), console=console, disable=not self.live,
        )  # fmt: skip
        self.total = self.progress.add_task("all files", total=len(files), state="", overall=True)
        self.tasks: dict[int, TaskID] = {}
        self.sizes: dict[int, int] = {}
        for i, f in enumerate(files):
            self.sizes[i] = f.path.stat().st_size
            self.tasks[i] = self.progress.add_task(f.name, total=self.sizes[i], state="queued")

    def uploaded(self, i: int, done: int) -> None:
        self.progress.update(self.tasks[i], completed=done)

    def state(self, i: int, f: _File, state: str, detail: str | None = None) -> None:
        self.progress.update(self.tasks[i], state=state)
        if state == "uploaded":  # a small file goes in one JSON body: no progress reads
            self.progress.update(self.tasks[i], completed=self.sizes[i])
        if state in _FINAL:  # the table will show it: keep the bars to the files in flight
            self.progress.update(self.tasks[i], completed=self.sizes[i], visible=False)
        if not self.live:  # one line a step, never wrapped
            click.echo(f"{f.name}: {state}" + (f" ({detail})" if detail else ""))

    def finished(self) -> None:
        self.progress.advance(self.total)


async def _ingest_one(
    client: AsyncTelha, i: int, f: _File, options: dict[str, Any], wait: bool, out: _Reporter
) -> None:
    if f.format is None:
        f.failure = "cannot tell the format (use --format)"
        out.state(i, f, "refused", f.failure)
        return
    out.state(i, f, "uploading", f.format)
    try:
        result = await client.ingest(
            f.format, f.name, path=f.path, options=options,
            on_upload=lambda done: out.uploaded(i, done),
        )  # fmt: skip
    except TelhaError as exc:
        f.failure = f"{exc.code}: {exc.message}"
        out.state(i, f, "refused", f.failure)
        return
    f.source_id = result.source_id
    if isinstance(result, IngestApplied):
        f.state, f.nodes = "applied", len(result.node_ids)
        out.state(i, f, f.state, f"{f.nodes} nodes")
        return
    f.job_id = result.job_id
    if isinstance(result, Deduplicated) and result.job_id is None:
        f.state = "deduplicated"
        out.state(i, f, f.state, "these bytes are the latest version already")
        return
    f.state = "pending"
    out.state(i, f, "uploaded", f"job {f.job_id}")
    if wait and f.job_id is not None:
        await _wait(client, i, f, out)
    elif out.live:  # piped output has the job in the line above
        out.progress.console.print(f"{f.name}: job {f.job_id}", markup=False, highlight=False)


async def _wait(client: AsyncTelha, i: int, f: _File, out: _Reporter) -> None:
    assert f.job_id is not None

    def on_event(event: JobEventOut) -> None:
        out.state(i, f, event.transition, event.detail)

    try:
        job = await client.wait(f.job_id, on_event=on_event)
    except TelhaError as exc:
        f.state, f.failure = "failed", f"{exc.code}: {exc.message}"
        out.state(i, f, f.state, f.failure)
        return
    f.state, f.failure = job.state, job.failure_reason or ""
    f.nodes = _nodes(job) if job.state == "completed" else None


async def _ingest_all(
    url: str, key: str, files: list[_File], options: dict[str, Any], wait: bool,
    concurrency: int, out: _Reporter,
) -> None:  # fmt: skip
    limit = anyio.Semaphore(concurrency)

    async def one(i: int, f: _File) -> None:
        async with limit:
            await _ingest_one(client, i, f, options, wait, out)
            out.finished()

    async with AsyncTelha(url, key) as client:
        with out.progress:
            async with anyio.create_task_group() as tg:
                for i, f in enumerate(files):
                    tg.start_soon(one, i, f)


def _summary(files: list[_File], console: Console) -> None:
    columns = ("file", "source id", "state", "nodes", "failure")
    rows = [(f.name, f.source_id, f.state, "" if f.nodes is None else str(f.nodes), f.failure)
            for f in files]  # fmt: skip
    if not console.is_terminal:
        for row in (columns, *rows):
            click.echo("\t".join(cell.replace("\t", " ") for cell in row))
        return
    table = Table(*columns)
    for row in rows:
        style = "red" if row[2] in _BAD else None
        table.add_row(*row, style=style)
    console.print(table)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", default="auto", show_default=True,
              help="every file's format; auto: from the extension, then the content")  # fmt: skip
@_URL
@_KEY
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="wait for every job to end")  # fmt: skip
@click.option("--options", "options_json", default="{}", help="ingest options, a JSON object")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 64),
              help="files uploaded at once")  # fmt: skip
def ingest(
    paths: tuple[Path, ...], fmt: str, url: str, api_key: str, wait: bool, options_json: str,
    concurrency: int,
) -> None:  # fmt: skip
    """Ingest files and folders, show progress, end with a table; exit 1 if any file ended
    dead or was refused."""
    try:
        options = msgspec.json.decode(options_json)
    except msgspec.DecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--options") from None
    if not isinstance(options, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--options")
    files = list(_walk(paths, fmt))
    if not files:
        raise click.UsageError("no files under the given paths")
    console = Console()
    out = _Reporter(files, console)
    anyio.run(_ingest_all, url, api_key, files, options, wait, concurrency, out)
    _summary(files, console)
    bad = [f for f in files if f.state in _BAD]
    sys.exit(1 if bad else 0)


def _call(url: str, key: str, call: Callable[[AsyncTelha], Awaitable[_T]]) -> _T:
    """``call(client)`` against the server; an error answer is printed (``telha: CODE:
    message`` on stderr) and exits 1."""

    async def run() -> _T:
        async with AsyncTelha(url, key, retries=1) as client:
            return await call(client)

    try:
        return anyio.run(run)
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
    its state."""
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
