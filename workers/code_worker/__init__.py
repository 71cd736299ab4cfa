"""``code_worker``: source files through tree-sitter (format ``code``; docs/formats.md). An archive
(``.zip``, ``.tar``, ``.tar.gz``, …) fans out into one child job per source file under a
``MANIFEST`` node: :mod:`code_worker.archive`.

Languages: Python, Rust, JavaScript, TypeScript (and TSX), Go, C# and C++, from the
individual pre-built grammar packages (:mod:`code_worker.languages`); chosen by
``options.language`` or the file extension of the job's name.

**Projection.** Canonical text is the normalized source (NFC, LF). A ``FILE`` node (id: uuid5 of
``options.repo`` + the path — ``options.path``, else the job's name — so a re-ingest of the
same file upserts; ``path``, ``language``,
``lines``) whose span is the whole text (kind ``code``). One node per definition — ``FUNCTION``,
``METHOD`` (a function directly inside a class/impl/trait), ``CLASS``, ``STRUCT``, ``ENUM``,
``TRAIT``, ``IMPL``, ``INTERFACE``, ``MODULE`` (Rust ``mod foo { … }``, TypeScript, C# and
C++ namespaces: :mod:`code_worker.languages`) — with ``name``,
``qualified_name`` (enclosing names joined by ``.``), ``start_line``/``end_line`` (1-based) and a
span of kind ``code`` over the definition (decorators included; a decorated Python definition
also has ``decorators``, the decorator expressions as written without ``@``, in order);
``CONTAINS`` edges for nesting (file → top level, definition → nested definition, also inside
a Rust inline ``mod util { … }`` or a namespace, at any depth). The tree is walked with an
explicit stack, so nesting depth is never a failure. Every import (Python ``import``/``from``,
Rust ``use`` and ``mod foo;``, JS/TS ``import``/``require``, Go ``import``) is an ``IMPORTS``
edge to the deterministic id of the target module (uuid5 of ``module:<language>:<name>``),
dangling until that module is ingested. ``CALLS`` edges link a definition (or the file, for
top-level code) to a function or method of the same file that it calls by name, when that
name is defined exactly once in the file; calls across files are not resolved (each file is
its own job). Syntax errors do not fail the job: tree-sitter's error
nodes are counted in ``stats.syntax_errors`` and the rest is projected.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from tree_sitter import Node, Parser

from code_worker.archive import ARCHIVE_OPTIONS, fan_out, is_archive
from code_worker.languages import LANGUAGES, definition_label, grammar, name_of
from workers_common import (
    CorruptInput,
    IngestionResultBuilder,
    Job,
    UnsupportedFeature,
    normalize_canonical,
)
from workers_common.canonical import drop_nul
from workers_common.empty import is_empty
from workers_common.format_options import option_names
from workers_common.projection import installed

__all__ = ["FORMATS", "LANGUAGES", "PROJECTION_VERSION", "file_id", "handle", "parser_versions"]

FORMATS = ("code",)
#: How this worker reads bytes (:mod:`workers_common.projection`): raise it whenever the same
#: bytes and options would project differently.
PROJECTION_VERSION = 2


def parser_versions() -> dict[str, str]:
    """The installed versions of the parsers that shape this worker's output:
    tree-sitter and its grammars."""
    return installed(
        "tree-sitter",
        "tree-sitter-python",
        "tree-sitter-rust",
        "tree-sitter-javascript",
        "tree-sitter-typescript",
        "tree-sitter-go",
        "tree-sitter-c-sharp",
        "tree-sitter-cpp",
    )


#: A plain, CPU-bound handler: in-process pools run it in a worker process (see
#: workers_common.handlers).
PROCESS_POOL = True
NAMESPACE = uuid.UUID("4c0d3e5a-1b2c-5d6e-8f90-636f64652121")
#: A source file's options (workers_common.format_options declares them with the archive's).
_OPTIONS = frozenset(option_names("code")) - ARCHIVE_OPTIONS
_CONTAINERS = {"CLASS", "IMPL", "TRAIT", "INTERFACE"}
_IMPORTS = {
    "import_statement", "import_from_statement",  # python, js/ts
    "use_declaration",  # rust
    "import_spec",  # go
}  # fmt: skip
_QUOTED = re.compile(r"""["'`]([^"'`]+)["'`]""")
_LAST_NAME = re.compile(r"[^\W\d]\w*")


def _import_target(node: Node, language: str) -> list[str]:
    text = (node.text or b"").decode("utf-8", "replace")
    if language == "python":
        if node.type == "import_from_statement":
            module = node.child_by_field_name("module_name")
            return [(module.text or b"").decode()] if module is not None else []
        return [
            (c.text or b"").decode().split(" as ")[0]
            for c in node.children
            if c.type in ("dotted_name", "aliased_import")
        ]
    if language == "rust":
        path = text.removeprefix("pub ").removeprefix("use ").rstrip(";").strip()
        return [path.split("::{")[0].split(" as ")[0]] if path else []
    found = _QUOTED.findall(text)
    return found[-1:] if found else []


class _Walk:
    """Collects definitions, nesting and imports from a parse tree."""

    def __init__(self, b: IngestionResultBuilder, language: str, file_ref: int) -> None:
        self.b = b
        self.language = language
        self.file_ref = file_ref
        self.counts: dict[str, int] = {}
        self.imports: list[str] = []
        self.errors = 0
        self.calls: list[tuple[int, str]] = []  # (calling definition or file, callee name)
        self.defined: dict[str, list[int]] = {}  # name → definitions of that name

    def visit(self, root: Node, parent: int, parent_label: str, qual: list[str]) -> None:
        """Walk ``root``'s tree in document order (pre-order) with an explicit stack, not
        recursion: nesting depth (``((((…))))`` thousands deep) is never a failure."""
        stack: list[tuple[Node, int, str, list[str]]] = [(root, parent, parent_label, qual)]
        while stack:
            node, parent, parent_label, qual = stack.pop()
            scope = self._node(node, parent, parent_label, qual)
            if node.type == "file_scoped_namespace_declaration" and scope[0] != parent:
                _adopt_following_siblings(stack, node, scope)
            children = node.children
            stack.extend((child, *scope) for child in reversed(children))

    def _node(
        self, node: Node, parent: int, parent_label: str, qual: list[str]
    ) -> tuple[int, str, list[str]]:
        """Record one node; returns the ``(parent, parent label, qualifier)`` its children
        see."""
        if node.is_error or node.is_missing:
            self.errors += 1
        if node.type in _IMPORTS:
            self.imports.extend(_import_target(node, self.language))
        if node.type in ("call", "call_expression"):
            callee = node.child_by_field_name("function")
            if callee is not None and callee.text == b"require":
                self.imports.extend(_QUOTED.findall((node.text or b"").decode()))
            elif callee is not None and callee.text:
                words = _LAST_NAME.findall(callee.text.decode("utf-8", "replace"))
                if words:
                    self.calls.append((parent, words[-1]))
        label = definition_label(node, self.language)
        if node.type == "mod_item" and node.child_by_field_name("body") is None:
            self.imports.append(name_of(node, self.language))  # `mod foo;`: a reference
            label = None
        if label == "FUNCTION" and parent_label in _CONTAINERS:
            label = "METHOD"
        if label is None:
            return parent, parent_label, qual
        decorated = (
            node.parent if node.parent and node.parent.type == "decorated_definition" else None
        )
        target = decorated or node
        name = name_of(node, self.language)
        span = self.b.add_span_range(target.start_byte, target.end_byte, "code")
        props: dict[str, Any] = {
            "name": name,
            "qualified_name": ".".join([*qual, name]),
            "start_line": target.start_point[0] + 1,
            "end_line": target.end_point[0] + 1,
        }
        if decorated is not None:
            props["decorators"] = _decorators(decorated)
        ref = self.b.add_node([label], props, spans=[span])
        self.b.add_relationship("CONTAINS", from_ref=parent, to_ref=ref)
        if label in ("FUNCTION", "METHOD"):
            self.defined.setdefault(name, []).append(ref)
        self.counts[label] = self.counts.get(label, 0) + 1
        return ref, label, [*qual, name]


def _adopt_following_siblings(
    stack: list[tuple[Node, int, str, list[str]]], node: Node, scope: tuple[int, str, list[str]]
) -> None:
    """C#'s ``namespace A.B;`` holds what follows it in the file: the siblings after ``node``
    (contiguous at the top of the walk's stack) get its scope."""
    for k in range(len(stack) - 1, -1, -1):
        sibling = stack[k][0]
        if sibling.parent is None or node.parent is None or sibling.parent.id != node.parent.id:
            return
        stack[k] = (sibling, *scope)


def _decorators(decorated: Node) -> list[str]:
    """A Python ``decorated_definition``'s decorator expressions as written (without the
    ``@``), in source order."""
    out = []
    for child in decorated.children:
        if child.type == "decorator":
            text = (child.text or b"").decode("utf-8", "replace").strip()
            out.append(text.removeprefix("@").strip())
    return out


def file_id(repo: str, path: str) -> str:
    """The ``FILE`` node id of ``path`` in ``repo`` (uuid5; ``repo`` may be empty)."""
    return str(uuid.uuid5(NAMESPACE, f"file:{repo}:{path}"))


def _extension(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


def _is_source(path: str) -> bool:
    return _extension(path) in LANGUAGES


def handle(job: Job) -> dict[str, Any]:
    """Project one source file (module docstring), or fan an archive out
    (:func:`code_worker.archive.fan_out`).

    :raises UnsupportedFeature: an unknown option or language.
    :raises CorruptInput: the bytes are not UTF-8 text; an unreadable or hostile archive.
    :raises ResourceLimit: an archive over its file-count or size limit.
    """
    with job.open() as f:
        head = f.read(512)
    if "language" not in job.options and is_archive(job.name, head):
        unknown = sorted(set(job.options) - ARCHIVE_OPTIONS - {"repo"})
        if unknown:
            raise UnsupportedFeature(f"option: unknown option(s) {', '.join(unknown)}")
        return fan_out(job, _is_source, file_id)
    unknown = sorted(set(job.options) - _OPTIONS)
    if unknown:
        raise UnsupportedFeature(f"option: unknown option(s) {', '.join(unknown)}")
    path = str(job.options.get("path") or job.name)
    language = str(job.options.get("language") or LANGUAGES.get(_extension(path), ""))
    if language not in set(LANGUAGES.values()):
        raise UnsupportedFeature(f"language: cannot tell the language of {path!r}")
    try:
        decoded, nul = drop_nul(job.content.decode("utf-8").removeprefix("\ufeff"))
    except UnicodeDecodeError as exc:
        raise CorruptInput(f"not UTF-8 source: invalid byte at offset {exc.start}") from None
    empty = is_empty(job)
    text = "" if empty else normalize_canonical(decoded)
    source = text.encode("utf-8")
    tree = Parser(grammar(language)).parse(source)
    b = IngestionResultBuilder()
    b.count_nul(nul)
    b.set_canonical_text(text)
    whole = b.add_span_range(0, len(source), "code")
    repo = str(job.options.get("repo") or "")
    lines = text.count("\n") + (0 if not text or text.endswith("\n") else 1)
    props = {"path": path, "language": language, "lines": lines}
    file_ref = b.add_node(["FILE"], props, spans=[whole], id=file_id(repo, path))
    walk = _Walk(b, language, file_ref)
    walk.visit(tree.root_node, file_ref, "FILE", [])
    for module in dict.fromkeys(walk.imports):  # once each, first-seen order
        target = str(uuid.uuid5(NAMESPACE, f"module:{language}:{module}"))
        b.add_relationship(
            "IMPORTS", from_ref=file_ref, to_id=target, properties={"module": module}
        )
    calls = 0
    for caller, callee in dict.fromkeys(walk.calls):
        targets = walk.defined.get(callee, [])
        if len(targets) == 1 and targets[0] != caller:  # unambiguous, same file
            b.add_relationship("CALLS", from_ref=caller, to_ref=targets[0])
            calls += 1
    stats: dict[str, Any] = {
        "language": language, "definitions": dict(sorted(walk.counts.items())),
        "imports": len(dict.fromkeys(walk.imports)), "calls": calls,
        "syntax_errors": walk.errors,
    }  # fmt: skip
    if empty:
        stats["empty"] = True
    b.set_stats(stats)
    return b.build()
