"""A version's identity as workers declare it and core hashes it (workers_common/projection.py,
telha/domain/dedup.py; docs/architecture.md, "Dedup, identity and versions"): effective options
fill declared defaults and drop nulls and core's own options, so equal readings hash equal and
any change of worker, projection, parser or option does not; the consumer's splice of the
``projection`` member keeps the submission valid."""

from __future__ import annotations

import json

from telha.domain.dedup import identity_of
from telha.domain.submission import decode_submission
from workers_common.projection import ProjectionSpec, effective_options, with_projection

SPEC = ProjectionSpec("tabular_worker", 1, {"polars": "2.1.0"})


def test_effective_options_fill_defaults_and_drop_nulls_and_core_options() -> None:
    assert effective_options("csv", {}) == {"clarify": False, "header": "auto"}
    assert effective_options("csv", {"header": "auto", "clarify": None, "webhook": {}}) == {
        "clarify": False, "header": "auto",
    }  # fmt: skip
    assert effective_options("markdown", {}) == {}
    assert effective_options("json", {"label": "RISK", "nested": "flatten"}) == {
        "label": "RISK", "nested": "flatten",
    }  # fmt: skip


def test_the_fingerprint_changes_with_every_part_of_the_identity() -> None:
    base = identity_of(SPEC, "csv", {})
    assert identity_of(SPEC, "csv", {"header": "auto"}) == base  # a default spelled out
    others = [
        identity_of(SPEC, "csv", {"encoding": "iso-8859-7"}),
        identity_of(ProjectionSpec("tabular_worker", 2, SPEC.parsers), "csv", {}),
        identity_of(ProjectionSpec("tabular_worker", 1, {"polars": "2.2.0"}), "csv", {}),
        identity_of(ProjectionSpec("other_worker", 1, SPEC.parsers), "csv", {}),
        identity_of(SPEC, "tsv", {}),
    ]
    fingerprints = {base.fingerprint, *(o.fingerprint for o in others)}
    assert len(fingerprints) == 1 + len(others)
    doc = json.loads(base.json)
    assert doc == {"format": "csv", "options": {"clarify": False, "header": "auto"},
                   "parsers": {"polars": "2.1.0"}, "projection": 1,
                   "worker": "tabular_worker"}  # fmt: skip


def test_the_spliced_projection_decodes_with_the_submission() -> None:
    for body in (b'{"v":1}', b'  {"v": 1, "canonicalText": "x"}', b"{}"):
        spliced = with_projection(body, SPEC)
        doc = json.loads(spliced)
        assert doc["projection"] == {"worker": "tabular_worker", "version": 1,
                                     "parsers": {"polars": "2.1.0"}}  # fmt: skip
        if body != b"{}":
            sub = decode_submission(spliced)
            assert sub.projection is not None and sub.projection.version == 1
    already = b'{"projection": {"worker": "w", "version": 3}, "v": 1}'
    assert with_projection(already, SPEC) == already
    assert with_projection(b"[1]", SPEC) == b"[1]"
