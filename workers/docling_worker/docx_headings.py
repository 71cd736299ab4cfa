"""DOCX headings docling's Word backend does not see, made visible before conversion.

docling takes a paragraph for a heading from its style: a style whose id or name says
``heading`` (English built-in names, which Word writes whatever its UI language), or whose own
definition carries ``w:outlineLvl``. Two kinds of headings escape that rule, and Word shows
both in its navigation pane:

* a paragraph whose outline level is set on the paragraph itself (``w:pPr/w:outlineLvl``,
  0-8: direct formatting, which wins over the style);
* a paragraph whose style is a localized heading style: named ``Überschrift 1``, ``Titre 2``,
  ``Kop 3``, … (:data:`LOCALIZED`), or inheriting its outline level through ``w:basedOn``.

:func:`expose_headings` rewrites such a package into a copy whose paragraphs point at an added
style ``TelhaHeading<N>`` (a heading of level N = outline level + 1) and leaves every other
part untouched; a document without such paragraphs is not copied. Any XML it cannot read
leaves the file to docling as it is (docling then decides what is corrupt).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from lxml import etree  # type: ignore[import-untyped]  # docling's own dependency

__all__ = ["LOCALIZED", "expose_headings"]

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_NS = {"w": _W}
_VAL = f"{{{_W}}}val"
#: Localized names of the built-in "heading N" styles (case-insensitive, then the level).
LOCALIZED = re.compile(
    r"^(?:überschrift|titre|kop|encabezado|título|titulo|titolo|nagłówek|nadpis|címsor"
    r"|başlık|rubrik|overskrift|otsikko|pealkiri|antraštė|virsraksts|naslov|заглавие"
    r"|заголовок|επικεφαλίδα|כותרת|عنوان|見出し|标题|標題|제목)\s*([1-9])$",
    re.IGNORECASE,
)
_MAX_CHAIN = 16


def _outline(ppr: etree._Element | None) -> int | None:
    """The 0-based outline level 0-8 in a ``w:pPr`` (9 is body text: ``None``)."""
    if ppr is None:
        return None
    found = ppr.find("w:outlineLvl", _NS)
    if found is None:
        return None
    try:
        level = int(found.get(_VAL, ""))
    except ValueError:
        return None
    return level if 0 <= level <= 8 else None


class _Styles:
    """Paragraph styles by id: their name, ``basedOn`` and own outline level."""

    def __init__(self, root: etree._Element) -> None:
        self.root = root
        self.styles: dict[str, tuple[str, str | None, int | None]] = {}
        for style in root.findall("w:style", _NS):
            sid = style.get(f"{{{_W}}}styleId") or ""
            name_el = style.find("w:name", _NS)
            based = style.find("w:basedOn", _NS)
            self.styles[sid] = (
                (name_el.get(_VAL, "") if name_el is not None else "").strip(),
                based.get(_VAL) if based is not None else None,
                _outline(style.find("w:pPr", _NS)),
            )

    def seen_by_docling(self, sid: str) -> bool:
        """Whether docling already takes paragraphs of this style for headings (or titles)."""
        name, based, own = self.styles.get(sid, ("", None, None))
        words = [sid, name, based or "", self.styles.get(based or "", ("",))[0]]
        return own is not None or any(
            ("heading" in w.lower() or "title" in w.lower()) for w in words
        )

    def level(self, sid: str) -> int | None:
        """The heading level (1-9) the style gives, through its ``basedOn`` chain."""
        for _ in range(_MAX_CHAIN):
            if sid not in self.styles:
                return None
            name, based, own = self.styles[sid]
            if own is not None:
                return own + 1
            found = LOCALIZED.match(name)
            if found:
                return int(found.group(1))
            if based is None:
                return None
            sid = based
        return None

    def add_heading(self, level: int) -> str:
        sid = f"TelhaHeading{level}"
        if sid not in self.styles:
            style = etree.SubElement(self.root, f"{{{_W}}}style")
            style.set(f"{{{_W}}}type", "paragraph")
            style.set(f"{{{_W}}}customStyle", "1")
            style.set(f"{{{_W}}}styleId", sid)
            etree.SubElement(style, f"{{{_W}}}name").set(_VAL, f"Telha Heading {level}")
            ppr = etree.SubElement(style, f"{{{_W}}}pPr")
            etree.SubElement(ppr, f"{{{_W}}}outlineLvl").set(_VAL, str(level - 1))
            self.styles[sid] = (f"Telha Heading {level}", None, level - 1)
        return sid


def _retarget(document: etree._Element, styles: _Styles) -> int:
    """Point each hidden heading paragraph at a ``TelhaHeading<N>`` style; returns how many."""
    changed = 0
    for para in document.iter(f"{{{_W}}}p"):
        ppr = para.find("w:pPr", _NS)
        style_el = ppr.find("w:pStyle", _NS) if ppr is not None else None
        sid = style_el.get(_VAL, "") if style_el is not None else ""
        direct = _outline(ppr)
        if direct is not None:
            level = direct + 1
        elif sid and not styles.seen_by_docling(sid):
            level = styles.level(sid) or 0
        else:
            continue
        if not level:
            continue
        if ppr is None:
            ppr = etree.Element(f"{{{_W}}}pPr")
            para.insert(0, ppr)
        if style_el is None:
            style_el = etree.Element(f"{{{_W}}}pStyle")
            ppr.insert(0, style_el)
        style_el.set(_VAL, styles.add_heading(level))
        changed += 1
    return changed


def expose_headings(path: Path, folder: Path) -> Path | None:
    """A copy of the DOCX at ``path`` in ``folder`` with its hidden headings exposed (module
    docstring), or ``None`` when it has none or cannot be read that far."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            if "word/document.xml" not in names or "word/styles.xml" not in names:
                return None
            parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
            document = etree.fromstring(zf.read("word/document.xml"), parser)
            styles = _Styles(etree.fromstring(zf.read("word/styles.xml"), parser))
            if not _retarget(document, styles):
                return None
            out = folder / "headings.docx"
            rewritten = {"word/document.xml": document, "word/styles.xml": styles.root}
            with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
                for info in zf.infolist():
                    root = rewritten.get(info.filename)
                    if root is None:
                        dst.writestr(info, zf.read(info.filename))
                        continue
                    xml = etree.tostring(
                        root, xml_declaration=True, encoding="UTF-8", standalone=True
                    )
                    dst.writestr(info, xml)
            return out
    except (zipfile.BadZipFile, etree.XMLSyntaxError, KeyError, ValueError, OSError, EOFError):
        return None
