"""Charset detectors compared on legacy-encoded text (docs/formats.md, "Character encodings").

Each case is a short CSV-like text in one language, encoded in a legacy code page, plus the
corpus's legacy files; a detector scores a case when its guess decodes the bytes to the
original text (two codecs that decode a case alike both count). ``workers_common`` is the
worker's detector (:func:`workers_common.encoding_guess.guess_encoding`: chardet restricted to
modern and legacy ISO/Windows encodings) with its confidence per case; the last line times it
on a 64 KiB legacy sample (median of 5). Run:
``PYTHONPATH=.:workers python bench/encoding_detect.py`` (one line per detector and its misses).
"""

from __future__ import annotations

import codecs
import statistics
import sys
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
TEXTS = {
    "el": "id,όνομα,πόλη\n1,Λεωνίδας,Αθήνα\n2,Ελευθερία,Θεσσαλονίκη\n3,Μαρία,Πάτρα\n",
    "ru": "id,имя,город\n1,Иван Петров,Москва\n2,Ольга Смирнова,Санкт-Петербург\n",
    "fr": "id,nom,ville\n1,Élodie Lefèvre,Besançon\n2,François Gaël,Orléans\n3,Noël,Créteil\n",
    "de": "id,Name,Straße\n1,Jürgen Müller,Königstraße 5\n2,Björn Größe,Übersee\n",
    "pl": "id,imię,miasto\n1,Zażółć gęślą jaźń,Łódź\n2,Wojciech Świątek,Gdańsk\n",
    "tr": "id,ad,şehir\n1,Ağrı Dağı,İstanbul\n2,Gülşen Öztürk,Eskişehir\n",
    "he": "id,שם,עיר\n1,דוד כהן,ירושלים\n2,שרה לוי,תל אביב\n",
    "ar": "id,الاسم,المدينة\n1,محمد علي,القاهرة\n2,فاطمة حسن,الإسكندرية\n",
    "ja": "id,名前,都市\n1,山田太郎,東京\n2,佐藤花子,大阪\n3,鈴木一郎,名古屋\n",
    "zh": "id,姓名,城市\n1,张伟,北京\n2,王芳,上海\n3,李娜,广州\n",
    "ko": "id,이름,도시\n1,김철수,서울\n2,이영희,부산\n",
}
CASES = [
    ("el", "iso-8859-7"), ("el", "cp1253"), ("ru", "cp1251"), ("ru", "koi8-r"),
    ("fr", "cp1252"), ("de", "cp1252"), ("de", "latin-1"), ("pl", "cp1250"),
    ("pl", "iso-8859-2"), ("tr", "cp1254"), ("he", "cp1255"), ("ar", "cp1256"),
    ("ja", "shift_jis"), ("ja", "euc-jp"), ("zh", "gb2312"), ("ko", "euc-kr"),
]  # fmt: skip
FILES = [  # corpus file, its true codec
    ("csv/table-infer-iso-8859-7.csv", "iso-8859-7"),
    ("csv/latin1.csv", "latin-1"),
    ("csv/foods1_latin1.csv", "latin-1"),
    ("html/testArabicMisleadingCharset.html", "cp1256"),
]


def _cn(data: bytes) -> str | None:
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    return best.encoding if best else None


def _chardet(data: bytes) -> str | None:
    import chardet

    return chardet.detect(data)["encoding"]


def _worker(data: bytes) -> str | None:
    from workers_common.encoding_guess import guess_encoding

    guess = guess_encoding(data)
    return guess.encoding if guess else None


def _decodes_alike(data: bytes, guess: str | None, truth: str) -> bool:
    if guess is None:
        return False
    try:
        return data.decode(codecs.lookup(guess).name) == data.decode(truth)
    except (LookupError, UnicodeDecodeError):
        return False


def main() -> None:
    samples = [(f"{lang}/{enc}", TEXTS[lang].encode(enc), enc) for lang, enc in CASES]
    samples += [(rel, (CORPUS / rel).read_bytes(), enc) for rel, enc in FILES]
    detectors = (("charset-normalizer", _cn), ("chardet", _chardet), ("workers_common", _worker))
    for name, detect in detectors:
        misses = [
            f"{case}→{guess}"
            for case, data, truth in samples
            if not _decodes_alike(data, guess := detect(data), truth)
        ]
        print(f"{name}: {len(samples) - len(misses)}/{len(samples)} right; misses: {misses}")
    from workers_common.encoding_guess import guess_encoding

    confidences = {case: getattr(guess_encoding(data), "confidence", None)
                   for case, data, _ in samples}  # fmt: skip
    print("workers_common confidence:", confidences)
    sample = (TEXTS["el"] * 2000).encode("iso-8859-7")[: 64 * 1024]
    times = []
    for _ in range(5):
        start = time.perf_counter()
        guess_encoding(sample)
        times.append(time.perf_counter() - start)
    print(f"guess_encoding on 64 KiB: {statistics.median(times) * 1000:.1f} ms (median of 5)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
