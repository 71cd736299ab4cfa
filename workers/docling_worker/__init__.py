"""``docling_worker``: PDF, DOCX, PPTX and HTML through docling (spec 003; issue 5).

**Status: first increment.** Conversion (:mod:`docling_worker.convert`) and the projection
(:mod:`docling_worker.projection`, with the spec 003 §15 ambiguity rules of
:mod:`workers_common.doc_ambiguity`) are in place and tested on the corpus. Not yet: parsing
in isolated child processes (RLIMIT_AS, timeouts, a warm pool), PDF block building from line
geometry (PDF text is one PARAGRAPH per line today), streaming large submissions, the golden
fixtures and ``bench/docling.py``. Until the isolation lands this module is **not** in the
default ``[workers] in_process`` list: a hostile document could take the server's memory.

One submission per document; ``stats`` as :func:`docling_worker.projection.project_document`
gives them. Options: ``clarify`` (report temporal ambiguities). Deterministic: the same bytes
give the same submission.
"""

from __future__ import annotations

from typing import Any

from docling_worker.convert import convert
from docling_worker.projection import project_document
from workers_common import Job, UnsupportedFeature

__all__ = ["FORMATS", "handle"]

FORMATS = ("pdf", "docx", "pptx", "html")
_OPTIONS = frozenset({"clarify"})


def handle(job: Job) -> dict[str, Any]:
    """Convert and project one document job.

    :raises UnsupportedFeature: an unknown option, encrypted input, a PDF without text, a
        document of nothing but pictures/charts/formulas/footnotes.
    :raises CorruptInput: docling cannot read the file.
    :raises ResourceLimit: over the page limit.
    """
    unknown = sorted(set(job.options) - _OPTIONS)
    if unknown:
        raise UnsupportedFeature(f"option: unknown option(s) {', '.join(unknown)}")
    with job.local_path() as path:
        doc = convert(path, job.format)
    return project_document(doc, job.name, job.format, clarify=bool(job.options.get("clarify")))
