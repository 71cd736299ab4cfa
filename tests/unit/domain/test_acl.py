"""Principals (docs/rest-api.md, "Principals"): the header's grammar, a key's principals
only narrowed, and the floor-only rule of :func:`telha.domain.acl.admits`."""

from __future__ import annotations

import pytest

from telha.domain.acl import MAX_PRINCIPALS, admits, narrow, parse_principals
from telha.domain.errors import Forbidden, RequestError


def test_parse_sorts_drops_repeats_and_trims() -> None:
    assert parse_principals(" user:alice ,group:eng,user:alice") == ("group:eng", "user:alice")
    assert parse_principals("user:José Ramos") == ("user:José Ramos",)
    assert parse_principals("role.x-y_z:a:b") == ("role.x-y_z:a:b",)


@pytest.mark.parametrize(
    "bad",
    ["", " ", ",", "alice", ":alice", "user:", "User:alice", "user:a,,user:b", "user: a",
     "user:a\x00", "1user:a", "user:" + "x" * 300, ",".join(f"user:{i}" for i in range(101))],
)  # fmt: skip
def test_parse_refuses(bad: str) -> None:
    with pytest.raises(RequestError):
        parse_principals(bad)
    assert MAX_PRINCIPALS == 100


def test_a_keys_principals_can_only_be_narrowed() -> None:
    key = ("group:eng", "user:alice")
    assert narrow(None, None) is None
    assert narrow(key, None) == key
    assert narrow(None, ("user:bob",)) == ("user:bob",)
    assert narrow(key, ("user:alice",)) == ("user:alice",)
    with pytest.raises(Forbidden, match="user:bob"):
        narrow(key, ("user:alice", "user:bob"))


def test_floor_only() -> None:
    assert admits(None, ("user:a",)) and admits(["user:b"], None) and admits(None, None)
    assert admits(["user:a", "group:g"], ("group:g",))
    assert not admits(["user:a"], ("user:A",))
    assert not admits([], ("user:a",))
