"""Telha's model-free PDF layout pass against docling's layout-model pipeline on the corpus
PDFs whose model output docling publishes (its repository's
``tests/data/pdf/groundtruth/<name>.json``: DoclingDocuments made by the standard pipeline).

Per PDF: headings (docling: ``title`` and ``section_header`` items; Telha: heading blocks)
and how many of docling's Telha finds with the same text; paragraphs (docling: ``text``,
``list_item``, ``caption``, ``footnote`` … items that are not headings, page headers or
footers, nor inside a table or picture; Telha: paragraph and list-item blocks) and how many
of docling's Telha gives with exactly the same text; reading-order errors: over the blocks
found in both, the places where Telha's next block comes before its predecessor in docling's
order (descents of docling's positions read in Telha's order). Texts are compared on their
letters and digits only (docling puts a space before a colon after a bold run, Telha does
not), a numbered list item's number left out (docling keeps it as the item's marker).

Run: ``.venv/bin/python bench/pdf_compare.py GROUNDTRUTH_DIR`` (a checkout of
github.com/docling-project/docling: ``tests/data/pdf/groundtruth``); prints a markdown table.
"""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)
sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "workers"))

from tests.conftest import CORPUS

NAMES = ["multi_page", "2305.03393v1-pg9", "normal_4pages", "right_to_left_01"]
_HEADINGS = {"title", "section_header"}
_OUT = {"page_header", "page_footer", "picture", "table", "chart"}


def _key(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _docling(path: Path) -> list[tuple[str, str]]:
    """``(kind, key)`` of docling's text items in reading order."""
    from docling_core.types.doc import DoclingDocument, TextItem

    doc = DoclingDocument.model_validate_json(path.read_text(encoding="utf-8"))
    out = []
    for item, _level in doc.iterate_items():
        if not isinstance(item, TextItem) or item.label.value in _OUT:
            continue
        parent = item.parent.resolve(doc) if item.parent else None
        if parent is not None and getattr(parent, "label", None) in ("table", "picture"):
            continue
        kind = "heading" if item.label.value in _HEADINGS else "paragraph"
        out.append((kind, _key(item.text)))
    return [(k, t) for k, t in out if t]


def _telha(name: str) -> list[tuple[str, str]]:
    from docling_worker.convert import convert
    from docling_worker.pdf_blocks import _NUMBER, pdf_blocks

    blocks = pdf_blocks(convert(CORPUS / "pdf" / f"{name}.pdf", "pdf"))
    kinds = {"heading": "heading", "paragraph": "paragraph", "list_item": "paragraph"}
    out = []
    for b in blocks:
        # docling keeps a list item's number as its marker, not in its text: compare without.
        text = _NUMBER.sub("", b.text) if b.kind == "list_item" else b.text
        if b.kind in kinds and _key(text):
            out.append((kinds[b.kind], _key(text)))
    return out


def compare(name: str, groundtruth: Path) -> str:
    """One markdown table row for ``name``."""
    theirs = _docling(groundtruth / f"{name}.json")
    ours = _telha(name)
    position = {key: i for i, (_k, key) in enumerate(theirs)}
    heads = [k for kind, k in theirs if kind == "heading"]
    our_heads = {k for kind, k in ours if kind == "heading"}
    paras = [k for kind, k in theirs if kind == "paragraph"]
    our_paras = {k for kind, k in ours if kind == "paragraph"}
    order = [position[k] for _kind, k in ours if k in position]
    errors = sum(1 for a, b in pairwise(order) if b < a)
    return (
        f"| {name}.pdf | {len(heads)} | {sum(1 for k in ours if k[0] == 'heading')} "
        f"({sum(1 for k in heads if k in our_heads)} same) | {len(paras)} | "
        f"{sum(1 for k in ours if k[0] == 'paragraph')} "
        f"({sum(1 for k in paras if k in our_paras)} same) | {errors} of {len(order)} |"
    )


def main() -> int:
    """Print the comparison table for :data:`NAMES`."""
    groundtruth = Path(sys.argv[1])
    print(
        "| PDF | docling headings | Telha headings (same text) | docling paragraphs |"
        " Telha paragraphs (same text) | Telha reading-order errors (of blocks in both) |"
    )
    print("|---|---|---|---|---|---|")
    for name in NAMES:
        print(compare(name, groundtruth))
    return 0


if __name__ == "__main__":
    sys.exit(main())
