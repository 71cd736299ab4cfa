"""A throwaway Dovecot IMAP server on 127.0.0.1 for the ``imap`` connector's tests and bench:
its own ``dovecot.conf``, run directory, passwd-file user and maildir store in a temporary
folder, plain IMAP (with STARTTLS) and IMAPS on free ports, a self-signed certificate made
here for ``127.0.0.1``. Dovecot runs in the foreground as a child of the test: as root it
drops to Debian's ``dovecot``/``dovenull`` users and keeps the mail as ``nobody``; as
another user it runs every process as that user.

Dovecot is expected (``make setup`` installs Debian's ``dovecot-imapd``): a missing one
fails the tests, unless ``TELHA_TEST_DOVECOT=0`` (then they are skipped, loudly) — as
PostgreSQL is treated (tests/support/pg.py).

Each IMAP session's logout line reports what it fetched (``fetch_body_count``): the tests
tell from it that a run read no message body.
"""

from __future__ import annotations

import datetime
import imaplib
import ipaddress
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import pytest

__all__ = ["Dovecot", "free_port", "require_dovecot"]

_LOGOUT = re.compile(r"fetch_body_count=(\d+)")


def _binary() -> str | None:
    found = shutil.which("dovecot")
    if found is None and os.access("/usr/sbin/dovecot", os.X_OK):
        found = "/usr/sbin/dovecot"
    return found


def require_dovecot() -> str:
    """The ``dovecot`` binary: skipped (loudly) with ``TELHA_TEST_DOVECOT=0``; a missing
    one fails the test."""
    if os.environ.get("TELHA_TEST_DOVECOT") == "0":
        pytest.skip(
            "!!! IMAP connector tests SKIPPED: TELHA_TEST_DOVECOT=0. The imap connector is NOT"
            " tested in this run; unset it and `make setup` (dovecot-imapd) to run them !!!"
        )
    found = _binary()
    if found is None:
        pytest.fail(
            "Dovecot is expected (TELHA_TEST_DOVECOT != 0) but no dovecot binary was found:"
            " run `make setup` (apt-get install dovecot-imapd)",
            pytrace=False,
        )
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on (just now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A key and a self-signed certificate for ``127.0.0.1`` (the certificate is its own CA
    bundle)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


class Dovecot:
    """A Dovecot of one user (``alice``, password :attr:`password`) in a new folder under
    the system's temporary directory (pytest's is private to root, and Dovecot's
    unprivileged processes must reach it), removed by :meth:`stop`.

    ``port``: plain IMAP (STARTTLS offered); ``tls_port``: IMAPS; ``ca_file``: the
    certificate to trust. Use as a context manager, or :meth:`start`/:meth:`stop`.
    """

    user = "alice"
    password = "correct horse battery staple"

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="telha-dovecot-"))
        self.port = free_port()
        self.tls_port = free_port()
        self.ca_file = self.folder / "cert.pem"
        self.log_path = self.folder / "dovecot.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: BinaryIO | None = None

    def _config(self) -> Path:
        f = self.folder
        for d in ("run", "state", "mail"):
            (f / d).mkdir(exist_ok=True)
        cert, key = _self_signed(f)
        if os.getuid() == 0:
            mail_user, internal, login = "nobody", "dovecot", "dovenull"
            nobody = pwd.getpwnam("nobody")
            os.chown(f / "mail", nobody.pw_uid, nobody.pw_gid)
            # Dovecot's unprivileged processes must reach the run and state folders.
            for d in (f, f / "run", f / "state"):
                d.chmod(0o755)
        else:
            me = pwd.getpwuid(os.getuid()).pw_name
            mail_user = internal = login = me
        mail_gid = pwd.getpwnam(mail_user).pw_gid
        (f / "passwd").write_text(f"{self.user}:{{PLAIN}}{self.password}::::::\n")
        conf = f"""\
base_dir = {f}/run
state_dir = {f}/state
instance_name = telha-test-{self.port}
listen = 127.0.0.1
protocols = imap
log_path = {self.log_path}
ssl = yes
ssl_cert = <{cert}
ssl_key = <{key}
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
default_internal_user = {internal}
default_login_user = {login}
first_valid_uid = 1
first_valid_gid = 1
mail_location = maildir:{f}/mail/%u
mail_fsync = never
passdb {{
  driver = passwd-file
  args = scheme=PLAIN {f}/passwd
}}
userdb {{
  driver = static
  args = uid={mail_user} gid={mail_gid} home={f}/mail/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.tls_port}
  }}
}}
imap_logout_format = in=%i out=%o fetch_body_count=%{{fetch_body_count}}
"""
        path = f / "dovecot.conf"
        path.write_text(conf)
        if os.getuid() == 0:
            for p in (path, f / "passwd", cert):
                p.chmod(0o644)
        return path

    def start(self) -> Dovecot:
        """Start it and wait until it accepts connections (at most 20 s).

        :raises RuntimeError: it did not come up (its log in the message).
        """
        binary = require_dovecot()
        conf = self._config()
        self._stderr = (self.folder / "stderr.log").open("wb")
        self._proc = subprocess.Popen(
            [binary, "-F", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=self._stderr
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.05)
        logs = self.logs()
        self.stop()
        raise RuntimeError(f"dovecot did not start:\n{logs}")

    def logs(self) -> str:
        """Its log and stderr so far."""
        out = []
        for name in ("stderr.log", "dovecot.log"):
            p = self.folder / name
            if p.exists():
                out.append(p.read_text(errors="replace"))
        return "\n".join(out)

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 10 s) and remove its folder."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Dovecot:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def client(self) -> imaplib.IMAP4:
        """A logged-in plain IMAP session (the test's own, to append and expunge)."""
        conn = imaplib.IMAP4("127.0.0.1", self.port, timeout=30)
        conn.login(self.user, self.password)
        return conn

    def create(self, mailbox: str) -> None:
        """Create ``mailbox`` (a new one gets a new ``UIDVALIDITY``)."""
        conn = self.client()
        try:
            typ, data = conn.create(mailbox)
            assert typ == "OK", data
        finally:
            conn.logout()

    def delete(self, mailbox: str) -> None:
        """Delete ``mailbox`` and its messages."""
        conn = self.client()
        try:
            typ, data = conn.delete(mailbox)
            assert typ == "OK", data
        finally:
            conn.logout()

    def uidvalidity(self, mailbox: str = "INBOX") -> str:
        """The mailbox's ``UIDVALIDITY``."""
        conn = self.client()
        try:
            typ, data = conn.status(mailbox, "(UIDVALIDITY)")
            assert typ == "OK", data
            m = re.search(rb"UIDVALIDITY (\d+)", data[0] or b"")
            assert m is not None, data
            return m[1].decode()
        finally:
            conn.logout()

    def seen_flags(self, mailbox: str = "INBOX") -> int:
        """How many messages of ``mailbox`` are flagged ``\\Seen``."""
        conn = self.client()
        try:
            conn.select(mailbox, readonly=True)
            typ, data = conn.search(None, "SEEN")
            assert typ == "OK", data
            return len((data[0] or b"").split())
        finally:
            conn.logout()

    def append(self, messages: list[bytes], mailbox: str = "INBOX") -> list[int]:
        """``APPEND`` each message; their UIDs."""
        uids = []
        conn = self.client()
        try:
            for raw in messages:
                typ, data = conn.append(mailbox, None, None, raw)
                assert typ == "OK", data
                m = re.search(rb"APPENDUID \d+ (\d+)", data[0] or b"")
                assert m is not None, data
                uids.append(int(m[1]))
        finally:
            conn.logout()
        return uids

    def expunge(self, uids: list[int], mailbox: str = "INBOX") -> None:
        """Flag the messages ``\\Deleted`` and ``EXPUNGE`` them."""
        conn = self.client()
        try:
            conn.select(mailbox)
            for uid in uids:
                typ, data = conn.uid("STORE", str(uid), "+FLAGS.SILENT", "(\\Deleted)")
                assert typ == "OK", data
            assert conn.expunge()[0] == "OK"
        finally:
            conn.logout()

    def log_mark(self) -> int:
        """Where the log ends once every session that logged in has logged its end (at
        most 5 s), for :meth:`bodies_fetched`."""
        deadline = time.monotonic() + 5
        while True:
            text = self.log_path.read_bytes() if self.log_path.exists() else b""
            ended = len(_LOGOUT.findall(text.decode("utf-8", "replace")))
            if text.count(b"Info: Login:") <= ended or time.monotonic() > deadline:
                return len(text)
            time.sleep(0.02)

    def bodies_fetched(self, since: int = 0) -> tuple[int, int]:
        """``(sessions, bodies)``: how many IMAP sessions logged out since log offset
        ``since``, and how many message bodies they fetched in all."""
        if not self.log_path.exists():
            return 0, 0
        with self.log_path.open("rb") as f:
            f.seek(since)
            text = f.read().decode("utf-8", "replace")
        counts = [int(m[1]) for m in _LOGOUT.finditer(text)]
        return len(counts), sum(counts)
