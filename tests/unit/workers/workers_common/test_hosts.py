"""URLs read as a browser reads them (workers_common.hosts; docs/operations.md, "Webhooks"):
one spelling per host, and an error for what a browser could not parse."""

from __future__ import annotations

import pytest

from workers_common.hosts import Target, parse_host, parse_url


@pytest.mark.parametrize(
    ("url", "target"),
    [
        (
            "http://127.0.0.1:8000/h?x=1",
            Target("http://127.0.0.1:8000/h?x=1", "http", "127.0.0.1", 8000),
        ),
        (
            "HTTPS://Hooks.Example.Com./a",
            Target("https://hooks.example.com/a", "https", "hooks.example.com", 443),
        ),
        ("http://0177.0.0.1:9/x", Target("http://127.0.0.1:9/x", "http", "127.0.0.1", 9)),
        ("http://2130706433/", Target("http://127.0.0.1/", "http", "127.0.0.1", 80)),
        ("http://0x7f.1/", Target("http://127.0.0.1/", "http", "127.0.0.1", 80)),
        (
            "http://[::FFFF:127.0.0.1]:8/",
            Target("http://[::ffff:7f00:1]:8/", "http", "::ffff:7f00:1", 8),
        ),
        (
            "http://ｅｘａｍｐｌｅ．ｃｏｍ/h",
            Target("http://example.com/h", "http", "example.com", 80),
        ),
        (
            "http://bücher.example.com/",
            Target("http://xn--bcher-kva.example.com/", "http", "xn--bcher-kva.example.com", 80),
        ),
        ("http://%6c%6fcalhost/", Target("http://localhost/", "http", "localhost", 80)),
        ("http://u:p@EX.com:81/", Target("http://u:p@ex.com:81/", "http", "ex.com", 81)),
        ("http://my_host/", Target("http://my_host/", "http", "my_host", 80)),
        ("http://8.8.8.8:080/", Target("http://8.8.8.8:080/", "http", "8.8.8.8", 80)),
    ],
)
def test_one_spelling(url: str, target: Target) -> None:
    assert parse_url(url) == target


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("http://256.0.0.1/", "not a valid IPv4 address"),
        ("http://1.2.3.4.5/", "not a valid IPv4 address"),
        ("http://example.0x100000000/", "not a valid IPv4 address"),
        ("http://xn--zz/", "not a valid host name"),
        ("http://a\u200db.example.com/", "not a valid host name"),  # a joiner IDNA refuses here
        ("http://exa%zzmple.com/", "no host name may hold"),
        ("http://a<b/", "no host name may hold"),
        ("http://[::1/", "not a valid URL"),
        ("http://[fe80::1%25eth0]/", "not a valid IPv6 address"),
        ("http://[::1]x/", "junk after the host"),
        ("http://example.com:0/", "not in 1-65535"),
        ("http://example.com:65536/", "not in 1-65535"),
        ("http://example.com:8o/", "not a number"),
        ("http:///path", "no host"),
        ("http://./", "no host"),
        ("ftp://example.com/", "http or https"),
        ("javascript:alert(1)", "http or https"),
        ("http://exa mple.com/", "whitespace"),
        ("http://127.0.0.1\\@hooks.example.com/", "backslash"),
        ("http://example.com/\n", "whitespace"),
    ],
)
def test_refused_spellings(url: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_url(url)


def test_parse_host_alone() -> None:
    assert parse_host("LOCALHOST.") == "localhost"
    assert parse_host("[::1]") == "::1"
    with pytest.raises(ValueError):
        parse_host("")
