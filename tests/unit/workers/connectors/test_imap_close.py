"""The ``imap`` connector lets go of its connection when the server cut it (docs/connectors.md,
"The imap kind"): ``close`` after a listing cut halfway leaves no socket open, although the
``LOGOUT`` it sends first can no longer be answered. A scripted IMAP server on a real
127.0.0.1 socket (:func:`tests.support.listener.tcp_listener`) answers the greeting, the
capabilities, the login, the examine and the search, then closes the connection at the
first ``UID FETCH``."""

from __future__ import annotations

import gc
import socket
import warnings

import pytest

from connectors.imap import ImapConnector
from connectors.sdk import ListingIncomplete
from tests.support.listener import tcp_listener


def _cut_at_fetch(conn: socket.socket) -> None:
    """Answer as an IMAP4rev1 server until the client fetches, then hang up."""
    conn.sendall(b"* OK [CAPABILITY IMAP4rev1] ready\r\n")
    reader = conn.makefile("rb")
    try:
        for line in reader:
            tag, _, command = line.decode().rstrip("\r\n").partition(" ")
            verb = command.upper()
            if verb.startswith("CAPABILITY"):
                conn.sendall(
                    f"* CAPABILITY IMAP4rev1\r\n{tag} OK CAPABILITY completed\r\n".encode()
                )
            elif verb.startswith("LOGIN"):
                conn.sendall(f"{tag} OK LOGIN completed\r\n".encode())
            elif verb.startswith(("EXAMINE", "SELECT")):
                conn.sendall(
                    b"* 2 EXISTS\r\n* OK [UIDVALIDITY 7] UIDs valid\r\n"
                    + f"{tag} OK [READ-ONLY] EXAMINE completed\r\n".encode()
                )
            elif verb.startswith("UID SEARCH"):
                conn.sendall(f"* SEARCH 1 2\r\n{tag} OK SEARCH completed\r\n".encode())
            else:  # the listing's first page: the connection is cut
                return
    finally:
        reader.close()


def test_close_after_a_cut_listing_leaves_no_socket_open(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELHA_CONNECTORS__ALLOWED_HOSTS", "127.0.0.1")
    monkeypatch.setenv("IMAP_TEST_PASSWORD", "secret")
    with tcp_listener(_cut_at_fetch) as port:
        connector = ImapConnector(
            {"host": "127.0.0.1", "port": port, "tls": "none", "username": "u",
             "passwordEnv": "IMAP_TEST_PASSWORD"}
        )  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            with pytest.raises(ListingIncomplete, match="listing UIDs 1:2"):
                list(connector.list(None))
            connector.close()
            del connector
            gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == []
