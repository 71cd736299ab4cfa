"""Config parsing: defaults, dotted-key errors, env overrides (docs/operations.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from telha.config import ConfigError, load_config, split_addr
from workers_common.secret_grants import parse_grants


def _load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> object:
    p = tmp_path / "c.toml"
    p.write_text(text)
    return load_config(p, env or {})[0]


def test_defaults_match_design(tmp_path: Path) -> None:
    cfg, _base = load_config(None, {})
    assert cfg.server.rest_addr == "127.0.0.1:7625" and cfg.server.grpc_addr == "127.0.0.1:7626"
    assert cfg.ingest.max_body_bytes == 8388608 and cfg.ingest.json_max_records == 10000
    assert cfg.ingest.json_max_depth == 8 and cfg.ingest.json_nested == "flatten"
    assert cfg.ingest.max_upload_bytes == 2 * 1024**3
    assert cfg.jobs.max_attempts == 5 and cfg.jobs.lease_secs == 180
    assert cfg.jobs.max_worker_losses == 3
    assert cfg.jobs.retain_days == 30 and cfg.jobs.gc_interval_s == 3600
    assert cfg.workers.concurrency == 2 and cfg.workers.processes is None
    assert cfg.workers.in_process == [
        "text_worker", "tabular_worker", "docling_worker", "email_worker", "code_worker",
        "web_worker",
    ]  # fmt: skip
    assert cfg.web.chromium_path == "/usr/bin/chromium" and cfg.web.allowed_hosts == []
    assert cfg.server.body_idle_timeout_s == 30 and cfg.ingest.max_concurrent == 16
    assert cfg.storage_path(tmp_path) == tmp_path / "data" / "telha.db"


def test_repo_config_toml_is_valid() -> None:
    cfg, _base = load_config(Path(__file__).resolve().parents[2] / "config.toml", {})
    assert cfg.storage.engine == "sqlite"
    assert cfg.workers.in_process == load_config(None, {})[0].workers.in_process
    assert cfg.server == load_config(None, {})[0].server  # its [server] shows the defaults
    assert cfg.quotas == load_config(None, {})[0].quotas


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[server]\nbogus = 1", "server.bogus"),
        ("top = 1", "top"),
        ("[jobs]\nmax_attempts = '3'", "jobs.max_attempts"),
        ("[workers]\nin_process = [1]", "workers.in_process[0]"),
        ("[ingest]\njson_nested = 'sideways'", "ingest.json_nested"),
        ("[jobs]\nmax_attempts = 0", "jobs.max_attempts"),
        ("[jobs]\nmax_worker_losses = 0", "jobs.max_worker_losses"),
        ("[jobs]\nmax_worker_losses = 'x'", "jobs.max_worker_losses"),
        ("[server]\ngrpc_addr = '127.0.0.1:99999'", "server.grpc_addr"),
        ("server = 3", "server"),
        ("[webhooks]\nmax_age_s = 0", "webhooks.max_age_s"),
        ("[webhooks]\ntimeout_s = 30\nclaim_s = 10", "webhooks.claim_s"),
        ("[webhooks]\nbatch = 0", "webhooks.batch"),
        ("[webhooks]\nallowed_hosts = 'x'", "webhooks.allowed_hosts"),
        ("[webhooks]\nallowed_hosts = ['127.0.0.1:99999']", "webhooks.allowed_hosts"),
        ("[webhooks]\nallowed_hosts = ['10.0.0.0/99']", "webhooks.allowed_hosts"),
        ("[webhooks]\ndeny_private = 'no'", "webhooks.deny_private"),
        ("[webhooks]\nsecret = 'x'", "webhooks.secret"),
        ("[grpc]\ntoken_key = 'short'", "grpc.token_key"),
        ("[storage]\nengine = 'mysql'", "storage.engine"),
        ("[storage]\nengine = 'postgres'", "storage.dsn"),
        (
            "[storage]\nengine = 'postgres'\ndsn = 'postgresql://x@h/db'\npool_size = 1",
            "storage.pool_size",
        ),
        ("[storage]\ndsn = 3", "storage.dsn"),
        ("[workers]\nprocesses = -1", "workers.processes"),
        ("[jobs]\nretain_days = -1", "jobs.retain_days"),
        ("[jobs]\nretain_days = 'forever'", "jobs.retain_days"),
        ("[jobs]\ngc_interval_s = 0", "jobs.gc_interval_s"),
        ("[workers]\nprocesses = 'many'", "workers.processes"),
        ("[search]\nrank_window = -1", "search.rank_window"),
        ("[storage]\nreader_mmap_mib = -1", "storage.reader_mmap_mib"),
        ("[storage]\nreader_mmap_mib = 'all'", "storage.reader_mmap_mib"),
        ("[server]\nbody_idle_timeout_s = 0", "server.body_idle_timeout_s"),
        ("[server]\nbody_idle_timeout_s = -1.5", "server.body_idle_timeout_s"),
        ("[server]\nbody_idle_timeout_s = 'soon'", "server.body_idle_timeout_s"),
        ("[quotas]\nmax_concurrent_ingests = 1.5", "quotas.max_concurrent_ingests"),
    ],
)
def test_errors_name_the_dotted_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    assert info.value.key == key


def test_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        _load(tmp_path, "[server\n")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml", {})


def test_env_overrides_are_toml_scalars(tmp_path: Path) -> None:
    cfg = _load(
        tmp_path,
        "[jobs]\nmax_attempts = 5",
        {"TELHA_JOBS__MAX_ATTEMPTS": "3", "TELHA_SERVER__REST_ADDR": "127.0.0.1:9", "OTHER": "x"},
    )
    assert cfg.jobs.max_attempts == 3  # type: ignore[attr-defined]
    assert cfg.server.rest_addr == "127.0.0.1:9"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, "", {"TELHA_INGEST__NOPE": "1"})
    assert info.value.key == "ingest.nope"


def test_retention_keys(tmp_path: Path) -> None:
    cfg = _load(tmp_path, "[jobs]\nretain_days = 0\ngc_interval_s = 60")
    assert cfg.jobs.retain_days == 0 and cfg.jobs.gc_interval_s == 60  # type: ignore[attr-defined]
    cfg = _load(tmp_path, "", {"TELHA_JOBS__RETAIN_DAYS": "7.5"})
    assert cfg.jobs.retain_days == 7.5  # type: ignore[attr-defined]


def test_split_addr() -> None:
    assert split_addr("127.0.0.1:0") == ("127.0.0.1", 0)
    assert split_addr("[::1]:80") == ("::1", 80)
    for bad in ("127.0.0.1", ":80", "h:x", "h:70000"):
        with pytest.raises(ValueError):
            split_addr(bad)


def test_postgres_storage_section(tmp_path: Path) -> None:
    cfg = _load(
        tmp_path,
        "[storage]\nengine = 'postgres'\ndsn = 'postgresql://telha@127.0.0.1:5432/telha'\n"
        "pool_size = 20",
    )
    assert cfg.storage.engine == "postgres"  # type: ignore[attr-defined]
    assert cfg.storage.pool_size == 20  # type: ignore[attr-defined]


def test_web_destination_and_sandbox_keys(tmp_path: Path) -> None:
    cfg = load_config(None, {})[0]
    assert (cfg.web.allowed_hosts, cfg.web.deny_private, cfg.web.allow_unsandboxed) == (
        [], True, False,
    )  # fmt: skip
    assert not cfg.web.browser_sys_nice
    assert _load(tmp_path, "[web]\nbrowser_sys_nice = true\n").web.browser_sys_nice
    cfg = _load(
        tmp_path,
        '[web]\nallowed_hosts = ["127.0.0.1:8000", "10.0.0.0/8", "[::1]:9000"]\n'
        "deny_private = false\nallow_unsandboxed = true\n",
    )
    assert cfg.web.allowed_hosts == ["127.0.0.1:8000", "10.0.0.0/8", "[::1]:9000"]
    assert not cfg.web.deny_private and cfg.web.allow_unsandboxed
    env = {"TELHA_WEB__DENY_PRIVATE": "false"}
    assert not load_config(None, env)[0].web.deny_private
    with pytest.raises(ConfigError, match=r"web\.deny_private"):
        _load(tmp_path, '[web]\ndeny_private = "no"\n')


def test_connectors_secrets_entries_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[connectors]\nsecrets = ["TELHA_SECRET_A=acme/sales", "TELHA_SECRET_A=b/c"]\n')
    cfg, _ = load_config(path, {})
    assert parse_grants(cfg.connectors.secrets) == {"TELHA_SECRET_A": {"acme/sales", "b/c"}}
    for bad in ("HOME=acme/sales", "TELHA_SECRET_A=acme", "TELHA_SECRET_A", "TELHA_SECRET_A=a/b/c"):
        path.write_text(f'[connectors]\nsecrets = ["{bad}"]\n')
        with pytest.raises(ConfigError, match=r"connectors\.secrets"):
            load_config(path, {})
