"""The empty-input rule, the same in every format (docs/formats.md, "Empty input").

Input is *empty* when it has no bytes, or only ASCII whitespace (space, tab, CR, LF, form
feed, vertical tab), optionally after a UTF-8 byte order mark. An empty input is not a
failure: the job completes with a version whose canonical text is empty, holding only the
format's root node (DOCUMENT, TABLE or WORKBOOK, MESSAGE, FILE) with its usual properties and
id, and ``stats.empty: true``. Binary formats (PDF, DOCX, PPTX, XLSX, MSG) follow the same
rule: zero bytes are "nothing sent", not a corrupt file.
"""

from __future__ import annotations

from workers_common.job import Job

__all__ = ["WHITESPACE", "is_empty"]

#: The bytes an empty input may consist of.
WHITESPACE = b" \t\r\n\f\v"
_BOM = b"\xef\xbb\xbf"
_CHUNK = 64 * 1024


def is_empty(job: Job) -> bool:
    """Whether the job's raw bytes are empty by the module's rule (reads until the first byte
    that is not whitespace, 64 KiB at a time)."""
    with job.open() as f:
        first = True
        while chunk := f.read(_CHUNK):
            if first and chunk.startswith(_BOM):
                chunk = chunk[len(_BOM) :]
            first = False
            if chunk.strip(WHITESPACE):
                return False
    return True
