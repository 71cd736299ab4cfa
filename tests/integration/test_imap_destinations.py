"""Where an ``imap`` connector may connect (docs/connectors.md, "The imap kind"): its
``host`` and ``port`` are a tenant's settings, so a run connects only where ``[connectors]``
allows (the destination rule of web fetches and webhooks): a loopback or private address
is refused before any connection unless ``allowed_hosts`` lists it by address or network,
and the refusal is final (the run is dead at once). A real listener on 127.0.0.1 shows
whether a connection was made."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from connectors.imap import ImapConnector, LoginRefused
from tests.support.listener import tcp_listener
from workers_common import TransientFailure

_SECRET = "TELHA_SECRET_TEST_IMAP_DEST"
_ENV = ("TELHA_CONNECTORS__ALLOWED_HOSTS", "TELHA_CONNECTORS__DENY_PRIVATE")


@pytest.fixture
def listener() -> Iterator[tuple[int, list[int]]]:
    """A TCP listener on 127.0.0.1 that closes each connection at once; the port and the
    count of connections it took."""
    taken: list[int] = []
    saved = {k: os.environ.pop(k, None) for k in (*_ENV, _SECRET)}
    os.environ[_SECRET] = "secret"
    try:
        with tcp_listener(lambda _conn: taken.append(1)) as port:
            yield port, taken
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


def _run(port: int) -> None:
    connector = ImapConnector(
        {"host": "127.0.0.1", "port": port, "username": "u", "passwordEnv": _SECRET,
         "tls": "none"}
    )  # fmt: skip
    try:
        list(connector.list(None))
    finally:
        connector.close()


def test_a_loopback_server_is_refused_before_connecting(listener: tuple[int, list[int]]) -> None:
    port, taken = listener
    with pytest.raises(LoginRefused, match=r"loopback.*\[connectors\] allowed_hosts"):
        _run(port)
    os.environ["TELHA_CONNECTORS__ALLOWED_HOSTS"] = "10.0.0.0/8"  # another network only
    with pytest.raises(LoginRefused, match="not on \\[connectors\\] allowed_hosts"):
        _run(port)
    assert taken == []  # nothing connected


def test_a_listed_address_is_connected_to(listener: tuple[int, list[int]]) -> None:
    port, taken = listener
    os.environ["TELHA_CONNECTORS__ALLOWED_HOSTS"] = f"127.0.0.1:{port}"
    with pytest.raises(TransientFailure):  # connected; the listener hung up
        _run(port)
    assert taken == [1]
