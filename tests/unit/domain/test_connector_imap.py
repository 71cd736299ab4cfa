"""The ``imap`` connector's pure parts: core's check of its settings and the mailbox name as
IMAP spells it (docs/connectors.md, "The imap kind")."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.imap import ImapConnector, mailbox_name
from telha.domain.connectors import check_connector
from telha.domain.errors import RequestError

GOOD = {"host": "mail.example.com", "username": "alice", "passwordEnv": "TELHA_SECRET_A"}


def test_good_settings_pass() -> None:
    full = {**GOOD, "port": 1143, "mailbox": "Archiv/2026", "tls": "starttls",
            "caFile": "/etc/ssl/ca.pem", "pageSize": 100}  # fmt: skip
    for settings in (GOOD, full):
        kind, kept, _, _ = check_connector({"kind": "imap", "settings": settings})
        assert kind == "imap" and kept == settings


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"password": "hunter2"}, "settings.password: a password is never stored"),
        ({"passwordEnv": None}, "settings.passwordEnv"),
        ({"passwordEnv": "TELHA_WORKER_TOKEN"}, "settings.passwordEnv"),
        ({"passwordEnv": "HOME"}, "settings.passwordEnv"),
        ({"passwordEnv": "TELHA_SECRET_"}, "settings.passwordEnv"),
        ({"host": ""}, "settings.host"),
        ({"host": "mail.example.com\r\nA1 LOGOUT"}, "settings.host"),
        ({"host": "a b"}, "settings.host"),
        ({"username": 7}, "settings.username"),
        ({"mailbox": "In\nbox"}, "settings.mailbox"),
        ({"tls": "ssl"}, "settings.tls"),
        ({"port": 0}, "settings.port"),
        ({"port": True}, "settings.port"),
        ({"port": "993"}, "settings.port"),
        ({"caFile": "ca.pem"}, "settings.caFile"),
        ({"tls": "none", "caFile": "/etc/ssl/ca.pem"}, "settings.caFile"),
        ({"pageSize": 0}, "settings.pageSize"),
        ({"pageSize": 5001}, "settings.pageSize"),
        ({"root": "/srv"}, "unknown key(s) root"),
    ],
)
def test_bad_settings_name_the_field(change: dict[str, Any], field: str) -> None:
    settings = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(RequestError) as err:
        check_connector({"kind": "imap", "settings": settings})
    assert field in str(err.value)
    assert "hunter2" not in str(err.value)


def test_mailbox_names_in_modified_utf7() -> None:
    assert mailbox_name("INBOX") == '"INBOX"'
    assert mailbox_name("Entwürfe & Co") == '"Entw&APw-rfe &- Co"'
    assert mailbox_name("日本語") == '"&ZeVnLIqe-"'
    assert mailbox_name('a "b" \\c') == '"a \\"b\\" \\\\c"'


def test_defaults() -> None:
    implicit = ImapConnector(GOOD)
    assert implicit.full_listing("123") is True and implicit.next_checkpoint() is None
    assert implicit._port == 993 and implicit._mailbox == "INBOX"
    assert ImapConnector({**GOOD, "tls": "none"})._port == 143
