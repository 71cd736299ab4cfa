"""``telha ingest PATH...`` (docs/cli-and-client.md), over :class:`telha.client.AsyncTelha`.

It walks folders (sorted; hidden files skipped), picks each file's format
(:func:`telha.client.formats.guess_format`, or ``--format``), checks the server answers at
all (else ``cannot reach URL`` and exit 2, before any upload), uploads up to
``--concurrency`` files at once — with a progress bar per file and an overall one on a
terminal, one plain line per step otherwise — waits for each job (``--wait``, the default)
showing its state changes (and the server's ``hint`` when a job stays ``enqueued``), and
ends with a table: file, source id, job id, state, nodes, failure (TSV with a header line
when stdout is not a terminal). Exit code 1 if any file ended ``dead`` or ``cancelled``, was
refused (an error answer, or no format) or failed (no answer); 130 on Ctrl-C (the table so
far is printed first); else 0.

A file's source name is its path relative to ``--root`` (default: the current folder),
``/``-separated, the same whether the file was named alone or found in a folder; a file
outside the root keeps its normalised ``../`` segments. ``--name`` names a single file.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import click
import httpx
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
from rich.table import Column, Table
from rich.text import Text

from telha.cli_client import _KEY, _URL, unreachable
from telha.client import (
    AsyncTelha,
    ConnectionFailed,
    Deduplicated,
    IngestApplied,
    JobEventOut,
    JobStatus,
    TelhaError,
)
from telha.client.formats import guess_format

__all__ = ["ingest", "source_name", "warning_count"]

_NODES = re.compile(r"\bnodes=(\d+)")
_FINAL = frozenset({"completed", "dead", "cancelled", "refused", "deduplicated", "failed"})
#: How a file that did not make it in ended (red in the table; exit code 1).
_BAD = ("dead", "cancelled", "refused", "failed")
#: Seconds a job may stay ``enqueued`` before the server's ``hint`` for it is asked for
#: (then again at doubling intervals until it is leased or has one).
HINT_AFTER_S = 3.0
#: The exit code after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


@dataclass
class _File:
    """One file's way through ``telha ingest``; ``state`` is ``""`` until it is started."""

    path: Path
    name: str
    format: str | None
    source_id: str = ""
    job_id: str | None = None
    state: str = ""
    nodes: int | None = None
    failure: str = ""
    warnings: int = 0

    def shown_state(self) -> str:
        """The state column: ``completed (N warnings)`` when the projection reported any
        (``stats.warnings``, docs/formats.md "Warnings"), else the state."""
        if self.state == "completed" and self.warnings:
            return f"completed ({self.warnings} warnings)"
        return self.state


def source_name(path: Path, root: Path) -> str:
    """The source name of the file at ``path``: its path relative to ``root``,
    ``/``-separated, with ``.``/``..`` segments normalised (``../x/a.pdf`` for a file
    outside ``root``); symlinks are not followed."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    return Path(rel).as_posix()


def _walk(paths: tuple[Path, ...], fmt: str, root: Path) -> Iterator[_File]:
    """Every file under ``paths`` once (by source name), folders walked in sorted order."""
    seen: set[str] = set()
    for arg in paths:
        if arg.is_dir():
            found = sorted(p for p in arg.rglob("*") if p.is_file() and not _hidden(p, arg))
        else:
            found = [arg]
        for p in found:
            name = source_name(p, root)
            if name not in seen:
                seen.add(name)
                yield _File(p, name, _format(p, fmt))


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _format(path: Path, fmt: str) -> str | None:
    if fmt != "auto":
        return fmt
    try:
        return guess_format(path)
    except OSError:
        return None


def warning_count(stats: dict[str, Any] | None) -> int:
    """The sum of the ``count`` of a job's ``stats.warnings`` (docs/worker-protocol.md,
    "The submission"; 0 without any, or for a shape it does not know)."""
    items = (stats or {}).get("warnings")
    if not isinstance(items, list):
        return 0
    return sum(
        w["count"] if isinstance(w, dict) and isinstance(w.get("count"), int) else 1 for w in items
    )


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
        self.line(f"{f.name}: {state}" + (f" ({detail})" if detail else ""))

    def line(self, text: str, *, on_terminal: bool = False) -> None:
        """One plain line (never wrapped) when piped; above the bars on a terminal only
        when ``on_terminal``."""
        if not self.live:
            click.echo(text)
        elif on_terminal:
            self.console.print(text, markup=False, highlight=False)

    def finished(self) -> None:
        self.progress.advance(self.total)


async def _ingest_one(
    client: AsyncTelha, i: int, f: _File, options: dict[str, Any], wait: bool, out: _Reporter
) -> None:
    if f.format is None:
        f.state, f.failure = "refused", "cannot tell the format (use --format)"
        out.state(i, f, f.state, f.failure)
        return
    f.state = "uploading"
    out.state(i, f, f.state, f.format)
    try:
        result = await client.ingest(
            f.format, f.name, path=f.path, options=options,
            on_upload=lambda done: out.uploaded(i, done),
        )  # fmt: skip
    except TelhaError as exc:  # no answer: failed; an error answer: refused
        f.state = "failed" if isinstance(exc, ConnectionFailed) else "refused"
        f.failure = f"{exc.code}: {exc.message}"
        out.state(i, f, f.state, f.failure)
        return
    f.source_id = result.source_id
    if isinstance(result, IngestApplied):  # format=json: projected in the request
        f.state, f.nodes = "completed", len(result.node_ids)
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
    else:  # piped output has the job in the line above
        out.line(f"{f.name}: job {f.job_id}", on_terminal=True)


async def _wait(client: AsyncTelha, i: int, f: _File, out: _Reporter) -> None:
    assert f.job_id is not None
    job_id = f.job_id

    def on_event(event: JobEventOut) -> None:
        f.state = event.transition
        out.state(i, f, event.transition, event.detail)

    async def hint() -> None:
        """The server's ``hint`` (say, no worker polls the format) once the job has stayed
        pending for :data:`HINT_AFTER_S`, asked again at doubling intervals (at most 30 s)."""
        pause = HINT_AFTER_S
        while True:
            await anyio.sleep(pause)
            pause = min(pause * 2, 30.0)
            if f.state not in ("pending", "enqueued", "retried"):
                return
            try:
                found = await client.job(job_id)
            except TelhaError:
                return
            said = getattr(found, "hint", None)  # servers before the field have none
            if found.state == "pending" and said:
                out.progress.update(out.tasks[i], state=f"enqueued: {said}")
                out.line(f"{f.name}: hint ({said})", on_terminal=True)
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(hint)
        try:
            job = await client.wait(job_id, on_event=on_event)
        except TelhaError as exc:
            f.state, f.failure = "failed", f"{exc.code}: {exc.message}"
            out.state(i, f, f.state, f.failure)
            return
        finally:
            tg.cancel_scope.cancel()
    f.state, f.failure = job.state, job.failure_reason or ""
    f.nodes = _nodes(job) if job.state == "completed" else None
    f.warnings = warning_count(job.stats) if job.state == "completed" else 0


async def _reachable(url: str) -> bool:
    """Whether anything answers HTTP at ``url`` (``GET /healthz``, no retry)."""
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:
            await http.get(url.rstrip("/") + "/healthz")
    except (httpx.TransportError, httpx.InvalidURL):
        return False
    return True


async def _ingest_all(
    url: str, key: str, files: list[_File], options: dict[str, Any], wait: bool,
    concurrency: int, out: _Reporter,
) -> bool:  # fmt: skip
    """Ingest ``files``; ``False`` (nothing sent) when the server cannot be reached."""
    if not await _reachable(url):
        return False
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
    return True


def _summary(files: list[_File], root: Path, console: Console) -> None:
    """The closing table: a ``root`` line (what the names are relative to), then one row a
    file; TSV with a header line when piped."""
    columns = ("file", "source id", "job id", "state", "nodes", "failure")
    rows = [(f.name, f.source_id, f.job_id or "", f.shown_state(),
             "" if f.nodes is None else str(f.nodes), f.failure) for f in files]  # fmt: skip
    where = f"root: {os.path.abspath(root)}"
    if not console.is_terminal:
        click.echo(where)
        for row in (columns, *rows):
            click.echo("\t".join(cell.replace("\t", " ") for cell in row))
        return
    # Ids and names fold onto a second line rather than being cut: they are to be copied.
    folded = [Column(c, overflow="fold") for c in columns[:3]]
    table = Table(*folded, *columns[3:], caption=where)
    for row in rows:
        style = "red" if row[3] in _BAD else None
        table.add_row(*row, style=style)
    console.print(table)


def _interrupted(files: list[_File], root: Path, console: Console) -> None:
    """After Ctrl-C: the table of the files started so far, and what goes on without us."""
    started = [f for f in files if f.state]
    for f in started:
        if f.state == "uploading":  # cut mid-request: the server may or may not have it
            f.state, f.failure = "interrupted", "upload cut short"
    _summary(started, root, console)
    queued = [f for f in started if f.job_id and f.state not in _FINAL]
    left = len(files) - len(started)
    click.echo(
        f"telha: interrupted; {len(queued)} jobs already queued keep running on the server"
        f" (telha job JOB, telha cancel JOB); {left} files not sent",
        err=True,
    )


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", default="auto", show_default=True,
              help="every file's format; auto: from the extension, then the content")  # fmt: skip
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              help="source names are paths below this folder (default: .)")  # fmt: skip
@click.option("--name", default=None, help="the source name of a single file (not a folder)")
@_URL
@_KEY
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="wait for every job to end")  # fmt: skip
@click.option("--options", "options_json", default="{}", help="ingest options, a JSON object")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 64),
              help="files uploaded at once")  # fmt: skip
def ingest(
    paths: tuple[Path, ...], fmt: str, root: Path, name: str | None, url: str, api_key: str,
    wait: bool, options_json: str, concurrency: int,
) -> None:  # fmt: skip
    """Ingest files and folders, show progress, end with a table; exit 1 if any file ended
    dead or was refused, 2 if the server cannot be reached, 130 on Ctrl-C."""
    try:
        options = msgspec.json.decode(options_json)
    except msgspec.DecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--options") from None
    if not isinstance(options, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--options")
    if name is not None and (len(paths) != 1 or paths[0].is_dir() or not name.strip()):
        raise click.BadParameter("names one file: give a single file path", param_hint="--name")
    files = list(_walk(paths, fmt, root))
    if not files:
        raise click.UsageError("no files under the given paths")
    if name is not None:
        files[0].name = name
    console = Console()
    out = _Reporter(files, console)
    try:
        reached = anyio.run(_ingest_all, url, api_key, files, options, wait, concurrency, out)
    except KeyboardInterrupt:
        _interrupted(files, root, console)
        sys.exit(EXIT_INTERRUPTED)
    if not reached:
        unreachable(url)
    _summary(files, root, console)
    bad = [f for f in files if f.state in _BAD]
    sys.exit(1 if bad else 0)
