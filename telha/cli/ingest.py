"""``telha ingest PATH...`` (docs/cli-and-client.md), over :class:`telha.client.AsyncTelha`.

It walks folders (sorted; hidden files skipped), picks each file's format
(:func:`telha.client.formats.guess_format`, or ``--format``), checks the server answers at
all (else ``cannot reach URL`` and exit 2, before any upload), uploads up to
``--concurrency`` files at once — with a progress bar per file and an overall one on a
terminal, one plain line per step otherwise — waits for each job (``--wait``, the default)
showing its state changes (and the server's ``hint`` when a job stays ``enqueued``), and
waits for the child jobs a completed one enqueued (an e-mail's attachments, an archive's
files: :mod:`telha.cli.children`), and ends with a table: file, source id, job id, state
(:func:`state_cell`: ``completed, 2 of 3 attachments dead``), nodes, failure (TSV with a
header line when stdout is not a terminal). Exit code 1 if any file ended ``dead`` or
``cancelled``, was refused (an error answer, or no format) or failed (no answer); 130 on
Ctrl-C (the table so far is printed first); 2 when the server refuses the key
(``UNAUTHENTICATED``): the key is tried once before any upload, and a refusal later (a key
revoked meanwhile) stops every upload and wait, so one line says it instead of one per file;
else 0 (dead children included: the table says so).

A file's source name is its path relative to ``--root`` (default: the current folder),
``/``-separated, the same whether the file was named alone or found in a folder; a file
outside the root keeps its normalised ``../`` segments. ``--name`` names a single file.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

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
from rich.text import Text

from telha.cli.children import Children, children_note, noun, wait_family
from telha.cli.client import _KEY, _URL, unreachable
from telha.cli.ingest_table import TableRow, summary_line, terminal_table, tsv_lines, wide_width
from telha.cli.plural import plural
from telha.client import (
    AsyncTelha,
    ConnectionFailed,
    Deduplicated,
    IngestApplied,
    JobEventOut,
    JobStatus,
    TelhaError,
    Unauthenticated,
)
from telha.client.formats import guess_format

__all__ = ["ingest", "source_name", "state_cell", "warning_count"]

_NODES = re.compile(r"\bnodes=(\d+)")
_FINAL = frozenset({"completed", "dead", "cancelled", "refused", "deduplicated", "failed"})
#: How a file that did not make it in ended (red in the table; exit code 1).
_BAD = ("dead", "cancelled", "refused", "failed")
#: Seconds a job may stay ``enqueued`` before the server's ``hint`` for it is asked for
#: (then again at doubling intervals until it is leased or has one).
HINT_AFTER_S = 3.0
#: The exit code after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130
#: The exit code when the server refuses the API key (as for a usage or configuration error).
EXIT_KEY_REFUSED = 2


class _KeyRefused(Exception):
    """The server answered ``UNAUTHENTICATED``: every other request would be refused too."""

    def __init__(self, error: TelhaError) -> None:
        super().__init__(error.message)
        self.error = error


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
    #: Its child jobs by state once they ended (:mod:`telha.cli.children`); ``None``: none
    #: waited for.
    children: Children | None = None
    #: Warnings its projection reported (the sum of ``stats.warnings`` counts).
    warnings: int = 0


def state_cell(f: _File) -> str:
    """The table's state cell of ``f``: its state, then what qualifies it — the warnings
    its projection reported (``completed (2 warnings)``, ``stats.warnings``, docs/formats.md
    "Warnings") and how many of its child jobs did not make it in (``completed, 2 of 3
    attachments dead``, :func:`telha.cli.children.children_note`). Every qualifier of the
    state column is added here, so they compose."""
    cell = f.state
    if f.state == "completed" and f.warnings:
        cell += f" ({plural(f.warnings, 'warning')})"
    note = children_note(f.children, f.format)
    if note:
        cell += f", {note}"
    return cell


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
    except Unauthenticated as exc:  # the same for every file: stop them all
        raise _KeyRefused(exc) from None
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

    job: JobStatus | None = None
    error: TelhaError | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(hint)
        try:
            job = await client.wait(job_id, on_event=on_event)
        except TelhaError as exc:  # raised out of here, it would come out of tg grouped
            error = exc
        finally:
            tg.cancel_scope.cancel()
    if isinstance(error, Unauthenticated):
        raise _KeyRefused(error)
    if job is None:
        assert error is not None
        f.state, f.failure = "failed", f"{error.code}: {error.message}"
        out.state(i, f, f.state, f.failure)
        return
    f.state, f.failure = job.state, job.failure_reason or ""
    f.nodes = _nodes(job) if job.state == "completed" else None
    f.warnings = warning_count(job.stats) if job.state == "completed" else 0
    if job.state == "completed" and job.children:
        await _wait_children(client, i, f, job, out)


async def _wait_children(
    client: AsyncTelha, i: int, f: _File, job: JobStatus, out: _Reporter
) -> None:
    """Wait for the completed job's children (:func:`telha.cli.children.wait_family`),
    showing how many are still running; a plain line when they all ended."""
    what = noun(f.format)

    def progress(children: Children) -> None:
        if children.unfinished:
            shown = f"completed, {children.unfinished} of {children.total} {what} running"
            out.progress.update(out.tasks[i], state=shown, visible=True)

    try:
        f.children = await wait_family(client, job, progress, hint_after_s=HINT_AFTER_S)
    except Unauthenticated as exc:
        raise _KeyRefused(exc) from None
    except TelhaError as exc:
        f.failure = f"{what}: {exc.code}: {exc.message}"
        return
    finally:
        out.progress.update(out.tasks[i], visible=False)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(f.children.counts.items()))
    out.line(f"{f.name}: {what}: {counts}" + (f" ({f.children.hint})" if f.children.hint else ""))


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
    concurrency: int, out: _Reporter, wait_index: bool = False,
) -> bool:  # fmt: skip
    """Ingest ``files``; ``False`` (nothing sent) when the server cannot be reached.

    :raises _KeyRefused: the server refused the key: at once (``GET /v1/usage``, before any
        upload), or later, after which no other file is started or waited for.
    """
    if not await _reachable(url):
        return False
    limit = anyio.Semaphore(concurrency)
    refused: list[_KeyRefused] = []

    async def one(i: int, f: _File) -> None:
        async with limit:
            try:
                await _ingest_one(client, i, f, options, wait, out)
            except _KeyRefused as exc:
                refused.append(exc)
                tg.cancel_scope.cancel()
                return
            out.finished()

    async with AsyncTelha(url, key) as client:
        await _check_key(client)
        with out.progress:
            async with anyio.create_task_group() as tg:
                for i, f in enumerate(files):
                    tg.start_soon(one, i, f)
        if wait_index and not refused and any(f.state == "completed" for f in files):
            await _wait_index(client, out)
    if refused:
        raise refused[0]
    return True


async def _check_key(client: AsyncTelha) -> None:
    """Ask once whether the server knows the key (``GET /v1/usage``); any answer but
    ``UNAUTHENTICATED`` (a server without the route, a rate limit) lets the uploads say.

    :raises _KeyRefused: the server refused the key.
    """
    try:
        await client.usage()
    except Unauthenticated as exc:
        raise _KeyRefused(exc) from None
    except TelhaError:
        pass


async def _wait_index(client: AsyncTelha, out: _Reporter) -> None:
    """``--wait-index``: until the scope's search index holds every version published
    (``indexPending`` 0; docs/cli-and-client.md), one line when the count changes."""
    said = 0

    def pending(n: int) -> None:
        nonlocal said
        if n != said:
            said = n
            out.line(f"search index: {plural(n, 'version')} still being indexed", on_terminal=True)

    try:
        await client.wait_index(on_pending=pending)
    except TelhaError as exc:
        out.line(f"search index: not waited for ({exc.code}: {exc.message})", on_terminal=True)
        return
    if said:
        out.line("search index: up to date", on_terminal=True)


def _rows(files: list[_File]) -> list[TableRow]:
    return [
        TableRow(
            file=f.name,
            source_id=f.source_id,
            job_id=f.job_id or "",
            state=state_cell(f),
            outcome=f.state,
            nodes="" if f.nodes is None else str(f.nodes),
            failure=f.failure,
            bad=f.state in _BAD,
        )
        for f in files
    ]


def _summary(
    files: list[_File], root: Path, console: Console, *, wide: bool, seconds: float
) -> None:
    """The closing table (docs/cli-and-client.md, "The closing table"): a ``root`` line
    (what the names are relative to), one row a file, then the summary line. Piped: the
    root line, then TSV with full ids and a header line on stdout, the summary line on
    stderr (stdout stays the table); on a terminal the table fits its width
    (:mod:`telha.cli.ingest_table`), then the root line and the summary line."""
    rows = _rows(files)
    where = f"root: {os.path.abspath(root)}"
    said = summary_line((f.state for f in files), seconds)
    if not console.is_terminal:
        click.echo(where)
        for line in tsv_lines(rows):
            click.echo(line)
        click.echo(said, err=True)
        return
    width = max(console.width, wide_width(rows)) if wide else console.width
    table = terminal_table(rows, wide=wide, width=width)
    if width > console.width:  # full ids: the terminal wraps the lines
        saved, console.width = console.width, width
        try:
            console.print(table)
        finally:
            console.width = saved
    else:
        console.print(table)
    # The root line is never folded (a path to copy); the terminal wraps it if need be.
    console.print(where, markup=False, highlight=False, soft_wrap=True, style="dim")
    console.print(said, markup=False, highlight=False)


def _interrupted(
    files: list[_File], root: Path, console: Console, *, wide: bool, seconds: float
) -> None:
    """After Ctrl-C: the table of the files started so far, and what goes on without us."""
    started = [f for f in files if f.state]
    for f in started:
        if f.state == "uploading":  # cut mid-request: the server may or may not have it
            f.state, f.failure = "interrupted", "upload cut short"
    _summary(started, root, console, wide=wide, seconds=seconds)
    queued = [f for f in started if f.job_id and f.state not in _FINAL]
    left = len(files) - len(started)
    click.echo(
        f"telha: interrupted; {plural(len(queued), 'job')} already queued keep running on the"
        f" server (telha job JOB, telha cancel JOB); {plural(left, 'file')} not sent",
        err=True,
    )


def _key_refused(
    files: list[_File], root: Path, console: Console, url: str, error: TelhaError,
    *, wide: bool, seconds: float,
) -> NoReturn:  # fmt: skip
    """The server refused the key: the table of the files it took before (a key revoked
    meanwhile; none when it refused the first request), one line on stderr, exit 2."""
    taken = [f for f in files if f.source_id]
    if taken:
        _summary(taken, root, console, wide=wide, seconds=seconds)
    click.echo(
        f"telha: {url} refuses the API key ({error.code}: {error.message}; set --api-key or"
        f" TELHA_API_KEY); {plural(len(files) - len(taken), 'file')} not sent",
        err=True,
    )
    sys.exit(EXIT_KEY_REFUSED)


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
@click.option("--wait-index", is_flag=True, default=False,
              help="then wait until search finds what was ingested")  # fmt: skip
@click.option("--wide", is_flag=True, default=False,
              help="full ids in the table on a terminal (piped: always)")  # fmt: skip
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 64),
              help="files uploaded at once")  # fmt: skip
def ingest(
    paths: tuple[Path, ...], fmt: str, root: Path, name: str | None, url: str, api_key: str,
    wait: bool, options_json: str, wait_index: bool, wide: bool, concurrency: int,
) -> None:  # fmt: skip
    """Ingest files and folders, show progress, end with a table; exit 1 if any file ended
    dead or was refused, 2 if the server cannot be reached or refuses the key, 130 on
    Ctrl-C."""
    try:
        options = msgspec.json.decode(options_json)
    except msgspec.DecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--options") from None
    except RecursionError:
        raise click.BadParameter("nested too deep", param_hint="--options") from None
    if not isinstance(options, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--options")
    if name is not None and (len(paths) != 1 or paths[0].is_dir() or not name.strip()):
        raise click.BadParameter("names one file: give a single file path", param_hint="--name")
    files = list(_walk(paths, fmt, root))
    if not files:
        raise click.UsageError("no files under the given paths")
    if name is not None:
        files[0].name = name
    started = time.monotonic()
    console = Console()
    out = _Reporter(files, console)
    try:
        reached = anyio.run(
            _ingest_all, url, api_key, files, options, wait, concurrency, out, wait_index and wait
        )
    except KeyboardInterrupt:
        _interrupted(files, root, console, wide=wide, seconds=time.monotonic() - started)
        sys.exit(EXIT_INTERRUPTED)
    except _KeyRefused as exc:
        _key_refused(
            files, root, console, url, exc.error, wide=wide, seconds=time.monotonic() - started
        )
    if not reached:
        unreachable(url)
    _summary(files, root, console, wide=wide, seconds=time.monotonic() - started)
    bad = [f for f in files if f.state in _BAD]
    sys.exit(1 if bad else 0)
