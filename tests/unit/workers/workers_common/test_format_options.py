"""The options of every worker format, declared once (:mod:`workers_common.format_options`):
what core checks at request time (:func:`telha.ingest.request.check_request`) and what the
workers accept are the same, value for value; format names and aliases."""

from __future__ import annotations

from typing import Any

import pytest
from code_worker import _OPTIONS as CODE_FILE_OPTIONS
from code_worker.archive import ARCHIVE_OPTIONS
from docling_worker import _OPTIONS as DOCLING_OPTIONS
from email_worker import _OPTIONS as EMAIL_OPTIONS
from tabular_worker.options import parse_options as tabular_options

from telha.domain.errors import RequestError
from telha.ingest.request import (
    KNOWN_FORMATS,
    check_request,
    known_format,
    parse_ingest_request,
)
from web_worker.options import parse_options as web_options
from workers_common import UnsupportedFeature
from workers_common.format_options import (
    FORMAT_OPTIONS,
    OptionError,
    check_options,
    drop_nulls,
    option_names,
)

#: Values tried for every option: each kind meets values of every other kind.
SAMPLES: list[Any] = [
    True, False, 0, 1, -1, 7, 0.05, 0.5, 2.5, 10**6, "", " ", ";", "§", '"', "\t", "auto",
    "TRUE", "utf-8", "latin-1", "no-such-codec", "ROW", "row", "load", "networkidle", "python",
    "cobol", "div.main", ["a", "b"], ["a", 1], [], {}, {"max_depth": 1},
]  # fmt: skip


def _core_accepts(fmt: str, options: dict[str, Any]) -> bool:
    try:
        check_options(fmt, options)
    except OptionError:
        return False
    return True


def _worker_accepts(parse: Any, options: dict[str, Any]) -> bool:
    try:
        parse(options)
    except UnsupportedFeature:
        return False
    return True


@pytest.mark.parametrize(
    ("fmt", "parse"), [("csv", tabular_options), ("web", web_options)], ids=["tabular", "web"]
)
def test_core_and_the_worker_accept_the_same_values(fmt: str, parse: Any) -> None:
    names = [*option_names(fmt), "delimeter", "no_such_option"]
    for name in names:
        for value in SAMPLES:
            options = {name: value}
            core, worker = _core_accepts(fmt, options), _worker_accepts(parse, options)
            assert core == worker, (fmt, options, core, worker)
    for value in SAMPLES:  # web's nested crawl object, key by key
        if fmt == "web":
            for key in [*option_names("web", "crawl"), "max_dept"]:
                options = {"crawl": {key: value}}
                core, worker = _core_accepts(fmt, options), _worker_accepts(parse, options)
                assert core == worker, (options, core, worker)


def test_the_workers_read_their_option_names_from_the_declaration() -> None:
    assert set(option_names("pdf")) == DOCLING_OPTIONS == {"clarify", "ocr"}
    assert set(option_names("eml")) == EMAIL_OPTIONS == {"clarify"}
    assert set(option_names("code")) == CODE_FILE_OPTIONS | ARCHIVE_OPTIONS
    assert option_names("text") == option_names("markdown") == ()


def test_every_worker_format_declares_its_options() -> None:
    assert set(KNOWN_FORMATS) - {"json"} <= set(FORMAT_OPTIONS)


def test_errors_name_the_option() -> None:
    with pytest.raises(OptionError) as err:
        check_options("csv", {"delimeter": ";"})
    assert err.value.option == "delimeter"
    assert str(err.value).startswith("delimeter: unknown option (known: delimiter, encoding")
    with pytest.raises(OptionError, match=r"^crawl\.max_pages: 0 is not an integer >= 1"):
        check_options("web", {"crawl": {"max_pages": 0}})
    with pytest.raises(OptionError, match=r"^clarify: unknown option \(known: none\)"):
        check_options("text", {"clarify": True})
    check_options("csv", {"webhook": {"url": "checked by core"}})  # core's own option


def test_check_request_names_the_option_or_the_name() -> None:
    with pytest.raises(RequestError, match=r"^options\.rows_per_partial: 'x' is not an integer"):
        check_request("csv", "a.csv", {"rows_per_partial": "x"})
    for name in ("site.localhost", "file:///etc/passwd", "http:///x", "//host/x", "http://[::1"):
        with pytest.raises(RequestError, match=r"^name: format=web needs an absolute http"):
            check_request("web", name, {})
    assert check_request("web", "https://site.localhost/a?b=1", {"crawl": None}) == {}
    assert check_request("json", "a.json", {"anything": 1}) == {"anything": 1}  # the Ingestor's
    assert drop_nulls({"a": None, "b": {"c": None, "d": 1}}) == {"b": {"d": 1}}


def test_format_names_are_case_insensitive_and_take_aliases() -> None:
    assert known_format("MD") == "markdown"
    assert known_format("Markdown") == "markdown"
    assert known_format("htm") == "html"
    assert known_format("TXT") == "text"
    assert known_format("Csv") == "csv"
    with pytest.raises(RequestError, match=r"unknown format 'docx2'; known formats: json, text"):
        known_format("docx2")
    req = parse_ingest_request(b'{"format": "MD", "name": "a.md", "content": "# A"}')
    assert req.format == "markdown"
