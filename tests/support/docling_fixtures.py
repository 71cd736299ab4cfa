"""Golden DoclingDocuments for docling_worker's layout-model path (docs/formats.md: the parse
stack's models are not available here, so the fixtures are built with docling-core's own
constructors, as the layout pipeline would emit them: a title, nested headings, paragraphs
and list items with pages and bottom-left boxes in points, a table with a header row).

``python -m tests.support.docling_fixtures`` rewrites ``tests/golden/docling_fixtures/`` (review
the diff); the test checks the committed files equal what this module builds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from docling_core.types.doc import (
    BoundingBox,
    CoordOrigin,
    DoclingDocument,
    ProvenanceItem,
    Size,
    TableCell,
    TableData,
)

FOLDER = Path(__file__).resolve().parents[1] / "golden" / "docling_fixtures"
PAGE = Size(width=612, height=792)  # US Letter, points


def _prov(page: int, top: float, height: float = 14.0, left: float = 72.0) -> ProvenanceItem:
    """A box ``height`` points tall whose top is ``top`` points below the page's top edge,
    expressed bottom-left as PDF layout models report it."""
    box = BoundingBox(
        l=left, t=PAGE.height - top, r=540.0, b=PAGE.height - top - height,
        coord_origin=CoordOrigin.BOTTOMLEFT,
    )  # fmt: skip
    return ProvenanceItem(page_no=page, bbox=box, charspan=(0, 0))


def contract() -> DoclingDocument:
    """Two pages: a title, sections 1 / 1.1 / 2, paragraphs, a list and a table."""
    doc = DoclingDocument(name="contract")
    doc.add_page(page_no=1, size=PAGE)
    doc.add_page(page_no=2, size=PAGE)
    doc.add_title("Supply Agreement", prov=_prov(1, 60, 24))
    doc.add_heading("1. Scope", level=1, prov=_prov(1, 110))
    doc.add_text(label="text", text="The supplier delivers parts monthly.", prov=_prov(1, 130))
    doc.add_heading("1.1 Delivery", level=2, prov=_prov(1, 160))
    group = doc.add_list_group()
    doc.add_list_item("Within 5 days of an order.", parent=group, prov=_prov(1, 180))
    doc.add_list_item("To the buyer's warehouse.", parent=group, prov=_prov(1, 196))
    doc.add_heading("2. Prices", level=1, prov=_prov(2, 60))
    header = ["Part", "Price (EUR)"]
    rows = [header, ["Bolt", "0.12"], ["Nut", "0.05"]]
    cells = [
        TableCell(
            text=text,
            start_row_offset_idx=r,
            end_row_offset_idx=r + 1,
            start_col_offset_idx=c,
            end_col_offset_idx=c + 1,
            column_header=r == 0,
        )
        for r, row in enumerate(rows)
        for c, text in enumerate(row)
    ]
    doc.add_table(data=TableData(num_rows=3, num_cols=2, table_cells=cells), prov=_prov(2, 90, 60))
    doc.add_text(label="text", text="Signed on 1 March 2026.", prov=_prov(2, 170))
    doc.add_text(label="text", text="Effective 2026-04-01.", prov=_prov(2, 186))
    return doc


FIXTURES = {"contract": contract}


def build(name: str) -> str:
    """The JSON of fixture ``name`` (deterministic: sorted keys)."""
    return json.dumps(FIXTURES[name]().export_to_dict(), indent=1, sort_keys=True) + "\n"


def main() -> int:
    FOLDER.mkdir(parents=True, exist_ok=True)
    for name in FIXTURES:
        (FOLDER / f"{name}.json").write_text(build(name), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
