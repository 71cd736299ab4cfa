"""Doubt made visible by the tabular worker (docs/formats.md, "Warnings"): a guessed encoding's
confidence, ragged rows and a file cut inside a quoted cell counted in ``stats.warnings``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.workers.tabular_worker.test_tabular_worker import Run, _job, run_file
from workers_common import CorruptInput
from workers_common.encoding_guess import LOW_CONFIDENCE


def _kinds(stats: dict[str, Any]) -> dict[str, int]:
    return {w["kind"]: w["count"] for w in stats.get("warnings", [])}


def test_greek_file_is_read_as_greek_with_its_confidence() -> None:
    run = run_file("csv/table-infer-iso-8859-7.csv")
    assert [r["name"] for r in run.rows()] == ["Λεωνιδας", "Αλεξανδρος", "Μυρων", "Ευστοργιος"]
    stats = run.stats
    assert stats["encoding"] in ("cp1253", "iso8859-7")
    assert LOW_CONFIDENCE <= stats["encoding_confidence"] < 1  # 69 bytes: some doubt
    assert "warnings" not in stats


def test_a_doubtful_guess_gets_a_warning() -> None:
    text = "id,imię,miasto\n1,Zażółć gęślą jaźń,Łódź\n2,Wojciech Świątek,Gdańsk\n"
    run = Run(_job("pl.csv", text.encode("cp1250")))
    stats = run.stats
    assert stats["encoding"] == "cp1250" and run.rows()[1]["miasto"] == "Gdańsk"
    assert stats["encoding_confidence"] < LOW_CONFIDENCE
    assert stats["warnings"] == [
        {
            "kind": "encoding_guessed",
            "count": 1,
            "detail": f"read as cp1250 with confidence {stats['encoding_confidence']}",
        }
    ]


def test_a_confident_guess_has_no_warning() -> None:
    text = "id,όνομα,πόλη\n" + "".join(
        f"{i},Λεωνίδας Παπαδόπουλος,Θεσσαλονίκη και Αθήνα είναι πόλεις της Ελλάδας\n"
        for i in range(200)
    )
    run = Run(_job("g.csv", text.encode("iso-8859-7")))
    assert run.rows()[0]["όνομα"] == "Λεωνίδας Παπαδόπουλος"
    assert run.stats["encoding_confidence"] == 1.0
    assert "warnings" not in run.stats


def test_a_known_encoding_has_no_confidence() -> None:
    run = run_file("csv/table-infer-iso-8859-7.csv", {"encoding": "iso-8859-7"})
    assert run.stats["encoding"] == "iso8859-7"
    assert "encoding_confidence" not in run.stats and "warnings" not in run.stats
    assert "encoding_confidence" not in run_file("csv/countries.csv").stats  # UTF-8


def test_latin1_corpus_file_guessed() -> None:
    run = run_file("csv/latin1.csv")
    assert run.rows()[1]["name"] == "©"
    assert run.stats["encoding"] == "cp1252" and run.stats["encoding_confidence"] > 0


def test_ragged_rows_are_counted_as_a_warning() -> None:
    run = Run(_job("r.csv", b"a,b\n1,2\n3,4,5\n6,7,8,9\n10,11\n"))
    assert run.stats["ragged_rows"] == 2
    assert _kinds(run.stats) == {"ragged_rows": 2}


def test_csv_cut_inside_a_quoted_cell_completes_truncated() -> None:
    run = Run(_job("cut.csv", b'a,b\n1,"two\nlines"\n3,"cut here\nand mo'))
    assert [r["b"] for r in run.rows()] == ["two\nlines", "cut here\nand mo"]
    assert _kinds(run.stats) == {"truncated": 1}
    assert run.span_texts("TABLE_ROW")[1] == "3\tcut here\nand mo"


def test_a_stray_quote_is_not_truncation() -> None:
    with pytest.raises(CorruptInput, match="never closed"):
        Run(_job("q.csv", b'a,b\n1,"x"y"z\n2,3\n'))


def test_same_bytes_same_warnings() -> None:
    raw = (b"a,b\n\xe9t\xe9,1\n2,3,4\n", {})
    first, second = Run(_job("x.csv", raw[0])), Run(_job("x.csv", raw[0]))
    assert first.subs == second.subs
    assert _kinds(first.stats) == {"ragged_rows": 1}
