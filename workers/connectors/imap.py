"""The ``imap`` connector (docs/connectors.md, "The imap kind"): one mailbox over IMAP4rev1.

Settings (checked by core): ``host``, ``port`` (default 993 with ``tls`` ``implicit``, else
143), ``username``, ``passwordEnv`` (the worker's environment variable holding the
password, read at each run, never logged), ``mailbox`` (default ``INBOX``), ``tls``
(``implicit``, ``starttls``, ``none``), ``caFile``, ``pageSize`` (messages per listing
``FETCH``, default 500).

A run opens one connection (to an address ``[connectors]`` allows: :func:`checked_address`;
stdlib :mod:`imaplib`; the connector worker runs the driver in a
thread, so the blocking IO holds no event loop), ``EXAMINE``\\ s the mailbox (read-only: no
flag changes, ``BODY.PEEK`` leaves ``\\Seen`` alone), takes every UID by ``UID SEARCH ALL``
and lists them a page at a time with ``UID FETCH lo:hi (RFC822.SIZE INTERNALDATE)``.
External id: ``<UIDVALIDITY>:<UID>``. Marker: ``<UIDVALIDITY>:<UID>:<RFC822.SIZE>`` — an
IMAP message never changes under its UID, so a message listed again is unchanged and its
body is never fetched; the size guards against a server that reuses UIDs. Every message is
a full listing (a message expunged at the server is not listed, so retired) and ingests
as ``eml``. ACL: none.

A ``UIDVALIDITY`` other than the last complete run's (the checkpoint) makes every message
new: the run adds them under their new ids and would retire all the old ones, which the
prune guard holds back with its warning until ``--confirm-prune`` (logged here too).

Failures: a server that cannot be reached (refused, timed out, TLS handshake failed), a
mailbox that cannot be examined → :class:`~workers_common.TransientFailure` (retried;
nothing retired); credentials refused, the password variable unset, a server that offers
no STARTTLS when asked for it → :class:`LoginRefused` (dead at once: retrying a wrong
password only risks locking the account). A connection lost while listing →
:class:`~connectors.sdk.ListingIncomplete` (retires nothing); while fetching one message →
:class:`~connectors.sdk.ItemUnreadable` (a failed item).
"""

from __future__ import annotations

import base64
import contextlib
import imaplib
import ipaddress
import logging
import os
import re
import socket
import ssl
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from connectors.sdk import ItemUnreadable, ListingIncomplete, RemoteItem, Removed
from workers_common import CorruptInput, TransientFailure
from workers_common.destinations import Destinations, IPAddress
from workers_common.hosts import as_address, normalise_host

__all__ = ["ImapConnector", "LoginRefused", "mailbox_name"]

log = logging.getLogger("connectors")

#: Seconds one socket operation may take before the connection counts as lost.
TIMEOUT_S = 60.0

_DEFAULT_PAGE = 500
#: ``imaplib`` refuses a response line over 1 MB, and one ``UID SEARCH ALL`` line lists every
#: UID (about 140,000 of them fit): 64 MiB lets a mailbox of millions be listed.
_MAX_LINE = 64 << 20
if getattr(imaplib, "_MAXLINE", 0) < _MAX_LINE:
    setattr(imaplib, "_MAXLINE", _MAX_LINE)  # noqa: B010 - a private module constant
_UID = re.compile(rb"\bUID (\d+)")
_SIZE = re.compile(rb"\bRFC822\.SIZE (\d+)")
_DATE = re.compile(rb'\bINTERNALDATE "([^"]+)"')
_IMAP_ERRORS = (imaplib.IMAP4.error, OSError, EOFError)


class LoginRefused(CorruptInput):
    """The server refused the connector's credentials, or its settings cannot work with
    this server (or name one ``[connectors]`` refuses): the run is dead at once (kind
    ``corrupt_input``), never retried."""


def destinations(environ: Mapping[str, str] | None = None) -> Destinations:
    """Where a run may connect: ``TELHA_CONNECTORS__ALLOWED_HOSTS`` (comma-separated
    entries) and ``TELHA_CONNECTORS__DENY_PRIVATE`` (default true), which ``telha serve``
    exports from its ``[connectors]`` section (the rule of
    :mod:`workers_common.destinations`).

    :raises ValueError: an entry that does not parse (the message names it).
    """
    env = os.environ if environ is None else environ
    raw = env.get("TELHA_CONNECTORS__ALLOWED_HOSTS", "")
    deny = env.get("TELHA_CONNECTORS__DENY_PRIVATE", "").strip().lower()
    hosts = [h.strip() for h in raw.split(",") if h.strip()]
    return Destinations.from_config(hosts, deny not in ("0", "false", "no", "off"), "[connectors]")


def checked_address(host: str, port: int, rules: Destinations) -> IPAddress:
    """The first address of ``host`` (resolved once, blocking: a run's thread) that
    ``rules`` allow a connection to on ``port``; the connection is then made to exactly it.

    :raises TransientFailure: the name does not resolve.
    :raises LoginRefused: no address of it is allowed (the reason names the rule).
    """
    literal = as_address(normalise_host(host))
    if literal is not None:
        found: list[IPAddress] = [literal]
    else:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise TransientFailure(f"imap: cannot resolve {host}: {exc}") from None
        found = []
        for info in infos:
            addr = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
            if addr not in found:
                found.append(addr)
    reason = "no address"
    for addr in found:
        refused = rules.check(host, addr, port)
        if refused is None:
            return addr
        reason = refused
    raise LoginRefused(f"imap: {host}:{port} refused: {reason}")


class _CheckedIMAP4(imaplib.IMAP4):
    """:class:`imaplib.IMAP4` connected to a checked address (the host name kept)."""

    def __init__(self, address: IPAddress, host: str, port: int, timeout: float) -> None:
        self._address = address
        super().__init__(host, port, timeout=timeout)

    def _create_socket(self, timeout: float | None) -> socket.socket:
        return socket.create_connection((str(self._address), self.port), timeout)


class _CheckedIMAP4SSL(imaplib.IMAP4_SSL):
    """:class:`imaplib.IMAP4_SSL` connected to a checked address; the certificate is still
    checked against the host name."""

    def __init__(
        self, address: IPAddress, host: str, port: int, context: ssl.SSLContext, timeout: float
    ) -> None:
        self._address = address
        super().__init__(host, port, ssl_context=context, timeout=timeout)

    def _create_socket(self, timeout: float | None) -> socket.socket:
        sock = socket.create_connection((str(self._address), self.port), timeout)
        context: ssl.SSLContext = self.ssl_context
        return context.wrap_socket(sock, server_hostname=self.host)


def mailbox_name(name: str) -> str:
    """``name`` as an IMAP mailbox argument: modified UTF-7 (RFC 3501 §5.1.3), quoted.

    >>> mailbox_name("Entwürfe & Co")
    '"Entw&APw-rfe &- Co"'
    """
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            raw = "".join(run).encode("utf-16-be")
            b64 = base64.b64encode(raw).decode().rstrip("=").replace("/", ",")
            out.append(f"&{b64}-")
            run.clear()

    for ch in name:
        if 0x20 <= ord(ch) <= 0x7E:
            flush()
            out.append("&-" if ch == "&" else ch)
        else:
            run.append(ch)
    flush()
    quoted = "".join(out).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{quoted}"'


def _internaldate_us(raw: bytes) -> int | None:
    try:
        at = datetime.strptime(raw.decode().strip(), "%d-%b-%Y %H:%M:%S %z")
    except ValueError:
        return None
    return int(at.timestamp()) * 1_000_000


def _reason(exc: BaseException) -> str:
    text: object = exc
    if isinstance(exc, imaplib.IMAP4.error) and exc.args:
        text = exc.args[0]
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
    return f"{type(exc).__name__}: {text}"


class ImapConnector:
    """One IMAP mailbox as a :class:`~connectors.sdk.Connector` (a full listing every run).

    :raises TransientFailure: (from ``list``) the server cannot be reached, or the mailbox
        cannot be examined.
    :raises LoginRefused: (from ``list``) the credentials are refused or missing.
    """

    def __init__(self, settings: dict[str, Any]) -> None:
        self._host = str(settings["host"])
        self._tls = str(settings.get("tls", "implicit"))
        self._port = int(settings.get("port") or (993 if self._tls == "implicit" else 143))
        self._username = str(settings["username"])
        self._password_env = str(settings["passwordEnv"])
        self._mailbox = str(settings.get("mailbox") or "INBOX")
        self._ca_file = settings.get("caFile")
        self._page = int(settings.get("pageSize") or _DEFAULT_PAGE)
        self._conn: imaplib.IMAP4 | None = None
        self._uidvalidity: str | None = None

    def full_listing(self, checkpoint: str | None) -> bool:
        """Always: every run lists the whole mailbox (what it misses was expunged)."""
        return True

    def next_checkpoint(self) -> str | None:
        """The mailbox's ``UIDVALIDITY`` as listed (to notice a reset next time)."""
        return self._uidvalidity

    def _where(self) -> str:
        return f"{self._username} at {self._host}:{self._port}"

    def _connect(self) -> imaplib.IMAP4:
        password = os.environ.get(self._password_env)
        if not password:
            raise LoginRefused(
                f"imap: settings.passwordEnv {self._password_env} is not set in the"
                " connector worker's environment"
            )
        try:
            rules = destinations()
        except ValueError as exc:
            raise LoginRefused(f"imap: [connectors] allowed_hosts: {exc}") from None
        address = checked_address(self._host, self._port, rules)
        context = None
        if self._tls != "none":
            context = ssl.create_default_context(cafile=self._ca_file)
        try:
            conn: imaplib.IMAP4
            if self._tls == "implicit":
                assert context is not None
                conn = _CheckedIMAP4SSL(address, self._host, self._port, context, TIMEOUT_S)
            else:
                conn = _CheckedIMAP4(address, self._host, self._port, TIMEOUT_S)
        except _IMAP_ERRORS as exc:
            raise TransientFailure(
                f"imap: cannot connect to {self._host}:{self._port}: {_reason(exc)}"
            ) from None
        try:
            if self._tls == "starttls":
                if "STARTTLS" not in conn.capabilities:
                    raise LoginRefused(f"imap: {self._host}:{self._port} offers no STARTTLS")
                conn.starttls(ssl_context=context)
            self._login(conn, password)
        except BaseException:
            with contextlib.suppress(*_IMAP_ERRORS):
                conn.shutdown()
            raise
        return conn

    def _login(self, conn: imaplib.IMAP4, password: str) -> None:
        try:
            if password.isascii() and self._username.isascii():
                conn.login(self._username, password)
            else:  # LOGIN is ASCII only: SASL PLAIN carries UTF-8
                secret = f"\0{self._username}\0{password}".encode()
                conn.authenticate("PLAIN", lambda _challenge: secret)
        except imaplib.IMAP4.abort as exc:
            raise TransientFailure(f"imap: connection lost logging in: {_reason(exc)}") from None
        except imaplib.IMAP4.error as exc:
            detail = _reason(exc)
            if "[UNAVAILABLE]" in detail:
                raise TransientFailure(
                    f"imap: login unavailable for {self._where()}: {detail}"
                ) from None
            raise LoginRefused(f"imap: login refused for {self._where()}: {detail}") from None
        except OSError as exc:
            raise TransientFailure(f"imap: connection lost logging in: {_reason(exc)}") from None

    def _examine(self, conn: imaplib.IMAP4) -> list[int]:
        """The mailbox opened read-only: its UIDs, ascending; sets ``_uidvalidity``."""
        try:
            typ, data = conn.select(mailbox_name(self._mailbox), readonly=True)
            if typ != "OK":
                raise TransientFailure(
                    f"imap: mailbox {self._mailbox!r} cannot be examined:"
                    f" {data[0]!r} ({self._where()})"
                )
            _, validity = conn.response("UIDVALIDITY")
            if not validity or validity[0] is None:
                raise TransientFailure(f"imap: mailbox {self._mailbox!r} has no UIDVALIDITY")
            self._uidvalidity = validity[0].decode().strip()
            typ, data = conn.uid("SEARCH", "ALL")
        except _IMAP_ERRORS as exc:
            raise TransientFailure(f"imap: examining {self._mailbox!r}: {_reason(exc)}") from None
        if typ != "OK":
            raise TransientFailure(f"imap: UID SEARCH refused: {data[0]!r}")
        return sorted(int(u) for u in b" ".join(d for d in data if d).split())

    def list(self, checkpoint: str | None) -> Iterator[RemoteItem | Removed]:
        """Every message of the mailbox, in UID order. The connection stays open for
        :meth:`read` until :meth:`close`."""
        self._conn = conn = self._connect()
        uids = self._examine(conn)
        validity = self._uidvalidity
        if checkpoint is not None and checkpoint != validity:
            log.warning(
                "imap mailbox %r: UIDVALIDITY %s, was %s: every message is new; the old"
                " ones retire only past the prune guard (--confirm-prune)",
                self._mailbox, validity, checkpoint,
            )  # fmt: skip
        for start in range(0, len(uids), self._page):
            page = uids[start : start + self._page]
            yield from self._page_items(conn, page[0], page[-1])

    def close(self) -> None:
        """Log out (the SDK calls it once the run's reads are done, or the listing failed:
        the messages core asks for are fetched after the listing moved on, the last page's
        after it ended). A ``LOGOUT`` the server cannot answer (the connection was cut) is
        followed by closing the socket; neither raises."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.logout()
        except _IMAP_ERRORS:
            # ``logout`` closes the socket only once the server answered: a connection cut
            # or a server gone silent would keep it open for the worker's life.
            with contextlib.suppress(*_IMAP_ERRORS):
                conn.shutdown()

    def _page_items(self, conn: imaplib.IMAP4, lo: int, hi: int) -> Iterator[RemoteItem]:
        try:
            typ, data = conn.uid("FETCH", f"{lo}:{hi}", "(UID RFC822.SIZE INTERNALDATE)")
        except _IMAP_ERRORS as exc:
            raise ListingIncomplete(
                f"imap: listing UIDs {lo}:{hi} failed: {_reason(exc)}"
            ) from None
        if typ != "OK":
            raise ListingIncomplete(f"imap: listing UIDs {lo}:{hi} refused: {data[0]!r}")
        rows: list[tuple[int, int, bytes | None]] = []
        for line in data:
            if not isinstance(line, bytes):
                continue
            uid_m, size_m = _UID.search(line), _SIZE.search(line)
            if uid_m is None or size_m is None:
                continue
            date_m = _DATE.search(line)
            rows.append((int(uid_m[1]), int(size_m[1]), date_m[1] if date_m else None))
        validity = self._uidvalidity
        for uid, size, date in sorted(rows):
            if not lo <= uid <= hi:  # "lo:hi" also names the highest UID when hi is gone
                continue
            yield RemoteItem(
                external_id=f"{validity}:{uid}", name=f"{self._mailbox}/{uid}.eml",
                marker=f"{validity}:{uid}:{size}", size=size, format="eml", ref=uid,
                modified_us=_internaldate_us(date) if date else None,
            )  # fmt: skip

    def read(self, item: RemoteItem) -> bytes:
        """The message's bytes (``BODY.PEEK[]``: its flags stay as they are).

        :raises ItemUnreadable: the message is gone or the connection was lost.
        """
        conn = self._conn
        if conn is None:
            raise ItemUnreadable(f"{item.external_id}: no connection")
        try:
            typ, data = conn.uid("FETCH", str(item.ref), "(BODY.PEEK[])")
        except _IMAP_ERRORS as exc:
            raise ItemUnreadable(f"{item.external_id}: {_reason(exc)}") from None
        if typ == "OK":
            for part in data:
                if isinstance(part, tuple) and _UID.search(part[0] or b""):
                    return bytes(part[1])
            for part in data:  # a server that names the UID after the literal
                if isinstance(part, tuple):
                    return bytes(part[1])
        raise ItemUnreadable(f"{item.external_id}: the server returned no message ({typ})")
