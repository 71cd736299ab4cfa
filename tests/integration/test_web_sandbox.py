"""web_worker's browser runs sandboxed and unprivileged (docs/formats.md, "Web pages: the
browser's sandbox"): its processes are not root (``telha-browser`` when the worker runs as
root), nothing passes ``--no-sandbox``, the renderers are under seccomp; where the sandbox
cannot be had the worker refuses to start unless ``[web] allow_unsandboxed``, and
``telha serve`` says why."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import web_worker
from tests.support.server import ServerProcess, write_config
from tests.support.site import serve_site
from web_worker import sandbox
from web_worker.browser import startup_problem
from web_worker.fetch import FetchedPage, fetch
from web_worker.options import parse_options
from web_worker.proxy import guard
from workers_common.run import UsageError

pytestmark = pytest.mark.anyio


@pytest.fixture
async def process(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    monkeypatch.setenv("TELHA_WEB__ALLOWED_HOSTS", "127.0.0.1")
    monkeypatch.delenv("TELHA_WEB__CHROMIUM_PATH", raising=False)
    monkeypatch.delenv("TELHA_WEB__ALLOW_UNSANDBOXED", raising=False)
    monkeypatch.delenv("TELHA_WEB__BROWSER_SYS_NICE", raising=False)
    async with web_worker.lifespan():
        yield web_worker._process()


def _descendants(root: int) -> list[int]:
    """Every live process below ``root``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _chromium_processes() -> list[tuple[int, list[str], dict[str, str]]]:
    """``(pid, arguments, /proc status)`` of the Chromium processes below this process."""
    out = []
    for pid in _descendants(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            status = _status(pid)
        except OSError:
            continue
        if b"chromium" in cmdline[0]:
            # A zygote's children rewrite their title: one string of space-separated flags.
            args = b" ".join(cmdline).decode("utf-8", "replace").split()
            out.append((pid, args, status))
    return out


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


async def test_browser_processes_are_unprivileged_and_sandboxed(process: Any) -> None:
    with serve_site() as site:
        url = site.page("/p.html", "<p>hi</p>")
        page = await fetch(process.host, url, parse_options({}))
        assert isinstance(page, FetchedPage)
        # A page held open, so that its renderer process is alive to look at.
        rules = process.host.settings.destinations
        async with guard(rules) as proxy, process.host.context(proxy.url) as ctx:
            held = await ctx.new_page()
            await held.goto(url)
            browsers = _chromium_processes()
    assert browsers, "no Chromium process found below this process"
    expected = pwd.getpwnam(sandbox.BROWSER_USER).pw_uid if os.geteuid() == 0 else os.geteuid()
    for _pid, args, status in browsers:
        real, effective = (int(u) for u in status["Uid"].split()[:2])
        assert real != 0 and effective != 0, args[:3]
        assert (real, effective) == (expected, expected)
        assert "--no-sandbox" not in args, args
        assert int(status["CapAmb"], 16) == 0, args[:3]  # no capability handed down
    assert any("--type=zygote" in a for _p, a, _s in browsers)
    renderers = [s for _p, a, s in browsers if "--type=renderer" in a]
    assert renderers and all(s["Seccomp"] == "2" for s in renderers)  # seccomp-bpf filter on


async def test_browser_sys_nice_gives_chromium_that_capability_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the capability is handed to Chromium by the launcher of a root worker")
    monkeypatch.setenv("TELHA_WEB__ALLOWED_HOSTS", "127.0.0.1")
    monkeypatch.setenv("TELHA_WEB__BROWSER_SYS_NICE", "true")
    monkeypatch.delenv("TELHA_WEB__ALLOW_UNSANDBOXED", raising=False)
    with serve_site() as site:
        url = site.page("/p.html", "<p>hi</p>")
        async with web_worker.lifespan():
            host = web_worker._process().host
            async with guard(host.settings.destinations) as proxy, host.context(proxy.url) as ctx:
                await (await ctx.new_page()).goto(url)
                browsers = _chromium_processes()
    sys_nice = 1 << 23  # CAP_SYS_NICE
    # The browser process: Chromium itself, no --type= (zygotes, renderers … have one).
    main = [s for _p, a, s in browsers if a[0].endswith("/chromium") and "--type=" not in str(a)]
    browser = main[0]
    assert int(browser["CapEff"], 16) == int(browser["CapAmb"], 16) == sys_nice
    assert int(browser["Uid"].split()[1]) == pwd.getpwnam(sandbox.BROWSER_USER).pw_uid
    renderers = [s for _p, a, s in browsers if "--type=renderer" in a]
    assert renderers and all(int(s["CapEff"], 16) == 0 and s["Seccomp"] == "2" for s in renderers)
    assert all("--no-sandbox" not in a for _p, a, _s in browsers)


async def test_no_sandbox_means_refusal_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELHA_WEB__ALLOWED_HOSTS", "")
    monkeypatch.delenv("TELHA_WEB__ALLOW_UNSANDBOXED", raising=False)
    assert await startup_problem() is None  # this host provides the sandbox
    if os.geteuid() != 0:
        pytest.skip("the missing-user case applies to a worker running as root")
    monkeypatch.setattr(sandbox, "BROWSER_USER", "telha-no-such-user")
    problem = await startup_problem()
    assert problem is not None
    assert "sandbox is unavailable" in problem and "telha-no-such-user does not exist" in problem
    assert "allow_unsandboxed" in problem
    with pytest.raises(UsageError, match="sandbox is unavailable"):
        async with web_worker.lifespan():
            pass
    monkeypatch.setenv("TELHA_WEB__ALLOW_UNSANDBOXED", "true")
    assert await startup_problem() is None
    # Allowed: the worker starts, and Chromium runs with --no-sandbox (said in the log).
    monkeypatch.setenv("TELHA_WEB__ALLOWED_HOSTS", "127.0.0.1")
    with serve_site() as site:
        url = site.page("/p.html", "<p>unsandboxed</p>")
        async with web_worker.lifespan():
            process = web_worker._process()
            assert not process.host.sandboxed
            rules = process.host.settings.destinations
            async with guard(rules) as proxy, process.host.context(proxy.url) as ctx:
                await (await ctx.new_page()).goto(url)
                browsers = _chromium_processes()
    assert any("--no-sandbox" in args for _p, args, _s in browsers)


async def test_bad_allowed_hosts_entry_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELHA_WEB__ALLOWED_HOSTS", "127.0.0.1:99999")
    problem = await startup_problem()
    assert problem is not None and "'127.0.0.1:99999'" in problem and "1-65535" in problem
    # A remote web worker refuses to start the same way, before it connects: exit 2.
    env = {**os.environ, "TELHA_GRPC_TARGET": "127.0.0.1:9", "TELHA_WORKER_TOKEN": "x"}
    done = await anyio.run_process(
        [sys.executable, "-m", "workers_common.run", "web_worker"], env=env, check=False
    )
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "web_worker: [web] allowed_hosts: '127.0.0.1:99999'" in stderr


def test_serve_refuses_a_bad_allow_list_and_warns_when_private_is_allowed(
    tmp_path: Path,
) -> None:
    bad = write_config(
        tmp_path, workers={"in_process": ["web_worker"]}, web={"allowed_hosts": ["10.0.0.0/99"]}
    )
    done = subprocess.run(
        [sys.executable, "-m", "telha", "serve", "--config", str(bad)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "config error: web: [web] allowed_hosts" in done.stderr
    open_config = write_config(
        tmp_path,
        workers={"in_process": ["web_worker"]},
        web={"allowed_hosts": [], "deny_private": False},
    )
    with ServerProcess(open_config) as proc:
        assert proc.stop() == 0
        assert "web_deny_private_off" in proc.log_text()
