"""How Chromium is started: sandboxed, as an unprivileged user (docs/formats.md, "Web pages:
the browser's sandbox").

Chromium's own sandbox (user namespaces and seccomp-bpf) is always on: Playwright is asked
for it (``chromium_sandbox=True``, so no ``--no-sandbox``). Chromium refuses to sandbox
itself as root, and the worker should not give page scripts root's reach anyway, so when the
worker process runs as root Chromium is started through a small launcher script
(:func:`write_launcher`) that hands Playwright's temporary profile folder to the
:data:`BROWSER_USER` user and ``exec``s Chromium under that user with ``setpriv`` (no
supplementary groups, no capabilities, a clean environment). Not as root, Chromium runs
directly as the worker's own user. Playwright's driver talks to it over the inherited
``--remote-debugging-pipe`` descriptors, as with any launch.

Without ``CAP_SYS_NICE`` (which lets it raise its threads' priorities) each page costs
Chromium more CPU: on the 2-core bench machine a renderer used about 420–590 ms of CPU per
page instead of 230–380 (bench/RESULTS.md, "E-mail, code and web"). ``[web]
browser_sys_nice = true`` gives Chromium that one capability (ambient, so it survives the
``exec``): the browser process, its unsandboxed zygote and its network service hold it; the
renderers and the GPU process hold none. The price: one of those processes, compromised,
could change the scheduling priority, CPU affinity and memory placement of any process on
the host (slow it down), though it still reads and writes only what ``telha-browser`` may.

Where the sandbox cannot be had (no such user, user namespaces unavailable to unprivileged
users), :func:`sandbox_problem` says why, and the worker refuses to start unless
``[web] allow_unsandboxed`` is true (then Chromium runs with ``--no-sandbox``, still as
:data:`BROWSER_USER` when it exists).
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["BROWSER_USER", "browser_account", "sandbox_problem", "write_launcher"]

#: The account Chromium runs as when the worker runs as root (``make setup`` creates it).
BROWSER_USER = "telha-browser"
_SETPRIV = "/usr/bin/setpriv"
_UNSHARE = "/usr/bin/unshare"
_PROBE_S = 10.0


def browser_account() -> tuple[int, int] | None:
    """``(uid, gid)`` Chromium must run as: :data:`BROWSER_USER`'s when this process is root,
    ``None`` when it is not root (Chromium runs as this user).

    :raises KeyError: running as root and the account does not exist.
    """
    if os.geteuid() != 0:
        return None
    entry = pwd.getpwnam(BROWSER_USER)
    return entry.pw_uid, entry.pw_gid


def sandbox_problem() -> str | None:
    """Why Chromium cannot run sandboxed as an unprivileged user on this host, or ``None``.
    Blocking (runs ``unshare --user true`` as that user, at most 10 s): call it off the event
    loop."""
    try:
        account = browser_account()
    except KeyError:
        return (
            f"Chromium must not run as root and the user {BROWSER_USER} does not exist"
            f" (`make setup` creates it: useradd --system --user-group --no-create-home"
            f" --shell /usr/sbin/nologin {BROWSER_USER})"
        )
    try:
        max_ns = int(Path("/proc/sys/user/max_user_namespaces").read_text().strip())
    except (OSError, ValueError):
        max_ns = 1
    if max_ns <= 0:
        return "user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0)"
    if account is not None and not Path(_SETPRIV).exists():
        return f"{_SETPRIV} (util-linux) is missing: it starts Chromium as {BROWSER_USER}"
    unshare = shutil.which("unshare") or _UNSHARE
    if not Path(unshare).exists():
        return None  # nothing to probe with; Chromium itself will say so at launch
    command = [unshare, "--user", "true"]
    if account is not None:
        uid, gid = account
        command = [_SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *command]
    try:
        done = subprocess.run(command, capture_output=True, timeout=_PROBE_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"could not probe user namespaces: {exc}"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        return f"an unprivileged user cannot create a user namespace here ({why})"
    return None


def write_launcher(chromium: Path, account: tuple[int, int], *, sys_nice: bool = False) -> Path:
    """An executable script (in a fresh root-only folder; the caller removes it) that starts
    ``chromium`` as ``account`` with Playwright's arguments (module docstring); with no
    capability, or with ``CAP_SYS_NICE`` only when ``sys_nice``."""
    uid, gid = account
    caps = "--inh-caps=-all,+sys_nice --ambient-caps=+sys_nice" if sys_nice else "--inh-caps=-all"
    folder = Path(tempfile.mkdtemp(prefix="telha-browser-launch-"))
    script = folder / "chromium"
    script.write_text(
        "#!/bin/sh\n"
        "# Written by web_worker.sandbox: Chromium as an unprivileged user, sandbox on.\n"
        'profile=""\n'
        'for arg do case "$arg" in\n'
        '  --user-data-dir=*) profile="${arg#--user-data-dir=}";;\n'
        "esac; done\n"
        f'[ -n "$profile" ] && chown -R {uid}:{gid} "$profile"\n'
        f"exec {_SETPRIV} --reuid={uid} --regid={gid} --clear-groups {caps}"
        ' --reset-env env HOME="${profile:-/tmp}"'
        f' {shlex.quote(str(chromium))} "$@"\n'
    )
    script.chmod(0o700)
    return script
