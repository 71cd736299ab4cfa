"""``AsyncTelha``: an async client of the REST API (docs/rest-api.md), on httpx.

Results are the server's own response Structs (:mod:`telha.wire`: camelCase on the
wire, snake_case attributes; ids as UUID strings, times in µs, offsets in UTF-8 bytes). Errors
raise one class per REST error code (:mod:`telha.client.errors`). Connection errors and 503
answers are retried with exponential backoff and jitter (tenacity), a 429 with a
``Retry-After`` after that many seconds; retrying an ingest is safe, since identical bytes
deduplicate.
"""

from __future__ import annotations

import base64
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal, TypeVar

import anyio
import httpx
import msgspec
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from telha.client.chunks import ChunkCalls
from telha.client.connectors import ConnectorCalls
from telha.client.errors import (
    ConnectionFailed,
    QuotaExceeded,
    TelhaError,
    TooManyRequests,
    Unavailable,
    error_for,
)
from telha.client.events import EventsUnsupported, follow_events
from telha.client.listings import ListingCalls
from telha.client.search import SearchCalls
from telha.domain.model import TERMINAL_JOB_STATES
from telha.domain.units import Units
from telha.wire import (
    Deduplicated,
    DiffOut,
    EdgeList,
    EdgeOut,
    IngestApplied,
    IngestEnqueued,
    JobEventOut,
    JobStatus,
    NodeList,
    NodeOut,
    ReprojectOut,
    RetireOut,
    SourceOut,
    SpanList,
    SpanOut,
    UsageOut,
)

__all__ = ["MULTIPART_OVER_BYTES", "TERMINAL_STATES", "AsyncTelha", "IngestResult"]

#: Files larger than this go through the multipart upload, streamed from disk (bytes).
MULTIPART_OVER_BYTES = 4 * 1024 * 1024
#: ``ingest()``'s answer: 201 applied (json), 202 enqueued, or 200 deduplicated.
IngestResult = IngestApplied | IngestEnqueued | Deduplicated
#: The job states :meth:`AsyncTelha.wait` ends at (the server's own set).
TERMINAL_STATES = TERMINAL_JOB_STATES

_T = TypeVar("_T")
_ERROR = msgspec.json.Decoder(dict[str, Any])
_Progress = Callable[[int], None]
EventCallback = Callable[[JobEventOut], Awaitable[None] | None]


class _ProgressReader:
    """A binary file whose reads report the bytes read so far (httpx's multipart encoder
    reads the file part in chunks through ``read``)."""

    def __init__(self, f: IO[bytes], report: _Progress) -> None:
        self._f = f
        self._report = report
        self._done = 0

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size)
        self._done += len(data)
        self._report(self._done)
        return data

    def __getattr__(self, name: str) -> Any:  # seek, tell, fileno, name for httpx
        return getattr(self._f, name)


class AsyncTelha(ListingCalls, ChunkCalls, SearchCalls, ConnectorCalls):
    """A client of one Telha server for one API key (one tenant/organization scope).

    Use as ``async with AsyncTelha("http://127.0.0.1:7625", key) as telha: ...``.

    :param base_url: the REST front, e.g. ``http://127.0.0.1:7625``.
    :param api_key: sent as ``x-api-key``.
    :param principals: sent as ``x-telha-principals`` (``user:alice,group:eng``): the
        server then shows only the sources whose ACL admits one of them
        (docs/rest-api.md, "Principals"); ``None``: the key's own.
    :param timeout: seconds for each HTTP request (connect, read, write, pool).
    :param retries: extra attempts after a connection error, a 503 or a 429 with
        ``Retry-After`` (0: none).
    :param backoff_max_s: the longest wait between two attempts, seconds (a ``Retry-After``
        is waited in full, up to ``retry_after_max_s``).
    :param retry_after_max_s: the longest ``Retry-After`` waited; a longer one is raised.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 60.0,
        retries: int = 5,
        backoff_max_s: float = 5.0,
        retry_after_max_s: float = 60.0,
        principals: str | None = None,
    ) -> None:
        named = {"x-api-key": api_key, "x-telha-principals": principals}
        headers = {k: v for k, v in named.items() if v is not None}
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout
        )
        self._retries = retries
        self._backoff_max_s = backoff_max_s
        self._retry_after_max_s = retry_after_max_s

    async def __aenter__(self) -> AsyncTelha:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _request(
        self, method: str, url: str, build: Callable[[], dict[str, Any]] | None = None
    ) -> httpx.Response:
        """One request, retried on connection errors, 503 and a 429 whose ``Retry-After`` is
        at most ``retry_after_max_s`` (waited in full). ``build`` gives httpx's request
        arguments afresh for every attempt (a file part is reopened).

        :raises TelhaError: its subclass for the error code; ConnectionFailed when no
            attempt got an answer.
        """
        # 0.1 s doubling per attempt, plus up to half of that at random, capped.
        backoff = wait_exponential_jitter(
            multiplier=0.1, max=self._backoff_max_s, jitter=min(0.5, self._backoff_max_s)
        )

        def retryable(exc: BaseException) -> bool:
            if isinstance(exc, TooManyRequests):
                after = exc.retry_after_s
                return after is not None and after <= self._retry_after_max_s
            return isinstance(exc, (ConnectionFailed, Unavailable))

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome is not None else None
            if isinstance(exc, TooManyRequests) and exc.retry_after_s is not None:
                return exc.retry_after_s
            return float(backoff(state))

        retrying = AsyncRetrying(
            retry=retry_if_exception(retryable),
            wait=wait,
            stop=stop_after_attempt(self._retries + 1),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                try:
                    resp = await self._http.request(method, url, **(build() if build else {}))
                except httpx.TransportError as exc:
                    raise ConnectionFailed(f"{type(exc).__name__}: {exc}", status=0) from exc
                if resp.status_code >= 400:
                    raise _error(resp)
                return resp
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover

    async def _get(self, url: str, typ: type[_T], params: Mapping[str, Any] | None = None) -> _T:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        resp = await self._request("GET", url, lambda: {"params": query})
        return msgspec.json.decode(resp.content, type=typ)

    async def ingest(
        self,
        format: str,
        name: str,
        *,
        content: str | bytes | None = None,
        path: str | Path | None = None,
        options: Mapping[str, Any] | None = None,
        on_upload: _Progress | None = None,
    ) -> IngestResult:
        """``POST /v1/ingest``: ``content`` (text, or bytes), or the file at ``path``. A file
        over :data:`MULTIPART_OVER_BYTES` goes as a multipart upload streamed from disk;
        smaller bodies as JSON (``content``, or ``contentBase64`` for bytes).

        :param format: ``json``, ``text``, ``csv``, ``pdf``, … (docs/formats.md); ``web`` takes
            neither ``content`` nor ``path`` (``name`` is the URL).
        :param on_upload: called with the bytes of the file sent so far (multipart only).
        :returns: :class:`IngestApplied` (201, json), :class:`IngestEnqueued` (202, a job) or
            :class:`Deduplicated` (200: these bytes are the latest version already, or a job
            for them is still pending/leased: ``job_id``).
        :raises ValueError: both ``content`` and ``path``.
        :raises TelhaError: InvalidContent, InvalidRequest, PayloadTooLarge, ContentErased, …
        """
        if content is not None and path is not None:
            raise ValueError("pass content or path, not both")
        opts = dict(options or {})
        if path is not None and (await anyio.Path(path).stat()).st_size > MULTIPART_OVER_BYTES:
            resp = await self._upload(format, name, Path(path), opts, on_upload)
        else:
            if path is not None:
                content = await anyio.Path(path).read_bytes()
            body: dict[str, Any] = {"format": format, "name": name, "options": opts}
            if isinstance(content, str):
                body["content"] = content
            elif content is not None:
                body["contentBase64"] = base64.b64encode(content).decode()
            payload = msgspec.json.encode(body)
            headers = {"content-type": "application/json"}
            resp = await self._request(
                "POST", "/v1/ingest", lambda: {"content": payload, "headers": headers}
            )
        if resp.status_code == 201:
            return msgspec.json.decode(resp.content, type=IngestApplied)
        if resp.status_code == 202:
            return msgspec.json.decode(resp.content, type=IngestEnqueued)
        return msgspec.json.decode(resp.content, type=Deduplicated)

    async def _upload(
        self,
        format: str,
        name: str,
        path: Path,
        options: dict[str, Any],
        on_upload: _Progress | None,
    ) -> httpx.Response:
        """The multipart upload; the file is reopened for each attempt and read in chunks
        (small blocking reads of a local file, as httpx's encoder does them)."""
        files: list[IO[bytes]] = []

        def build() -> dict[str, Any]:
            f = path.open("rb")
            files.append(f)
            part: Any = _ProgressReader(f, on_upload) if on_upload else f
            data = {"format": format, "name": name, "options": msgspec.json.encode(options)}
            return {"data": data, "files": {"file": (path.name, part)}}

        try:
            return await self._request("POST", "/v1/ingest", build)
        finally:
            for f in files:
                f.close()

    async def job(self, job_id: str) -> JobStatus:
        """``GET /v1/ingest/{jobId}``: state, attempts, events (oldest first), failure, stats.

        :raises NotFound: no such job in this scope.
        """
        return await self._get(f"/v1/ingest/{job_id}", JobStatus)

    async def cancel(self, job_id: str, *, children: bool = False) -> JobStatus:
        """``POST /v1/ingest/{jobId}/cancel``: a pending job is ``cancelled`` at once; a
        leased one's lease is revoked (its worker is told and can write nothing more; a
        half-streamed version is abandoned). Cancelling again answers the same job.

        :param children: also cancel the job's unfinished child jobs (and theirs).
        :returns: the job as it is now (state ``cancelled``; a ``completed`` parent stays
            ``completed`` with ``children``).
        :raises NotFound: no such job in this scope.
        :raises JobFinished: the job already ended ``completed`` (without ``children``) or
            ``dead``.
        """
        query = {"children": "true"} if children else {}
        url = f"/v1/ingest/{job_id}/cancel"
        resp = await self._request("POST", url, lambda: {"params": query})
        return msgspec.json.decode(resp.content, type=JobStatus)

    async def wait(
        self,
        job_id: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 — the client's documented signature
        on_event: EventCallback | None = None,
        poll_s: float = 0.05,
        max_poll_s: float = 1.0,
        stream: bool = True,
    ) -> JobStatus:
        """Wait until the job is terminal (:data:`TERMINAL_STATES`: ``completed``, ``dead``
        or ``cancelled``), calling ``on_event`` (a function or coroutine function) once for
        each event, in order, as it is written.

        Follows the job's live event stream (``GET /v1/ingest/{jobId}/events``), reconnecting
        after the last event seen when the stream ends early (a dropped connection, the
        server restarting); against a server without that route (404 or 405), one with no
        stream free for the scope (503, or 429 ``QUOTA_EXCEEDED``: the scope's share of the
        streams is in use), or with ``stream=False``, it polls ``GET /v1/ingest/{jobId}``
        instead.

        :param timeout: seconds at most (``None``: no limit).
        :param poll_s: first polling interval, doubled up to ``max_poll_s`` while nothing
            changes and reset when something does (polling only).
        :param stream: ``False``: poll, even where the server streams events.
        :returns: the terminal job.
        :raises ValueError: ``job_id`` is empty or ``None`` (a :class:`Deduplicated` answer
            without a job: there is nothing to wait for).
        :raises TimeoutError: not terminal within ``timeout``.
        :raises NotFound: no such job in this scope.
        :raises ConnectionFailed: the server stayed out of reach for ``retries`` attempts.
        """
        if not job_id:
            raise ValueError("no job to wait for (a deduplicated ingest has job_id None)")
        seen = [0]  # events handed to on_event: seq 1..seen[0] (a job's events count from 1)
        with anyio.move_on_after(timeout):
            if stream:
                job = await self._wait_streaming(job_id, on_event, seen)
                if job is not None:
                    return job
            return await self._wait_polling(job_id, on_event, seen, poll_s, max_poll_s)
        job = await self.job(job_id)
        raise TimeoutError(f"job {job_id} is still {job.state} after {timeout} s")

    async def _wait_streaming(
        self, job_id: str, on_event: EventCallback | None, seen: list[int]
    ) -> JobStatus | None:
        """:meth:`wait` over the event stream; ``None`` when the server has no such route or
        answers 503 or 429 ``QUOTA_EXCEEDED`` (the scope's share of the streams is in use;
        polling works there). Each stream ends after the terminal event; one
        that ended (or dropped) before it is opened again after ``seen[0]``, up to
        ``retries`` times in a row without an event."""
        failures = 0
        while True:
            try:
                async for seq, event in follow_events(self._http, job_id, seen[0], _error):
                    if seq <= seen[0]:
                        continue
                    seen[0], failures = seq, 0
                    await _call(on_event, event)
            # No route, no stream free now, or the scope holds its share of the streams.
            except (EventsUnsupported, Unavailable, QuotaExceeded):
                return None
            except ConnectionFailed:
                if failures >= self._retries:
                    raise
            else:
                job = await self.job(job_id)
                if job.state in TERMINAL_STATES:
                    for event in job.events[seen[0] :]:  # written after the stream ended
                        seen[0] += 1
                        await _call(on_event, event)
                    return job
                if failures >= self._retries:  # the server keeps ending it early
                    raise ConnectionFailed(
                        f"the event stream of job {job_id} keeps ending", status=0
                    )
            failures += 1
            await anyio.sleep(min(self._backoff_max_s, 0.1 * 2**failures))

    async def _wait_polling(
        self,
        job_id: str,
        on_event: EventCallback | None,
        seen: list[int],
        poll_s: float,
        max_poll_s: float,
    ) -> JobStatus:
        """:meth:`wait` by polling ``GET /v1/ingest/{jobId}``; ``seen[0]`` events were
        already handed on."""
        interval = poll_s
        while True:
            job = await self.job(job_id)
            for event in job.events[seen[0] :]:
                await _call(on_event, event)
            interval = poll_s if len(job.events) > seen[0] else min(interval * 2, max_poll_s)
            seen[0] = max(seen[0], len(job.events))
            if job.state in TERMINAL_STATES:
                return job
            await anyio.sleep(interval)

    async def usage(self) -> UsageOut:
        """``GET /v1/usage``: the scope's pending jobs, stored bytes and limits (``None``:
        not limited)."""
        return await self._get("/v1/usage", UsageOut)

    async def source(self, source_id: str) -> SourceOut:
        """``GET /v1/sources/{sourceId}``: the source and its versions, newest first, its
        ``state`` and its last job (a source whose jobs wrote no version has no versions).

        :raises NotFound: no such source in this scope.
        """
        return await self._get(f"/v1/sources/{source_id}", SourceOut)

    async def text(
        self,
        source_id: str,
        tx: int,
        start: int | None = None,
        end: int | None = None,
        *,
        units: Units = "byte",
    ) -> str:
        """A version's canonical text, or its slice ``[start, end)`` (UTF-8 byte offsets,
        as spans give them; or code points, or UTF-16 units, per ``units``).

        :raises InvalidRequest: a range outside the text or not on character boundaries.
        :raises NotFound: no such source or version.
        """
        query: dict[str, int | str] = {
            k: v for k, v in {"start": start, "end": end}.items() if v is not None
        }
        if units != "byte":
            query["units"] = units
        url = f"/v1/sources/{source_id}/versions/{tx}/text"
        resp = await self._request("GET", url, lambda: {"params": query})
        return resp.content.decode("utf-8")

    async def spans(self, source_id: str, tx: int, *, units: Units = "byte") -> list[SpanOut]:
        """A version's span rows in document order, each with its ``linked_nodes``
        (offsets in ``units``: UTF-8 bytes, code points or UTF-16 units).

        :raises NotFound: no such source or version.
        """
        url = f"/v1/sources/{source_id}/versions/{tx}/spans"
        return (await self._get(url, SpanList, {"units": _units(units)})).spans

    async def node(
        self, node_id: str, as_of: int | None = None, *, units: Units = "byte"
    ) -> NodeOut:
        """``GET /v1/nodes/{nodeId}``: the node (as of transaction time ``as_of`` µs, else
        now) with ``provenance.spans[].text`` resolved (offsets in ``units``) and its
        ``ambiguities``.

        :raises NotFound: no such node (at that time).
        """
        params = {"asOf": as_of, "units": _units(units)}
        return await self._get(f"/v1/nodes/{node_id}", NodeOut, params)

    async def nodes(
        self,
        *,
        label: str | None = None,
        source_id: str | None = None,
        page_size: int = 500,
        as_of: int | None = None,
    ) -> AsyncIterator[NodeOut]:
        """Every node with ``label`` and/or from ``source_id``, over all pages
        (``page_size`` per request, at most 1000); ``as_of``: the nodes as of that
        transaction time (µs), else the current ones.

        :raises InvalidRequest: a bad filter.
        """
        cursor = None
        while True:
            params = {"label": label, "sourceId": source_id, "limit": page_size,
                      "cursor": cursor, "asOf": as_of}  # fmt: skip
            page = await self._get("/v1/nodes", NodeList, params)
            for node in page.nodes:
                yield node
            cursor = page.next_cursor
            if cursor is None:
                return

    async def edges(
        self,
        node_id: str,
        direction: Literal["in", "out", "both"] = "both",
        as_of: int | None = None,
    ) -> list[EdgeOut]:
        """A node's edges whose other end exists now (``as_of``: then, a transaction time
        in µs); dangling edges are not shown.

        :raises NotFound: no such node (at that time).
        """
        url = f"/v1/nodes/{node_id}/edges"
        return (await self._get(url, EdgeList, {"direction": direction, "asOf": as_of})).edges

    async def retire(self, source_id: str, reason: str | None = None) -> RetireOut:
        """``DELETE /v1/sources/{sourceId}``: retire the source (its graph leaves the
        current one; history, bytes and text stay). Retiring again answers the first
        retire.

        :raises NotFound: no such source in this scope.
        :raises Conflict: the source is being erased, or was erased.
        :raises InvalidRequest: an empty reason, or one over 1000 characters.
        """
        query = {"reason": reason} if reason is not None else {}
        resp = await self._request("DELETE", f"/v1/sources/{source_id}", lambda: {"params": query})
        return msgspec.json.decode(resp.content, type=RetireOut)

    async def reproject(
        self, *, fmt: str | None = None, source_id: str | None = None, dry_run: bool = False
    ) -> ReprojectOut:
        """``POST /v1/reproject``: the scope's outdated current versions, each read again
        from its stored raw bytes by a new job unless ``dry_run``; those whose bytes are gone
        in ``raw_gone``.

        :raises InvalidRequest: an unknown format, a source id that is not a UUID.
        """
        body: dict[str, Any] = {"dryRun": dry_run}
        if fmt is not None:
            body["format"] = fmt
        if source_id is not None:
            body["sourceId"] = source_id
        resp = await self._request("POST", "/v1/reproject", lambda: {"json": body})
        return msgspec.json.decode(resp.content, type=ReprojectOut)

    async def diff_page(
        self,
        source_id: str,
        from_tx: int | None = None,
        to_tx: int | None = None,
        *,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> DiffOut:
        """``GET /v1/sources/{sourceId}/diff``: one page of what changed from version
        ``from_tx`` to ``to_tx`` (µs; defaults: the version before ``to_tx``, and the
        latest); pass the page's ``next_cursor`` (and its ``from_``/``to``) for the next.

        :raises InvalidRequest: ``from_tx`` not before ``to_tx``, a bad cursor or limit.
        :raises NotFound: no such source, or a tx that is not one of its versions.
        :raises ContentErased: one of the two versions was erased.
        """
        params = {"from": from_tx, "to": to_tx, "limit": limit, "cursor": cursor}
        return await self._get(f"/v1/sources/{source_id}/diff", DiffOut, params)

    async def diff(
        self,
        source_id: str,
        from_tx: int | None = None,
        to_tx: int | None = None,
        *,
        page_size: int = 500,
    ) -> DiffOut:
        """The whole diff from version ``from_tx`` to ``to_tx`` (see :meth:`diff_page`),
        every page fetched (``page_size`` nodes each, at most 1000) and joined into one
        :class:`DiffOut` (``next_cursor`` ``None``). The versions the first page picks are
        kept for the rest, so a version published meanwhile does not mix in.

        :raises InvalidRequest: ``from_tx`` not before ``to_tx``.
        :raises NotFound: no such source, or a tx that is not one of its versions.
        :raises ContentErased: one of the two versions was erased.
        """
        whole = await self.diff_page(source_id, from_tx, to_tx, limit=page_size)
        cursor = whole.next_cursor
        while cursor is not None:
            page = await self.diff_page(
                source_id, whole.from_, whole.to, limit=page_size, cursor=cursor
            )
            whole.added += page.added
            whole.removed += page.removed
            whole.changed += page.changed
            cursor = page.next_cursor
        whole.next_cursor = None
        return whole


def _units(units: Units) -> str | None:
    """The ``units`` query parameter (left out for the default, bytes)."""
    return None if units == "byte" else units


async def _call(on_event: EventCallback | None, event: JobEventOut) -> None:
    """``on_event(event)``, awaited when it returns an awaitable."""
    if on_event is not None:
        result = on_event(event)
        if inspect.isawaitable(result):
            await result


def _error(resp: httpx.Response) -> TelhaError:
    try:
        detail = _ERROR.decode(resp.content).get("error") or {}
    except msgspec.DecodeError:
        detail = {}
    code = detail.get("code") if isinstance(detail, dict) else None
    message = detail.get("message") if isinstance(detail, dict) else None
    after = resp.headers.get("retry-after", "")
    retry_after_s = float(after) if after.isdigit() else None  # an HTTP date: not waited
    return error_for(
        resp.status_code, code, message or resp.text[:200] or resp.reason_phrase, retry_after_s
    )
