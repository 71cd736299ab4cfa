"""Identity and transaction time (docs/architecture.md, "Identity, versions and provenance")."""

from __future__ import annotations

import itertools
import uuid

import blake3
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from telha.domain.ids import TxClock, blob_id_for, content_hash, new_id, source_id_for


def test_source_id_is_xxh3_128_of_prefixed_name() -> None:
    expected = uuid.UUID(int=xxhash.xxh3_128_intdigest(b"src:risks-2026-07.json"))
    assert source_id_for("risks-2026-07.json") == expected
    assert source_id_for("é") == uuid.UUID(int=xxhash.xxh3_128_intdigest("src:é".encode()))


def test_hashes() -> None:
    big = bytes(range(256)) * 10_000
    assert content_hash(big) == blake3.blake3(big).digest()
    assert content_hash(b"") == blake3.blake3(b"").digest()
    assert blob_id_for(content_hash(b"x")).bytes == content_hash(b"x")[:16]


def test_new_ids_are_time_ordered_v7() -> None:
    ids = [new_id() for _ in range(1000)]
    assert uuid.UUID(bytes=ids[0]).version == 7
    assert len(set(ids)) == 1000


@given(st.lists(st.integers(0, 2**62), max_size=20))
def test_tx_clock_strictly_increasing_even_when_started_in_the_future(starts: list[int]) -> None:
    for start in starts:
        clock = TxClock(start)
        seen = [clock.next() for _ in range(50)]
        assert seen[0] > start
        assert all(a < b for a, b in itertools.pairwise(seen))
        assert clock.last == seen[-1]
