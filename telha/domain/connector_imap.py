"""The ``imap`` connector kind's settings as core checks them (docs/connectors.md, "The imap
kind"). Pure; no I/O.

A password is never a setting: settings are stored, echoed by ``GET /v1/connectors`` and
copied into every run's spec. ``passwordEnv`` names an environment variable of the
connector worker's process instead, and only one of the ``TELHA_SECRET_`` family, so a
connector cannot have the worker send another of its variables (its worker token) to a
server of the connector's choosing.
"""

from __future__ import annotations

import re
from typing import Any

from telha.domain.errors import RequestError

__all__ = ["IMAP_KEYS", "IMAP_TLS_MODES", "MAX_PAGE_SIZE", "SECRET_ENV_PREFIX", "imap_settings"]

#: Every key the ``imap`` kind accepts.
IMAP_KEYS = frozenset(
    {"host", "port", "username", "passwordEnv", "mailbox", "tls", "caFile", "pageSize"}
)
#: ``tls``: ``implicit`` (IMAPS, port 993), ``starttls`` (port 143, then STARTTLS, never
#: continuing in the clear), ``none`` (plain IMAP, port 143).
IMAP_TLS_MODES = ("implicit", "starttls", "none")
#: The environment variables a ``passwordEnv`` may name start with this.
SECRET_ENV_PREFIX = "TELHA_SECRET_"
#: Most messages one listing ``FETCH`` asks for.
MAX_PAGE_SIZE = 5000

_ENV_NAME = re.compile(re.escape(SECRET_ENV_PREFIX) + r"[A-Z0-9_]+")
_HOST = re.compile(r"[A-Za-z0-9.:\[\]_-]{1,255}")


def _text(settings: dict[str, Any], key: str, *, limit: int = 1000) -> str:
    value = settings.get(key)
    if (
        not isinstance(value, str)
        or not value
        or len(value) > limit
        or any(c in value for c in "\x00\r\n")
    ):
        raise RequestError(f"settings.{key}: a non-empty string (no NUL or line break)")
    return value


def imap_settings(settings: dict[str, Any]) -> None:
    """``imap``: ``host`` (a name or address), ``port`` (1..65535; default by ``tls``),
    ``username``, ``passwordEnv`` (``TELHA_SECRET_…``: the worker's environment variable
    holding the password), ``mailbox`` (default ``INBOX``), ``tls`` (``implicit`` default,
    ``starttls``, ``none``), ``caFile`` (an absolute path: the CA bundle to verify the server
    with, default the system's), ``pageSize`` (messages per listing ``FETCH``, 1..5000,
    default 500).

    :raises RequestError: a missing or malformed key, a ``password`` key, an unknown key.
    """
    if "password" in settings:
        raise RequestError(
            "settings.password: a password is never stored; put it in an environment"
            f" variable {SECRET_ENV_PREFIX}… of the connector worker and name it in"
            " settings.passwordEnv"
        )
    unknown = sorted(set(settings) - IMAP_KEYS)
    if unknown:
        raise RequestError(
            f"settings: unknown key(s) {', '.join(unknown)}; imap accepts"
            f" {', '.join(sorted(IMAP_KEYS))}"
        )
    if not _HOST.fullmatch(_text(settings, "host")):
        raise RequestError("settings.host: a host name or address")
    _text(settings, "username")
    env = settings.get("passwordEnv")
    if not isinstance(env, str) or not _ENV_NAME.fullmatch(env):
        raise RequestError(
            f"settings.passwordEnv: the name of an environment variable {SECRET_ENV_PREFIX}…"
            " (capitals, digits, _) of the connector worker, holding the password"
        )
    if "mailbox" in settings:
        _text(settings, "mailbox")
    tls = settings.get("tls", "implicit")
    if tls not in IMAP_TLS_MODES:
        raise RequestError(f"settings.tls: one of {', '.join(IMAP_TLS_MODES)}")
    port = settings.get("port", 143)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise RequestError("settings.port: an integer in 1..65535")
    if "caFile" in settings and not _text(settings, "caFile", limit=4096).startswith("/"):
        raise RequestError("settings.caFile: an absolute path")
    if tls == "none" and "caFile" in settings:
        raise RequestError("settings.caFile: only with tls implicit or starttls")
    page = settings.get("pageSize", 500)
    if isinstance(page, bool) or not isinstance(page, int) or not 0 < page <= MAX_PAGE_SIZE:
        raise RequestError(f"settings.pageSize: an integer in 1..{MAX_PAGE_SIZE}")
