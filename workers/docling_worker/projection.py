"""A DoclingDocument as a Telha submission (docs/formats.md).

**Nodes.** One ``DOCUMENT`` (``name``, ``format``, ``pages`` when known) whose span is the whole
canonical text (kind ``body``). A ``SECTION`` per title or section header (``title``,
``level``: 0 for a title, the header's level otherwise; HTML uses markdown's scale, 1 = top:
``<h1>`` is 1, ``<h2>`` 2, …), nested by level: a section is contained in the nearest open
section of a lower level. A ``PARAGRAPH`` per text block (``text``; ``label`` when docling's
label says more than plain text: ``list_item``, ``caption``, ``code``, …; ``list_level`` for
list items, 1 for a top-level list); the fragments of one docling inline group (text with
links or emphasis) are one PARAGRAPH, joined by single spaces (none before closing
punctuation), labelled as its first fragment. A ``TABLE`` per table (``columns``, ``rows``:
data rows) with one ``TABLE_ROW`` per data row whose cells are properties keyed by column name
(header rows give the names, several header rows joined by `` / ``; headerless or blank →
``col_<i>``, 1-based; duplicates → ``name_2``, …), typed per column the way CSV cells are
(:mod:`workers_common.cell_types`: int, float, bool, ISO dates; a cell that does not fit
keeps its text; empty → null), plus ``row`` (1-based). ``CONTAINS`` edges parent → child
carry ``ord`` (0-based, reading order per parent). Nodes docling places on a page carry
``page`` (1-based) and ``bbox`` ``[x0, y0, x1, y1]``: **top-left origin**, in the page's own
unit (PDF points; PPTX EMU).

**Native PDF** (model-free: :func:`_pdf`): the same shapes from the layout pass of
:mod:`docling_worker.pdf_blocks`, plus ``PAGE_HEADER``/``PAGE_FOOTER`` nodes (``text``,
``page``, ``bbox``; no span: not in the canonical text) and, for a block in several parts
(across columns or pages), ``boxes``: ``[{"page", "bbox"}, …]`` (``page``/``bbox``: the first).

**Canonical text** (NFC, LF): the blocks in reading order separated by one blank line; a
table is one block of lines, one per row (header rows first), cells joined by TAB. Spans: one
per block — ``heading`` (section), ``paragraph`` (text), ``table`` (the whole table, the TABLE
node's span) and ``cell`` (one per row line, the TABLE_ROW's span; header rows have a span but
no node). TABs and line breaks inside a cell or a text block's line become one space in the
canonical text only where they would break the block structure (cells: TAB/LF → space;
paragraphs keep their own line breaks, blank lines collapsed).

**Skipped.** Pictures, charts, formulas and footnotes are not projected; they are counted in
``stats.skipped`` (charts count as pictures: telling them apart takes docling's picture
classifier, a model this offline build does not run) and in ``stats.warnings``
(``pictures_skipped``; ``content_skipped`` for formulas and footnotes). A document whose only
content is skipped features fails as ``unsupported_feature`` naming the first such feature.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from docling_core.types.doc import (
    CoordOrigin,
    DocItem,
    DoclingDocument,
    InlineGroup,
    ListGroup,
    PictureItem,
    SectionHeaderItem,
    TableItem,
    TextItem,
    TitleItem,
)

from docling_worker.pdf_blocks import pdf_blocks
from workers_common import IngestionResultBuilder, UnsupportedFeature, normalize_canonical
from workers_common.cell_types import type_column
from workers_common.doc_ambiguity import Block, detect_document_ambiguity
from workers_common.warnings import Warnings

__all__ = ["project_document"]

_OCR_IMAGE_FORMATS = ("png", "jpeg", "tiff", "bmp", "webp")
_SKIPPED_TEXT_LABELS = {"footnote": "footnotes", "formula": "formulas"}
#: docling labels that say nothing beyond "a paragraph": not written as a ``label`` property.
_PLAIN_LABELS = frozenset({"text", "paragraph"})
_BLANK_LINES = re.compile(r"\n{2,}")
_CELL_BREAKS = re.compile(r"[\t\n]+")


@dataclass(slots=True)
class _Section:
    level: int
    ref: int
    children: int = 0


@dataclass(slots=True)
class _Build:
    """Accumulates text, spans, nodes and edges in reading order."""

    builder: IngestionResultBuilder = field(default_factory=IngestionResultBuilder)
    doc_ref: int = -1
    stack: list[_Section] = field(default_factory=list)
    doc_children: int = 0
    blocks: list[Block] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    #: ``[node index, href, text]`` of the items that carry a hyperlink (``links=True``).
    links: list[list[Any]] | None = None

    def separate(self) -> None:
        if self.builder.byte_length:
            self.builder.add_text("\n\n")

    def block_span(self, text: str, kind: str) -> int:
        self.separate()
        span = self.builder.add_span_text(text, kind)
        self.blocks.append(Block(text, span))
        return span

    def contain(self, child: int) -> None:
        """A ``CONTAINS`` edge from the current section (or the document) to ``child``."""
        if self.stack:
            parent = self.stack[-1]
            ordinal, parent.children = parent.children, parent.children + 1
            ref = parent.ref
        else:
            ordinal, self.doc_children = self.doc_children, self.doc_children + 1
            ref = self.doc_ref
        self.builder.add_relationship(
            "CONTAINS", from_ref=ref, to_ref=child, properties={"ord": ordinal}
        )

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def skip(self, feature: str) -> None:
        self.skipped[feature] = self.skipped.get(feature, 0) + 1

    def link(self, item: TextItem, ref: int, text: str) -> None:
        """Record ``item``'s hyperlink (as written in the source) on node ``ref``."""
        if self.links is not None and item.hyperlink is not None:
            self.links.append([ref, str(item.hyperlink), text])


def _geometry(doc: DoclingDocument, item: DocItem) -> dict[str, Any]:
    """``page`` and a top-left-origin ``bbox`` for an item docling placed on a page."""
    if not item.prov:
        return {}
    prov = item.prov[0]
    box = prov.bbox
    if box.coord_origin is not CoordOrigin.TOPLEFT:
        page = doc.pages.get(prov.page_no)
        if page is None:
            return {"page": prov.page_no}
        box = box.to_top_left_origin(page_height=page.size.height)
    return {"page": prov.page_no, "bbox": [round(v, 2) for v in (box.l, box.t, box.r, box.b)]}


def _list_level(doc: DoclingDocument, item: DocItem) -> int:
    level = 0
    parent = item.parent.resolve(doc) if item.parent else None
    while parent is not None:
        if isinstance(parent, ListGroup):
            level += 1
        parent = parent.parent.resolve(doc) if parent.parent else None
    return max(level, 1)


def _clean(text: str) -> str:
    return _BLANK_LINES.sub("\n", normalize_canonical(text)).strip()


def _cell(text: str) -> str:
    return _CELL_BREAKS.sub(" ", normalize_canonical(text)).strip()


def _column_names(header_rows: list[list[str]], width: int) -> list[str]:
    names: list[str] = []
    seen: dict[str, int] = {}
    for i in range(width):
        parts: list[str] = []
        for row in header_rows:
            if row[i] and row[i] not in parts:
                parts.append(row[i])
        name = " / ".join(parts) or f"col_{i + 1}"
        if name in seen:
            seen[name] += 1
            name = f"{name}_{seen[name]}"
        else:
            seen[name] = 1
        names.append(name)
    return names


def _table(b: _Build, doc: DoclingDocument, item: TableItem) -> None:
    grid = item.data.grid
    if not grid or not any(c.text.strip() for row in grid for c in row):
        return
    width = max(len(row) for row in grid)
    cells = [[_cell(c.text) for c in row] + [""] * (width - len(row)) for row in grid]
    headers = 0
    while (
        headers < len(grid)
        and all(c.column_header or not c.text.strip() for c in grid[headers])
        and any(c.column_header for c in grid[headers])
    ):
        headers += 1
    names = _column_names(cells[:headers], width)
    lines = ["\t".join(row) for row in cells]
    table_span = b.block_span("\n".join(lines), "table")
    start = b.builder.base_offset + b.builder.byte_length - len("\n".join(lines).encode())
    row_spans = []
    for line in lines:
        end = start + len(line.encode())
        row_spans.append(b.builder.add_span_range(start, end, "cell"))
        start = end + 1
    data_rows = len(grid) - headers
    props = {"columns": names, "rows": data_rows, **_geometry(doc, item)}
    table_ref = b.builder.add_node(["TABLE"], props, spans=[table_span])
    b.contain(table_ref)
    b.count("tables")
    columns = [
        type_column([cells[headers + k][i] for k in range(data_rows)])[1] for i in range(width)
    ]
    for k in range(data_rows):
        row_props: dict[str, Any] = {name: columns[i][k] for i, name in enumerate(names)}
        row_props["row"] = k + 1
        row_ref = b.builder.add_node(["TABLE_ROW"], row_props, spans=[row_spans[headers + k]])
        b.builder.add_relationship(
            "CONTAINS", from_ref=table_ref, to_ref=row_ref, properties={"ord": k}
        )


def _open_section(b: _Build, title: str, level: int, geometry: dict[str, Any]) -> None:
    """A SECTION block: closes open sections of the same or a deeper level, then nests."""
    span = b.block_span(title, "heading")
    while b.stack and b.stack[-1].level >= level:
        b.stack.pop()
    props = {"title": title, "level": level, **geometry}
    ref = b.builder.add_node(["SECTION"], props, spans=[span])
    b.contain(ref)
    b.stack.append(_Section(level, ref))
    b.count("sections")


def _add_paragraph(b: _Build, text: str, props: dict[str, Any]) -> int:
    """A PARAGRAPH block holding ``text`` (its span) and ``props`` besides ``text``; returns
    its node index."""
    span = b.block_span(text, "paragraph")
    ref = b.builder.add_node(["PARAGRAPH"], {"text": text, **props}, spans=[span])
    b.contain(ref)
    b.count("paragraphs")
    return ref


def _section(b: _Build, doc: DoclingDocument, item: TextItem, level: int) -> None:
    title = _cell(item.text)
    if title:
        _open_section(b, title, level, _geometry(doc, item))
        b.link(item, b.stack[-1].ref, title)


def _pdf(b: _Build, doc: DoclingDocument) -> None:
    """PDF text from the native pipeline: the model-free layout pass
    (:mod:`docling_worker.pdf_blocks`): headings open sections as docling's would, list items
    are labelled, running headers and footers are PAGE_HEADER/PAGE_FOOTER nodes outside the
    canonical text (no span), contained by the DOCUMENT after its body, in page order. A block
    in several parts (across columns or pages) has ``boxes``: ``[{"page", "bbox"}, …]``."""
    running: list[tuple[str, dict[str, Any]]] = []
    for block in pdf_blocks(doc):
        text = _cell(block.text)
        if not text:
            continue
        geometry: dict[str, Any] = {"page": block.page, "bbox": block.bbox}
        if len(block.parts) > 1:
            geometry["boxes"] = [{"page": page, "bbox": box} for page, box in block.parts]
        if block.kind == "heading":
            _open_section(b, text, block.level, geometry)
        elif block.kind in ("page_header", "page_footer"):
            running.append((block.kind.upper(), {"text": text, **geometry}))
        elif block.kind == "list_item":
            props = {"label": "list_item", "list_level": block.list_level, **geometry}
            _add_paragraph(b, text, props)
        else:
            _add_paragraph(b, text, geometry)
    for label, props in running:
        ref = b.builder.add_node([label], props)
        b.builder.add_relationship(
            "CONTAINS", from_ref=b.doc_ref, to_ref=ref, properties={"ord": b.doc_children}
        )
        b.doc_children += 1
    for _picture in doc.pictures:
        b.skip("pictures")


def _paragraph(b: _Build, doc: DoclingDocument, item: TextItem) -> None:
    text = _clean(item.text)
    if not text:
        return
    label = item.label.value
    props: dict[str, Any] = {} if label in _PLAIN_LABELS else {"label": label}
    if label == "list_item":
        props["list_level"] = _list_level(doc, item)
    b.link(item, _add_paragraph(b, text, {**props, **_geometry(doc, item)}), text)


@dataclass(slots=True)
class _InlineRun:
    """Consecutive text items of one docling inline group (a ``<p>`` with links or
    emphasis, a DOCX run of formatted text): one paragraph, not one per fragment."""

    items: list[TextItem]


def _plain_text(item: object) -> bool:
    return (
        isinstance(item, TextItem)
        and not isinstance(item, TitleItem | SectionHeaderItem)
        and item.label.value not in _SKIPPED_TEXT_LABELS
    )


def _items(doc: DoclingDocument) -> Iterator[object]:
    """``doc``'s items in reading order, with the plain text items of each inline group
    gathered into one :class:`_InlineRun`."""
    run: _InlineRun | None = None
    group: object = None
    for item, _level in doc.iterate_items():
        parent = item.parent.resolve(doc) if item.parent else None
        if _plain_text(item) and isinstance(parent, InlineGroup):
            assert isinstance(item, TextItem)
            if run is not None and parent is group:
                run.items.append(item)
                continue
            if run is not None:
                yield run
            run, group = _InlineRun([item]), parent
            continue
        if run is not None:
            yield run
            run, group = None, None
        yield item
    if run is not None:
        yield run


_NO_SPACE_BEFORE = frozenset(".,;:!?)]}%’”")
_NO_SPACE_AFTER = frozenset("([{‘“")


def _join_inline(parts: list[str]) -> str:
    """Fragments of one inline run as one line: a space between them, except before closing
    punctuation and after an opening bracket or quote."""
    out = ""
    for part in parts:
        if out and part[0] not in _NO_SPACE_BEFORE and out[-1] not in _NO_SPACE_AFTER:
            out += " "
        out += part
    return out


def _inline(b: _Build, doc: DoclingDocument, run: _InlineRun) -> None:
    parts = [(item, _clean(item.text)) for item in run.items]
    parts = [(item, text) for item, text in parts if text]
    if not parts:
        return
    first = parts[0][0]
    text = _join_inline([t for _item, t in parts])
    label = first.label.value
    props = {} if label in _PLAIN_LABELS else {"label": label}
    ref = _add_paragraph(b, text, {**props, **_geometry(doc, first)})
    for item, part in parts:
        b.link(item, ref, part)


def _project_item(b: _Build, doc: DoclingDocument, item: object, shift: int) -> None:
    """One item of :func:`_items` (reading order) into ``b``; ``shift`` is added to section
    levels (1 for HTML: docling's title is ``<h1>``)."""
    if isinstance(item, _InlineRun):
        _inline(b, doc, item)
    elif isinstance(item, TitleItem):
        _section(b, doc, item, shift)
    elif isinstance(item, SectionHeaderItem):
        _section(b, doc, item, int(item.level) + shift)
    elif isinstance(item, TableItem):
        _table(b, doc, item)
    elif isinstance(item, PictureItem):
        # Telling charts from other pictures takes docling's picture classifier, a model
        # this offline build does not run: every picture counts as one.
        b.skip("pictures")
    elif isinstance(item, TextItem):
        feature = _SKIPPED_TEXT_LABELS.get(item.label.value)
        if feature is not None:
            b.skip(feature)
        else:
            _paragraph(b, doc, item)


def _pdf_layout(pdf_pipeline: str, extractor: str | None) -> str:
    """``stats.pdf_layout``: ``rules`` (the model-free layout pass), ``models`` (docling's
    layout models) or ``none`` (pypdfium2's text, no geometry: :mod:`docling_worker.pdf_text`)."""
    if extractor == "pypdfium2":
        return "none"
    return "models" if pdf_pipeline == "layout" else "rules"


def project_document(
    doc: DoclingDocument,
    name: str,
    fmt: str,
    *,
    clarify: bool,
    pdf_pipeline: str = "native",
    links: bool = False,
    extractor: str | None = None,
) -> dict[str, Any]:
    """The single submission for ``doc`` (module docstring), with ``stats``: ``sections``,
    ``paragraphs``, ``tables``, ``skipped`` (per feature), ``pages``, for PDFs
    ``pdf_pipeline`` (``native``: lines grouped by :mod:`docling_worker.pdf_blocks`;
    ``layout``: docling's items as they are) and ``pdf_extractor`` (``docling-parse``, or
    ``pypdfium2`` when ``extractor`` says :mod:`docling_worker.pdf_text` read it, its text
    projected as the layout path does), ``pdf_layout`` (``rules``, ``models`` or ``none``:
    :func:`_pdf_layout`) and the ambiguity counters of the document rules
    (``options.clarify``). With ``links`` the dict also holds ``"links"``: ``[node index, href,
    text]`` for each SECTION/PARAGRAPH whose item carries a hyperlink, href as written in the
    source (not resolved), in reading order — for ``web_worker``, which removes the key
    before submitting.

    :raises UnsupportedFeature: the document holds nothing but skipped features
        (``pictures: …``, ``charts: …``, ``formulas: …``, ``footnotes: …``).
    """
    b = _Build(links=[] if links else None)
    # The DOCUMENT node's span covers the whole text: added once the text is complete.
    pending_doc: dict[str, Any] = {"name": name, "format": fmt}
    if doc.pages:
        pending_doc["pages"] = len(doc.pages)
    b.doc_ref = b.builder.add_node(["DOCUMENT"], pending_doc)
    # U+0000 is dropped from every text and cell (normalize_canonical); count what was there.
    nul = sum(t.text.count("\x00") for t in doc.texts)
    nul += sum(c.text.count("\x00") for t in doc.tables for c in t.data.table_cells)
    b.builder.count_nul(nul)
    # OCR'd images are pages of lines like a native PDF's (docling_worker.ocr).
    native_pdf = (
        (fmt == "pdf" and pdf_pipeline == "native") or fmt in _OCR_IMAGE_FORMATS
    ) and extractor != "pypdfium2"
    if native_pdf:
        _pdf(b, doc)
    shift = 1 if fmt == "html" else 0  # HTML: markdown's scale, <h1> = 1
    for item in [] if native_pdf else _items(doc):
        _project_item(b, doc, item, shift)
    total = b.builder.byte_length
    if not b.blocks and b.skipped:
        feature = sorted(b.skipped)[0]
        raise UnsupportedFeature(f"{feature}: the document holds only {feature} (not projected)")
    b.builder.attach_span(b.doc_ref, b.builder.add_span_range(0, total, "body"))
    found = detect_document_ambiguity(b.blocks, total, clarify=clarify)
    if found.ambiguity is not None:
        amb = found.ambiguity
        b.builder.add_ambiguity(
            amb["nodeRef"],
            amb["kind"],
            amb["candidates"],
            amb["detectorConfidence"],
            amb["appliedCandidateConfidence"],
        )
    warnings = Warnings()
    warnings.add("pictures_skipped", b.skipped.get("pictures", 0), "pictures are not projected")
    other = sum(n for k, n in b.skipped.items() if k != "pictures")
    warnings.add("content_skipped", other, ", ".join(sorted(set(b.skipped) - {"pictures"})))
    b.builder.set_stats(
        {
            "sections": b.counts.get("sections", 0),
            "paragraphs": b.counts.get("paragraphs", 0),
            "tables": b.counts.get("tables", 0),
            "skipped": dict(sorted(b.skipped.items())),
            "pages": len(doc.pages),
            "bytes": total,
            **({"pdf_pipeline": pdf_pipeline} if fmt == "pdf" else {}),
            **({"pdf_layout": _pdf_layout(pdf_pipeline, extractor)} if fmt == "pdf" else {}),
            **({"pdf_extractor": extractor or "docling-parse"} if fmt == "pdf" else {}),
            **found.stats,
            **({"warnings": warnings.as_list()} if warnings else {}),
        }
    )
    out = b.builder.build()
    if b.links is not None:
        out["links"] = b.links
    return out
