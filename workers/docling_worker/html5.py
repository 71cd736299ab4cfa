"""HTML as a browser reads it (docs/formats.md, "HTML"): the bytes are parsed by lexbor
(through selectolax), a WHATWG HTML5-conformant parser, and its tree is serialized back for
docling's HTML backend.

docling's backend parses with BeautifulSoup's ``html.parser``, which is not an HTML5 parser: a
malformed end tag such as ``</script language>`` never closes the script for it, so the
whole body is swallowed as script text (the corpus's ``html/testHTMLBadScript.html`` gave one
node and no text). The HTML5 algorithm ends a script at ``</script`` whatever follows, fixes
misnested and unclosed tags the way browsers do, and serializes a well-formed tree that
``html.parser`` reads as built.

Encoding: the bytes are decoded as docling decoded them (BeautifulSoup's ``UnicodeDammit``:
BOM, then ``<meta charset>``, then detection) and the serialization is written as UTF-8 with
a BOM, which that detector trusts before any ``<meta>``. Measured on the corpus's HTML:
lexbor adds about 15 ms to the 245 KB ``wiki_duck.html`` (html5lib, the pure-Python
alternative, took 530 ms); bench/RESULTS.md.
"""

from __future__ import annotations

import codecs
from typing import Any

from bs4 import UnicodeDammit
from selectolax.lexbor import LexborHTMLParser

from workers_common.warnings import Warnings

__all__ = ["LOST_SHARE", "body_text", "html5_bytes", "note_lost_body"]


def _decode(raw: bytes) -> str:
    decoded = UnicodeDammit(raw, is_html=True).unicode_markup
    return decoded if decoded is not None else raw.decode("utf-8", "replace")


def html5_bytes(raw: bytes) -> tuple[bytes, str]:
    """``(the document re-serialized from its HTML5 tree as UTF-8 with a BOM, the body's
    visible text)``; the text (whitespace folded) tells whether a projection lost the body."""
    tree = LexborHTMLParser(_decode(raw))
    html = tree.html or ""
    return codecs.BOM_UTF8 + html.encode("utf-8", "surrogatepass"), body_text(tree)


def body_text(tree: LexborHTMLParser) -> str:
    """The text a browser shows of ``tree``'s body (no script/style/template), whitespace
    folded to single spaces."""
    body = tree.body
    if body is None:
        return ""
    clone = LexborHTMLParser(body.html or "")
    clone.strip_tags(["script", "style", "template", "noscript"])
    node = clone.body
    return " ".join((node.text(separator=" ") if node is not None else "").split())


#: The projection lost the body when it holds less than this share of the characters (spaces
#: aside) of the body's visible text.
LOST_SHARE = 0.5


def note_lost_body(submission: dict[str, Any], raw: bytes) -> None:
    """Add an ``html_body_lost`` warning to ``submission["stats"]`` when its canonical text
    holds less than :data:`LOST_SHARE` of the visible body text of the HTML in ``raw``
    (docs/formats.md, "Warnings")."""
    shown = len(html5_bytes(raw)[1].replace(" ", ""))
    if shown == 0:
        return
    text = str(submission.get("canonicalText", "")).split()
    held = sum(len(w) for w in text)
    if held >= LOST_SHARE * shown:
        return
    stats = submission.setdefault("stats", {})
    found = Warnings.of(stats)
    found.add("html_body_lost", 1, f"the page shows {shown} characters; the text holds {held}")
    found.put(stats)
