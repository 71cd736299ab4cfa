"""The dedup predicate of telha/domain/records.py across the Dedup modes, property-tested
against the rules it implements (the same bytes *and* fingerprint, never a retired or erased
latest version), plus the UTF-8 boundary and slice helpers beside it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telha.domain.dedup import Latest, version_reason
from telha.domain.errors import RequestError
from telha.domain.model import BLOB_CHUNK, Dedup, NewVersion
from telha.domain.records import is_boundary, is_duplicate, slice_chunks, slice_text

#: A handful of values per field, so equal and different ones both come up often.
hashes = st.sampled_from([b"\x01" * 32, b"\x02" * 32])
job_ids = st.sampled_from([None, b"\x0a" * 16, b"\x0b" * 16])
fingerprints = st.sampled_from([None, b"\x03" * 32, b"\x04" * 32])
latests = st.none() | st.builds(
    Latest, hashes, st.none() | hashes, job_ids, fingerprints, st.none(), st.booleans(),
    st.booleans(),
)  # fmt: skip


def new_version(content: bytes, job: bytes | None, fingerprint: bytes | None = None) -> NewVersion:
    return NewVersion(b"\x00" * 16, "doc.txt", "text", content, 3, "w", job, fingerprint)


@given(latests, hashes, hashes, job_ids, fingerprints, st.sampled_from(list(Dedup)))
def test_is_duplicate_follows_each_mode(
    latest: Latest | None,
    content: bytes,
    canonical: bytes,
    job: bytes | None,
    fingerprint: bytes | None,
    mode: Dedup,
) -> None:
    got = is_duplicate(latest, new_version(content, job, fingerprint), canonical, mode)
    if (
        mode is Dedup.NONE
        or latest is None
        or latest.content_hash != content
        or latest.fingerprint != fingerprint
        or latest.retired
        or latest.erased
    ):
        # No rule, a new source, other raw bytes, bytes read another way, or a retired or
        # erased latest version: always written.
        assert got is False
    elif mode is Dedup.CONTENT:
        assert got is True  # the same raw bytes: nothing written, whatever the text
    else:  # SUBMIT: same bytes and text, written by another job (a retry re-applies)
        assert got is (latest[1] == canonical and latest[2] != job)


def test_submit_mode_examples() -> None:
    a, b, job, other = b"\x01" * 32, b"\x02" * 32, b"\x0a" * 16, b"\x0b" * 16
    v = new_version(a, job)
    assert is_duplicate(Latest(a, b, other), v, b, Dedup.SUBMIT)
    assert not is_duplicate(Latest(a, b, job), v, b, Dedup.SUBMIT)  # the same job's retry
    assert not is_duplicate(Latest(a, a, other), v, b, Dedup.SUBMIT)  # other canonical text
    assert not is_duplicate(Latest(a, None, other), v, b, Dedup.SUBMIT)
    assert is_duplicate(Latest(a, a, job), v, b, Dedup.CONTENT)
    assert not is_duplicate(Latest(b, b, other), v, b, Dedup.CONTENT)
    # Bytes read with another fingerprint, or a retired source: a new version.
    assert not is_duplicate(Latest(a, a, job, b"\x03" * 32), v, b, Dedup.CONTENT)
    assert not is_duplicate(Latest(a, a, job, retired=True), v, b, Dedup.CONTENT)


def test_version_reason_names_what_changed() -> None:
    a, b = b"\x01" * 32, b"\x02" * 32
    one = (
        b'{"format":"csv","options":{"encoding":"cp1251"},"parsers":{},"projection":1,"worker":"w"}'
    )
    other_opts = one.replace(b"cp1251", b"iso-8859-7")
    newer = one.replace(b'"projection":1', b'"projection":2')
    assert version_reason(None, a, one) is None
    assert version_reason(Latest(a, a, None, None, one), b, one) == "content"
    assert version_reason(Latest(a, a, None, None, one), a, other_opts) == "options"
    assert version_reason(Latest(a, a, None, None, one), a, newer) == "projection"
    assert version_reason(Latest(a, a, None, None, None), a, one) == "projection"
    assert version_reason(Latest(a, a, None, None, one, retired=True), a, one) == "restored"


@given(st.text(max_size=30), st.data())
def test_slices_on_boundaries_round_trip(text: str, data: st.DataObject) -> None:
    raw = text.encode()
    cuts = [i for i in range(len(raw) + 1) if is_boundary(raw, i)]
    assert cuts == [len(text[:k].encode()) for k in range(len(text) + 1)]
    lo, hi = sorted(data.draw(st.lists(st.sampled_from(cuts), min_size=2, max_size=2)))
    start, end, first, last = slice_chunks(len(raw), lo, hi)
    assert (start, end, first) == (lo, hi, lo // BLOB_CHUNK)
    assert last == (min(hi, len(raw) - 1) // BLOB_CHUNK if raw else -1)  # -1: no chunk
    assert slice_text([raw], 0, start, end) == raw[lo:hi]


@given(st.text(alphabet="é€😀", min_size=1, max_size=10), st.data())
def test_slices_inside_a_character_are_refused(text: str, data: st.DataObject) -> None:
    raw = text.encode()
    inside = [i for i in range(len(raw)) if not is_boundary(raw, i)]
    pos = data.draw(st.sampled_from(inside))
    for lo, hi in ((pos, len(raw)), (0, pos)):
        with pytest.raises(RequestError, match="UTF-8"):
            slice_text([raw], 0, lo, hi)


@given(st.integers(0, 3 * BLOB_CHUNK), st.integers(0, 100), st.integers(1, 100))
def test_ranges_outside_the_text_are_refused(length: int, lo: int, past: int) -> None:
    # An end past the text's end reads to its end; a start past it is refused.
    assert slice_chunks(length, min(lo, length), length + past)[:2] == (min(lo, length), length)
    with pytest.raises(RequestError, match="past the end"):
        slice_chunks(length, length + past, length + past)
    if length:
        with pytest.raises(RequestError, match="after end"):
            slice_chunks(length, length, length - 1)
