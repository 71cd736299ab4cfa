"""Configuration: ``config.toml`` parsed and validated with msgspec
(docs/operations.md, "Configuration").

Every key is optional; the defaults are the ones ``config.toml`` shows. Unknown keys and wrong
types fail start-up with the key's dotted name (:class:`ConfigError`). Environment variables
``TELHA_<SECTION>__<KEY>`` override single keys; their value is read as a TOML scalar
(``TELHA_JOBS__MAX_ATTEMPTS=3`` is an integer), falling back to a plain string.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from workers_common.destinations import Destinations, parse_entry
from workers_common.secret_grants import parse_grants

__all__ = ["Config", "ConfigError", "load_config"]


class _Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every config section: frozen, keyword-only, unknown keys rejected."""


class ServerConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[server]``: listen addresses of the REST and gRPC fronts, the shutdown grace (s) and
    the live event streams' limits (docs/rest-api.md, "Live events")."""

    #: REST front bind address, ``host:port`` (port 0 picks a free port).
    rest_addr: str = "127.0.0.1:7625"
    #: gRPC front bind address, ``host:port``.
    grpc_addr: str = "127.0.0.1:7626"
    #: Seconds in-flight requests get to finish after SIGTERM/SIGINT.
    shutdown_grace_s: float = 10.0
    #: Open ``GET /v1/ingest/{jobId}/events`` streams at once; more answer 503 UNAVAILABLE.
    #: One scope may hold at most its share (``quotas.max_event_streams``).
    max_event_streams: int = 1000
    #: Seconds between an open event stream's re-reads when it was not woken: how soon an
    #: event written by another replica on the same database reaches it.
    events_reread_s: float = 1.0
    #: Seconds a request body may send no bytes; then the request is answered 408
    #: REQUEST_TIMEOUT and its slot (``ingest.max_concurrent``) is free again
    #: (docs/operations.md, "Slow and idle clients").
    body_idle_timeout_s: float = 30.0


class StorageConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[storage]``: the engine; for SQLite the file, its durability and the read pool size;
    for PostgreSQL the DSN and the connection pool size (docs/operations.md)."""

    #: ``"sqlite"`` (embedded, one process) or ``"postgres"`` (several replicas, one database).
    engine: Literal["sqlite", "postgres"] = "sqlite"
    #: SQLite file; a relative path is relative to the config file's folder. With PostgreSQL
    #: its folder still holds the process's local files (uploads being received, the
    #: generated worker-token key).
    path: str = "data/telha.db"
    synchronous: Literal["normal", "full"] = "normal"
    #: Read-only connections used by the read API (WAL readers).
    readers: int = 2
    #: MiB of the SQLite file each read connection maps into memory (``PRAGMA mmap_size``;
    #: SQLite caps it at 2,047): pages are read from the OS's page cache without a system
    #: call each. 0 reads every page with ``pread``.
    reader_mmap_mib: int = 2047
    #: PostgreSQL connection string (``postgresql://user@host:port/db``); required with
    #: ``engine = "postgres"``.
    dsn: str = ""
    #: PostgreSQL connections per replica in the pool (one more is opened for LISTEN).
    pool_size: int = 10


class AuthConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[auth]``: REST API key settings."""

    pass


class GrpcConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[grpc]``: the HMAC key of worker tokens."""

    #: HMAC key for worker tokens; empty means one is generated into the data folder.
    token_key: str = ""


class IngestConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[ingest]``: request limits (body and upload bytes, JSON records, depth, nodes) and
    concurrency."""

    #: Largest accepted ``POST /v1/ingest`` body, in bytes.
    max_body_bytes: int = 8 * 1024 * 1024
    #: Largest accepted ``multipart/form-data`` file part, in bytes (streamed to disk).
    max_upload_bytes: int = 2 * 1024 * 1024 * 1024
    #: Largest accepted ``format=json`` batch, in records.
    json_max_records: int = 10_000
    #: Deepest accepted object nesting in a JSON record (a record's own fields are level 1).
    json_max_depth: int = 8
    #: Most nodes one ``format=json`` request may create (records plus child objects).
    json_max_nodes: int = 100_000
    json_nested: Literal["flatten", "child"] = "flatten"
    #: Ingest requests processed at once; more answer 503 UNAVAILABLE (retry later). One
    #: scope may hold at most its share (``quotas.max_concurrent_ingests``).
    max_concurrent: int = 16


class JobsConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[jobs]``: attempts, losses with a worker, lease length (s), backoff (ms base, s cap),
    reaper period (s), retention (days, and the collector's period in s; docs/operations.md,
    "Retention")."""

    max_attempts: int = 5
    #: Losses of one job with its worker (its ``PollJobs`` stream ended, or its lease ran out)
    #: after which it goes ``dead`` as ``resource_limit: worker lost N times`` (the poison cap).
    max_worker_losses: int = 3
    lease_secs: float = 180.0
    backoff_base_ms: int = 1000
    backoff_max_s: float = 300.0
    reap_interval_s: float = 5.0
    #: Days an ended job (completed, dead, cancelled) is kept before retention removes it,
    #: with its events and raw upload bytes nothing else names; 0 keeps every job forever.
    retain_days: float = 30.0
    #: Seconds between the retention passes of ``telha serve``.
    gc_interval_s: float = 3600.0


class WorkersConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[workers]``: worker modules run in-process and consumers per module."""

    #: Worker modules run inside ``telha serve`` (each must be importable): the six format
    #: workers. ``connectors`` (sync runs, docs/connectors.md) is not in the default.
    in_process: list[str] = msgspec.field(
        default_factory=lambda: [
            "text_worker",
            "tabular_worker",
            "docling_worker",
            "email_worker",
            "code_worker",
            "web_worker",
        ]
    )
    #: Consumers per in-process worker module.
    concurrency: int = 2
    #: Worker processes shared by the in-process modules that declare ``PROCESS_POOL``
    #: (``email_worker``, ``code_worker``): their parsing runs there, off the GIL of
    #: ``telha serve``. ``None``: one per CPU; ``0``: run them in threads like the others.
    processes: int | None = None


class DoclingConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[docling]``: per-parse limits (pages, address space MB, time s) and the models folder;
    exported to workers as ``TELHA_DOCLING__*``."""

    max_pages: int = 2000
    mem_ceiling_mb: int = 4096
    timeout_s: float = 600.0
    #: Folder of docling's downloaded models; set, PDFs use the layout-model pipeline
    #: (headings, tables, reading order), empty: the model-free native pipeline.
    artifacts_path: str = ""


class OcrConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[ocr]``: Tesseract OCR of scanned PDF pages and images in ``docling_worker``
    (docs/formats.md, "OCR"); exported to workers as ``TELHA_OCR__*``."""

    #: Tesseract language names; each beyond ``eng`` is a Debian package the operator adds
    #: (``tesseract-ocr-deu``, …).
    languages: list[str] = msgspec.field(default_factory=lambda: ["eng"])
    #: Resolution PDF pages are rendered at for OCR, dots per inch.
    dpi: int = 300
    #: Words under this confidence (0–100) are kept and counted in
    #: ``stats.ocr_low_confidence_words``.
    min_confidence: float = 30.0
    #: Most pages one document may send through OCR; more → ``resource_limit``.
    max_pages: int = 500
    #: Most seconds one page's OCR may take; longer → ``resource_limit`` naming the page.
    page_timeout_s: float = 120.0


class WebConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[web]``: the browser ``web_worker`` drives; exported to workers as ``TELHA_WEB__*``."""

    #: The Chromium executable (Debian's ``chromium`` package; never downloaded at run time).
    chromium_path: str = "/usr/bin/chromium"
    #: Destinations the web worker may reach: ``host``, ``host:port``, an address, an
    #: ``address:port`` (``[v6]:port``) or a CIDR network; empty: any public address
    #: (docs/formats.md, "Web pages: destinations"). A loopback test site is listed by
    #: address, say ``["127.0.0.1:8000"]``.
    allowed_hosts: list[str] = msgspec.field(default_factory=list)
    #: Refuse loopback, private, link-local, CGNAT and other non-public addresses unless an
    #: address or network entry of ``allowed_hosts`` lists them; ``false`` (an intranet
    #: crawler) makes ``telha serve`` log a warning.
    deny_private: bool = True
    #: Run Chromium without its sandbox where the host cannot provide one (no user
    #: namespaces, no ``telha-browser`` user); ``false``: the web worker refuses to start.
    allow_unsandboxed: bool = False
    #: Give the browser ``CAP_SYS_NICE`` (it may then raise its threads' priorities; each
    #: page cost about 20 % less CPU on the bench machine; docs/formats.md, "Web pages: the
    #: browser's sandbox", says what the browser could then do). Only when Telha runs as root.
    browser_sys_nice: bool = False


class ConnectorsConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[connectors]``: where a connector that names a server in its settings (the ``imap``
    kind's ``host`` and ``port``) may connect; exported to workers as ``TELHA_CONNECTORS__*``
    (docs/connectors.md, "The imap kind")."""

    #: Destinations a connector may reach, with the entries and meaning of ``[web]
    #: allowed_hosts``: ``host``, ``host:port``, an address, an ``address:port``
    #: (``[v6]:port``) or a CIDR network; empty: any public address. A mail server on the
    #: loopback or a private network is listed by address or network, say
    #: ``["10.0.0.0/8"]``.
    allowed_hosts: list[str] = msgspec.field(default_factory=list)
    #: Refuse loopback, private, link-local, CGNAT and other non-public addresses unless an
    #: address or network entry of ``allowed_hosts`` lists them (checked on the address a
    #: run connects to).
    deny_private: bool = True
    #: Absolute directories a ``folder`` connector's ``root`` and a ``slack-export``
    #: connector's ``path`` must lie inside (after resolving symbolic links and ``..``; a
    #: root equal to an entry is inside). Empty: no folder or slack-export connector may be
    #: added or run. Checked when one is added and by the connector worker at every run
    #: (docs/connectors.md, "Allowed roots").
    allowed_roots: list[str] = msgspec.field(default_factory=list)
    #: Which scope may use which ``TELHA_SECRET_*`` variable (an ``imap`` connector's
    #: ``passwordEnv``): entries ``"TELHA_SECRET_NAME=tenant/org"``; a variable listed in
    #: none can be used by no connector (docs/connectors.md, "The imap kind").
    secrets: list[str] = msgspec.field(default_factory=list)


class WebhooksConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[webhooks]``: where deliveries may go and how long they are retried
    (docs/operations.md, "Webhooks")."""

    #: Destinations a webhook (``options.webhook``, ``telha webhook add``) may reach, with
    #: the entries and meaning of ``[web] allowed_hosts``: ``host``, ``host:port``, an
    #: address, an ``address:port`` (``[v6]:port``) or a CIDR network; empty: any public
    #: address. An entry without a port admits every port (``telha serve`` warns). A
    #: loopback receiver is listed by address and port, say ``["127.0.0.1:8000"]``.
    allowed_hosts: list[str] = msgspec.field(default_factory=list)
    #: Refuse loopback, private, link-local, CGNAT and other non-public addresses unless an
    #: address or network entry of ``allowed_hosts`` lists them (checked on the address a
    #: delivery connects to).
    deny_private: bool = True
    #: A delivery not made this long after its job ended is given up (``expired``), seconds.
    max_age_s: float = 86_400.0
    #: Timeout of one POST (connect, send, receive), seconds.
    timeout_s: float = 10.0
    #: How long a deliverer holds a delivery it is sending; one left by a deliverer that
    #: died is sent again after it (> ``timeout_s``), seconds.
    claim_s: float = 60.0
    #: Retry backoff: the first retry after ~``backoff_base_ms`` ms, doubling up to
    #: ``backoff_max_s`` seconds (jittered).
    backoff_base_ms: int = 1000
    backoff_max_s: float = 3600.0
    #: Deliveries claimed per pass (one transaction each way).
    batch: int = 64
    #: POSTs in flight at once, each slot with its own kept-alive connection.
    concurrency: int = 8
    #: How often an idle deliverer looks for due deliveries, milliseconds.
    poll_interval_ms: int = 200

    def rules(self) -> Destinations:
        """The destination rules of ``allowed_hosts`` and ``deny_private`` (the same as
        ``[web]``'s, refusals naming ``[webhooks]``; docs/operations.md, "Webhooks").

        :raises ValueError: an entry that does not parse (:func:`load_config` refuses those).
        """
        return Destinations.from_config(self.allowed_hosts, self.deny_private, "[webhooks]")


class SearchConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[search]``: the full-text index of current spans (docs/rest-api.md, "Search")."""

    #: Keep the index (docs/architecture.md, "Search": a publish, supersede, retire or
    #: erasure removes what is no longer current in its own transaction; the search indexer
    #: writes the new current version after it). ``false``: no index is kept,
    #: ``GET /v1/search`` and ``POST /v1/locate`` answer 404; switching it on again builds
    #: the index after the next start.
    enabled: bool = True
    #: On SQLite, a query matching more spans than this ranks only the newest this many of
    #: them (the last indexed); ``0`` ranks every match (docs/rest-api.md, "Search": ranking
    #: reads every ranked span's length, about 1 µs a span; the default's cost and what it
    #: gives up: bench/RESULTS.md, "Search"). PostgreSQL ranks every match.
    rank_window: int = 10_000
    #: Most milliseconds a search or locate spends writing its own scope's waiting index
    #: work before it answers; what is still waiting then is the answer's ``indexPending``
    #: (docs/rest-api.md, "Search"). ``0``: answer at once from the index as it is.
    catch_up_ms: int = 2000
    #: The search indexer's background pace (docs/architecture.md, "Search"): it writes
    #: once no version was queued for ``settle_ms`` milliseconds, and defers waiting work
    #: at most ``max_defer_ms`` while versions keep arriving.
    settle_ms: int = 500
    max_defer_ms: int = 5000


class QuotasConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[quotas]``: every scope's default limits (docs/operations.md, "Quotas and rate
    limits"); ``telha scope set`` overrides them per scope. ``0``: unlimited."""

    #: Jobs a scope may have ``pending``; more answer ``429 QUOTA_EXCEEDED`` at ingest.
    max_pending_jobs: int = 0
    #: Raw uploads plus canonical text a scope may store, bytes; once over, ingests answer
    #: ``429 QUOTA_EXCEEDED``.
    max_stored_bytes: int = 0
    #: Sustained ``/v1`` requests per second per API key (a token bucket per replica); more
    #: answer ``429 RATE_LIMITED`` with ``Retry-After``.
    requests_per_second: float = 0.0
    #: Requests a key may make at once; ``0``: ``requests_per_second`` rounded up.
    burst: int = 0
    #: Slots of ``ingest.max_concurrent`` one scope may hold at once (more answer ``429
    #: QUOTA_EXCEEDED`` with ``Retry-After``); not set: half of it, rounded up; ``0``: all.
    max_concurrent_ingests: int | None = None
    #: Slots of ``server.max_event_streams`` one scope may hold at once, as above.
    max_event_streams: int | None = None


class Config(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole of ``config.toml``; ``base_dir`` is the config file's folder (not a TOML key)."""

    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    storage: StorageConfig = msgspec.field(default_factory=StorageConfig)
    auth: AuthConfig = msgspec.field(default_factory=AuthConfig)
    grpc: GrpcConfig = msgspec.field(default_factory=GrpcConfig)
    ingest: IngestConfig = msgspec.field(default_factory=IngestConfig)
    jobs: JobsConfig = msgspec.field(default_factory=JobsConfig)
    workers: WorkersConfig = msgspec.field(default_factory=WorkersConfig)
    docling: DoclingConfig = msgspec.field(default_factory=DoclingConfig)
    web: WebConfig = msgspec.field(default_factory=WebConfig)
    webhooks: WebhooksConfig = msgspec.field(default_factory=WebhooksConfig)
    connectors: ConnectorsConfig = msgspec.field(default_factory=ConnectorsConfig)
    search: SearchConfig = msgspec.field(default_factory=SearchConfig)
    ocr: OcrConfig = msgspec.field(default_factory=OcrConfig)
    quotas: QuotasConfig = msgspec.field(default_factory=QuotasConfig)

    def storage_path(self, base_dir: Path) -> Path:
        """The SQLite file, resolved against ``base_dir`` (the config file's folder)."""
        p = Path(self.storage.path)
        return p if p.is_absolute() else (base_dir / p)


class ConfigError(Exception):
    """A config file that cannot be used; ``key`` is the dotted name of the offending key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key


_PATH_RE = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN_RE = re.compile(r"^Object contains unknown field `(?P<field>[^`]+)`")
_ENV_PREFIX = "TELHA_"


def _dotted(path: str) -> str:
    """``.server.rest_addr`` / ``.workers.in_process[0]`` → ``server.rest_addr``…"""
    return path.lstrip(".")


def _translate(err: msgspec.ValidationError) -> ConfigError:
    text = str(err)
    m = _PATH_RE.search(text)
    path = _dotted(m.group("path")) if m else ""
    message = text[: m.start()] if m else text
    unknown = _UNKNOWN_RE.match(message)
    if unknown:
        key = f"{path}.{unknown.group('field')}" if path else unknown.group("field")
        return ConfigError(key, "unknown key")
    return ConfigError(path, message)


def _env_scalar(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _is_str_field(section: str, key: str) -> bool:
    """True when ``section.key`` is declared as a string (its env value is taken verbatim)."""
    section_type = Config.__annotations__.get(section)
    if section_type is None:
        return False
    cls = globals().get(str(section_type).strip("'\""))
    hint = getattr(cls, "__annotations__", {}).get(key)
    return hint == "str"


def _apply_env(data: dict[str, Any], environ: Mapping[str, str]) -> None:
    for name, raw in sorted(environ.items()):
        if not name.startswith(_ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(_ENV_PREFIX) :].lower().partition("__")
        target = data.setdefault(section, {})
        if not isinstance(target, dict):
            raise ConfigError(section, f"{name} overrides a key inside a non-table")
        target[key] = raw if _is_str_field(section, key) else _env_scalar(raw)


def _validate(cfg: Config) -> None:
    checks: list[tuple[bool, str, str]] = [
        (cfg.ingest.max_body_bytes > 0, "ingest.max_body_bytes", "must be > 0"),
        (cfg.search.catch_up_ms >= 0, "search.catch_up_ms", "must be >= 0"),
        (cfg.search.settle_ms >= 0, "search.settle_ms", "must be >= 0"),
        (
            cfg.search.max_defer_ms >= cfg.search.settle_ms,
            "search.max_defer_ms",
            "must be >= search.settle_ms",
        ),
        (cfg.ingest.max_upload_bytes > 0, "ingest.max_upload_bytes", "must be > 0"),
        (cfg.ingest.json_max_records > 0, "ingest.json_max_records", "must be > 0"),
        (cfg.ingest.json_max_depth >= 1, "ingest.json_max_depth", "must be >= 1"),
        (cfg.ingest.json_max_nodes >= 1, "ingest.json_max_nodes", "must be >= 1"),
        (cfg.ingest.max_concurrent >= 1, "ingest.max_concurrent", "must be >= 1"),
        (cfg.search.rank_window >= 0, "search.rank_window", "must be >= 0 (0: rank all)"),
        (cfg.storage.reader_mmap_mib >= 0, "storage.reader_mmap_mib", "must be >= 0 (0: none)"),
        (cfg.jobs.max_attempts >= 1, "jobs.max_attempts", "must be >= 1"),
        (cfg.jobs.max_worker_losses >= 1, "jobs.max_worker_losses", "must be >= 1"),
        (cfg.jobs.lease_secs > 0, "jobs.lease_secs", "must be > 0"),
        (cfg.jobs.backoff_base_ms >= 0, "jobs.backoff_base_ms", "must be >= 0"),
        (cfg.jobs.reap_interval_s > 0, "jobs.reap_interval_s", "must be > 0"),
        (cfg.jobs.retain_days >= 0, "jobs.retain_days", "must be >= 0 (0: keep forever)"),
        (cfg.jobs.gc_interval_s > 0, "jobs.gc_interval_s", "must be > 0"),
        (cfg.workers.concurrency >= 1, "workers.concurrency", "must be >= 1"),
        (
            cfg.workers.processes is None or cfg.workers.processes >= 0,
            "workers.processes",
            "must be >= 0",
        ),
        (cfg.storage.readers >= 1, "storage.readers", "must be >= 1"),
        (cfg.storage.pool_size >= 2, "storage.pool_size", "must be >= 2"),
        (
            cfg.storage.engine != "postgres" or bool(cfg.storage.dsn),
            "storage.dsn",
            'is required with engine = "postgres"',
        ),
        (cfg.server.shutdown_grace_s >= 0, "server.shutdown_grace_s", "must be >= 0"),
        (cfg.server.max_event_streams >= 1, "server.max_event_streams", "must be >= 1"),
        (cfg.server.events_reread_s > 0, "server.events_reread_s", "must be > 0"),
        (cfg.server.body_idle_timeout_s > 0, "server.body_idle_timeout_s", "must be > 0"),
        (cfg.webhooks.max_age_s > 0, "webhooks.max_age_s", "must be > 0"),
        (cfg.webhooks.timeout_s > 0, "webhooks.timeout_s", "must be > 0"),
        (
            cfg.webhooks.claim_s > cfg.webhooks.timeout_s,
            "webhooks.claim_s",
            "must be > webhooks.timeout_s",
        ),
        (cfg.webhooks.backoff_base_ms >= 0, "webhooks.backoff_base_ms", "must be >= 0"),
        (cfg.webhooks.backoff_max_s >= 0, "webhooks.backoff_max_s", "must be >= 0"),
        (cfg.webhooks.batch >= 1, "webhooks.batch", "must be >= 1"),
        (cfg.webhooks.concurrency >= 1, "webhooks.concurrency", "must be >= 1"),
        (cfg.webhooks.poll_interval_ms >= 1, "webhooks.poll_interval_ms", "must be >= 1"),
        (bool(cfg.ocr.languages), "ocr.languages", "must name at least one language"),
        (
            all(lang.replace("_", "").isalnum() for lang in cfg.ocr.languages),
            "ocr.languages",
            "must be tesseract language names (letters, digits, _)",
        ),
        (72 <= cfg.ocr.dpi <= 1200, "ocr.dpi", "must be in 72..1200"),
        (0 <= cfg.ocr.min_confidence <= 100, "ocr.min_confidence", "must be in 0..100"),
        (cfg.ocr.max_pages >= 1, "ocr.max_pages", "must be >= 1"),
        (cfg.ocr.page_timeout_s > 0, "ocr.page_timeout_s", "must be > 0"),
    ]
    checks += [
        (getattr(cfg.quotas, key) >= 0, f"quotas.{key}", "must be >= 0 (0: unlimited)")
        for key in ("max_pending_jobs", "max_stored_bytes", "requests_per_second", "burst")
    ]
    checks += [
        (
            getattr(cfg.quotas, key) is None or getattr(cfg.quotas, key) >= 0,
            f"quotas.{key}",
            "must be >= 0 (0: every slot; not set: half of the slots)",
        )
        for key in ("max_concurrent_ingests", "max_event_streams")
    ]
    for ok, key, message in checks:
        if not ok:
            raise ConfigError(key, message)
    if cfg.grpc.token_key and len(cfg.grpc.token_key.encode()) < 32:
        raise ConfigError("grpc.token_key", "must be at least 32 bytes (or empty: generated)")
    if cfg.docling.artifacts_path and not Path(cfg.docling.artifacts_path).is_dir():
        raise ConfigError("docling.artifacts_path", "is not a folder (docling's models)")
    for section, entries in (
        ("webhooks", cfg.webhooks.allowed_hosts),
        ("connectors", cfg.connectors.allowed_hosts),
    ):
        for entry in filter(str.strip, entries):
            try:
                parse_entry(entry)
            except ValueError as exc:
                raise ConfigError(f"{section}.allowed_hosts", f"{entry!r}: {exc}") from None
    for entry in cfg.connectors.allowed_roots:
        if not entry.startswith("/") or "\x00" in entry:
            raise ConfigError("connectors.allowed_roots", f"{entry!r}: not an absolute path")
    try:
        parse_grants(cfg.connectors.secrets)
    except ValueError as exc:
        raise ConfigError("connectors.secrets", str(exc)) from None
    for key in ("rest_addr", "grpc_addr"):
        try:
            split_addr(getattr(cfg.server, key))
        except ValueError as exc:
            raise ConfigError(f"server.{key}", str(exc)) from None


def split_addr(addr: str) -> tuple[str, int]:
    """``"127.0.0.1:7625"`` → ``("127.0.0.1", 7625)``; raises ``ValueError`` when malformed."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected host:port, got {addr!r}")
    return host.strip("[]"), int(port)


def load_config(path: Path | None, environ: Mapping[str, str] | None = None) -> tuple[Config, Path]:
    """Read and validate ``path`` (or the defaults when ``None``), then the env overrides.

    :returns: the config and the folder relative storage paths resolve against.
    :raises ConfigError: unreadable file, bad TOML, unknown key, wrong type or bad value.
    """
    data: dict[str, Any] = {}
    base_dir = Path.cwd()
    if path is not None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError("", f"cannot read {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("", f"{path} is not valid TOML: {exc}") from None
        base_dir = path.resolve().parent
    _apply_env(data, os.environ if environ is None else environ)
    try:
        cfg = msgspec.convert(data, Config)
    except msgspec.ValidationError as exc:
        raise _translate(exc) from None
    _validate(cfg)
    return cfg, base_dir
