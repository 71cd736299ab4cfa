"""A seeded mutator for the per-format fuzzer (docs/testing.md, "The fuzzer").

:func:`mutants` turns seed files into a deterministic stream of mutants: byte flips,
truncation, splices of two seeds, repeated and deleted sections, swapped encodings and
inserted troublemakers (NUL, lone CR, quotes, BOMs, deep nesting). A ZIP-based seed (DOCX,
XLSX, PPTX) is mutated inside as well: one member's bytes get the same treatment and the
package is written again, so mutants reach the XML parsers and not only the ZIP reader.
"""

from __future__ import annotations

import io
import random
import zipfile
from collections.abc import Iterator

__all__ = ["mutants", "mutate"]

_TROUBLE = [
    b"\x00", b"\r", b"\r\n", b'"', b"'", b"\t", b"\xef\xbb\xbf", b"\xff\xfe", b"\xe9",
    b"\xc3", b"\xf0\x9f\x98", b"((((((((((((((((((((", b"<" * 20, b"[" * 50, b"#" * 7,
    b"\\", b"=?utf-8?q?=E9?=", b"charset=uft-8", b"%PDF-", b"\n\n\n", b"9" * 40,
]  # fmt: skip
_ENCODINGS = ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "cp1252", "utf-7"]


def _flip(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8) if rng.random() < 0.7 else rng.randrange(256)
    return bytes(buf)


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def _repeat(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data))
    j = min(len(data), i + rng.randint(1, 4096))
    return data[:j] + data[i:j] * rng.randint(1, 20) + data[j:]


def _delete(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data))
    return data[:i] + data[min(len(data), i + rng.randint(1, 2048)) :]


def _insert(rng: random.Random, data: bytes) -> bytes:
    out = data
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(out) + 1)
        out = out[:i] + rng.choice(_TROUBLE) * rng.randint(1, 3) + out[i:]
    return out


def _encoding(rng: random.Random, data: bytes) -> bytes:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.encode(rng.choice(_ENCODINGS), errors="replace")


_OPS = [_flip, _truncate, _repeat, _delete, _insert, _encoding]


def _inside_zip(rng: random.Random, data: bytes) -> bytes | None:
    """The package with one member mutated, or ``None`` when ``data`` is not a ZIP."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as src:
            infos = [i for i in src.infolist() if i.file_size]
            if not infos:
                return None
            target = rng.choice(infos)
            out = io.BytesIO()
            with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
                for info in src.infolist():
                    body = src.read(info)
                    if info is target:
                        body = rng.choice(_OPS[:5])(rng, body) if body else body
                    dst.writestr(info.filename, body)
            return out.getvalue()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
        return None


def mutate(rng: random.Random, data: bytes, other: bytes) -> bytes:
    """One mutant of ``data`` (``other``: another seed of the format, for splices)."""
    if not data:
        return rng.choice(_TROUBLE)
    if data[:2] == b"PK" and rng.random() < 0.6:
        inner = _inside_zip(rng, data)
        if inner is not None:
            return inner
    if other and rng.random() < 0.15:
        return data[: rng.randrange(len(data))] + other[rng.randrange(len(other)) :]
    out = rng.choice(_OPS)(rng, data)
    if out and rng.random() < 0.3:  # sometimes a second step
        out = rng.choice(_OPS[:5])(rng, out)
    return out


def mutants(seeds: list[bytes], count: int, seed: int) -> Iterator[tuple[int, bytes]]:
    """``count`` mutants ``(index of the seed file, bytes)`` of ``seeds``, the same for the
    same ``seed``."""
    rng = random.Random(seed)
    for _ in range(count):
        k = rng.randrange(len(seeds))
        other = seeds[rng.randrange(len(seeds))]
        yield k, mutate(rng, seeds[k], other)
