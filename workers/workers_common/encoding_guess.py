"""Guessing the encoding of legacy (non-UTF-8, BOM-less) text (docs/formats.md, "Character
encodings").

chardet 7 guesses from a sample, restricted to the encodings text files are written in
today and in the legacy ISO/Windows code pages (``MODERN_WEB | LEGACY_ISO``: no Mac, DOS or
EBCDIC code pages, which otherwise win on short Western text). Measured on short legacy CSVs
in eleven languages and the corpus's legacy files (``bench/encoding_detect.py``, figures in
bench/RESULTS.md): 19 of 20 read right, where charset-normalizer read 15 (it takes the Greek
``csv/table-infer-iso-8859-7.csv`` for Bulgarian cp1251).

**Confidence** (``stats.encoding_confidence``, 0–1, 3 digits): chardet scores every candidate;
its raw score is relative (right guesses on short text score 0.03–0.35), so the confidence is
the share of the candidates' total score held by those that decode the sample to the same
text as the guess (cp1253 and ISO-8859-7 agree on Greek letters; a guess is only as doubtful
as the *different* readings around it). Measured: the one wrong guess of the bench scores
0.299; right ones 0.15–1.0, 0.626 for the Greek corpus file. Below :data:`LOW_CONFIDENCE` the
worker adds an ``encoding_guessed`` warning (:mod:`workers_common.warnings`).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

import chardet
from chardet import EncodingEra

__all__ = ["LOW_CONFIDENCE", "SAMPLE_BYTES", "Guess", "guess_encoding"]

#: Bytes given to the detector (a sample: the rest of the file is decoded, not judged).
SAMPLE_BYTES = 64 * 1024
#: A guess below this confidence gets an ``encoding_guessed`` warning.
LOW_CONFIDENCE = 0.5
_ERA = EncodingEra.MODERN_WEB | EncodingEra.LEGACY_ISO


@dataclass(frozen=True, slots=True)
class Guess:
    """:ivar encoding: a Python codec name. :ivar confidence: 0–1, 3 digits."""

    encoding: str
    confidence: float

    @property
    def doubtful(self) -> bool:
        """Below :data:`LOW_CONFIDENCE`."""
        return self.confidence < LOW_CONFIDENCE

    def note(self) -> str:
        """The warning's words: ``"read as iso8859-7 with confidence 0.121"``."""
        return f"read as {self.encoding} with confidence {self.confidence}"


def _reading(sample: bytes, name: str | None) -> str | None:
    """``sample`` decoded as ``name`` (a multibyte character cut at the end is left out),
    ``None`` when Python lacks the codec or the bytes do not fit it."""
    try:
        decoder = codecs.getincrementaldecoder(codecs.lookup(name or "").name)()
        return str(decoder.decode(sample, final=False))
    except (LookupError, UnicodeDecodeError):
        return None


def guess_encoding(sample: bytes) -> Guess | None:
    """The likeliest encoding of ``sample`` (at most :data:`SAMPLE_BYTES` are looked at) with
    its confidence (module docstring); ``None`` when no encoding Python knows fits."""
    sample = sample[:SAMPLE_BYTES]
    found = chardet.detect_all(sample, encoding_era=_ERA)
    readings = [(c, _reading(sample, c.get("encoding"))) for c in found]
    usable = [(c, text) for c, text in readings if text is not None]
    if not usable:
        return None
    top, text = usable[0]
    total = sum(float(c.get("confidence") or 0.0) for c, _ in usable)
    same = sum(float(c.get("confidence") or 0.0) for c, t in usable if t == text)
    confidence = round(same / total, 3) if total > 0 else 0.0
    return Guess(codecs.lookup(str(top["encoding"])).name, confidence)
