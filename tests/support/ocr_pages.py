"""Page images of corpus text for the OCR tests and bench: prose from a corpus PDF's text
layer, drawn with Pillow's bundled scalable font (no system font needed), at a given
resolution, optionally turned or noisy; and the character error rate of a reading.

Everything is made at test time into the caller's folders; nothing is stored in the repo.
"""

from __future__ import annotations

import random
import re
from functools import cache

import pypdfium2
from PIL import Image, ImageDraw, ImageFont

from tests.conftest import CORPUS

__all__ = ["cer", "corpus_words", "edit_distance", "normalise", "render_page"]

_SPACES = re.compile(r"\s+")


@cache
def corpus_words() -> tuple[str, ...]:
    """The words of ``pdf/multi_page.pdf``'s text layer (ASCII prose), in order."""
    pdf = pypdfium2.PdfDocument(str(CORPUS / "pdf" / "multi_page.pdf"))
    try:
        text = " ".join(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))
    finally:
        pdf.close()
    ascii_text = text.encode("ascii", "ignore").decode()
    return tuple(ascii_text.split())


def normalise(text: str) -> str:
    """Whitespace runs as one space, ends stripped (line breaks are layout, not text)."""
    return _SPACES.sub(" ", text).strip()


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions of one character)."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def cer(expected: str, read: str) -> float:
    """Character error rate of ``read`` against ``expected``: edit distance / length, both
    :func:`normalise`-d."""
    want, got = normalise(expected), normalise(read)
    return edit_distance(want, got) / max(len(want), 1)


def _wrap(words: list[str], font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in words:
        candidate = f"{line} {word}" if line else word
        if line and font.getlength(candidate) > width:
            lines.append(line)
            line = word
        else:
            line = candidate
    if line:
        lines.append(line)
    return lines


def render_page(
    words: list[str],
    dpi: int = 300,
    *,
    rotate: int = 0,
    noise: float = 0.0,
    seed: int = 7,
    point_size: float = 12.0,
) -> tuple[Image.Image, str]:
    """A US-letter-width page (8.5 in, 1 in margins) of ``words`` in black on white at
    ``dpi``, ``point_size`` type; turned ``rotate`` degrees counter-clockwise; with
    ``noise``: that share of pixels flipped to a random grey (seeded). Returns the image and
    the text drawn (lines joined by spaces)."""
    font = ImageFont.load_default(size=point_size * dpi / 72)
    assert isinstance(font, ImageFont.FreeTypeFont)
    margin = dpi
    width = int(8.5 * dpi)
    lines = _wrap(words, font, width - 2 * margin)
    step = int(point_size * 1.5 * dpi / 72)
    height = max(int(11 * dpi), 2 * margin + step * len(lines))
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((margin, margin + i * step), line, fill=0, font=font)
    if noise:
        rng = random.Random(seed)
        pixels = image.load()
        assert pixels is not None
        for _ in range(int(noise * width * height)):
            pixels[rng.randrange(width), rng.randrange(height)] = rng.randrange(256)
    if rotate:
        image = image.rotate(rotate, expand=True, fillcolor=255)
    image.info["dpi"] = (dpi, dpi)
    return image, " ".join(lines)
