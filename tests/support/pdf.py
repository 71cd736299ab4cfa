"""Small PDFs written by hand for tests: objects in order, a correct cross-reference table."""

from __future__ import annotations

__all__ = ["FONTS", "assemble_pdf", "text_pdf"]


def assemble_pdf(objects: list[bytes]) -> bytes:
    """A PDF 1.4 file of ``objects`` (the bodies of objects 1, 2, …; object 1 is the
    catalog), with the byte offsets of its cross-reference table computed."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


#: Fonts of :func:`text_pdf`: the standard 14 (no embedded font program, metrics built in).
FONTS = {"F1": "Courier", "F2": "Courier-Bold", "F3": "Symbol"}


def _escape(text: str) -> bytes:
    raw = text.encode("latin-1")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def text_pdf(pages: list[list[tuple[str, float, float, float, str]]]) -> bytes:
    """A PDF of US-letter pages (612 x 792 points) whose text is placed exactly: each page a
    list of ``(font, size, x, y, text)`` (font a key of :data:`FONTS`; ``x``, ``y`` the
    baseline start in PDF points, bottom-left origin; ``text`` Latin-1, or for ``F3`` the
    Symbol font's own codes, e.g. ``"\\xb7"`` for its bullet)."""
    fonts = b" ".join(
        b"/%s << /Type /Font /Subtype /Type1 /BaseFont /%s >>" % (k.encode(), v.encode())
        for k, v in FONTS.items()
    )
    n = len(pages)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = b" ".join(b"%d 0 R" % (3 + 2 * i) for i in range(n))
    objects.append(b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n))
    for i, runs in enumerate(pages):
        stream = b"".join(
            b"BT /%s %g Tf %g %g Td (%s) Tj ET\n" % (f.encode(), size, x, y, _escape(text))
            for f, size, x, y, text in runs
        )
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << %s >> >> /Contents %d 0 R >>" % (fonts, 4 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    return assemble_pdf(objects)
