"""The languages the code worker reads (docs/formats.md, "Code"): each one's tree-sitter
grammar (individual pre-built grammar packages, no run-time downloads), the file extensions
that name it, and which syntax nodes are definitions.

Modules and namespaces are definitions (``MODULE``) whose body's declarations nest under them:
Rust inline ``mod util { … }`` (``mod foo;`` is an import), TypeScript ``namespace A { … }``
and ``module A { … }``, C# ``namespace A.B { … }`` and C++ ``namespace a { … }``; what follows
a C# file-scoped ``namespace A.B;`` nests under it. C++ classes, structs and enums count only
with a body (a forward declaration or ``struct S s;`` is not a definition); a C++ function's
name is the last part of its declarator (``K::m`` → ``m``).
"""

from __future__ import annotations

from tree_sitter import Language, Node

__all__ = ["LANGUAGES", "definition_label", "grammar", "name_of"]

#: Extension → language.
LANGUAGES = {
    "py": "python", "pyi": "python", "rs": "rust", "js": "javascript", "mjs": "javascript",
    "cjs": "javascript", "jsx": "javascript", "ts": "typescript", "tsx": "tsx", "go": "go",
    "cs": "csharp", "cpp": "cpp", "cc": "cpp", "cxx": "cpp", "hpp": "cpp", "hh": "cpp",
    "hxx": "cpp",
}  # fmt: skip
#: tree-sitter node type → label, for every language.
_DEFINITIONS = {
    "function_definition": "FUNCTION", "class_definition": "CLASS",  # python
    "function_item": "FUNCTION", "struct_item": "STRUCT", "enum_item": "ENUM",  # rust
    "trait_item": "TRAIT", "impl_item": "IMPL", "mod_item": "MODULE",
    "function_declaration": "FUNCTION", "class_declaration": "CLASS",  # js/ts/go
    "method_definition": "METHOD", "interface_declaration": "INTERFACE",
    "method_declaration": "METHOD", "type_spec": "STRUCT",
}  # fmt: skip
#: Per language, node types added to :data:`_DEFINITIONS` (``module`` is Python's root node,
#: so TypeScript's module declarations are listed here only).
_BY_LANGUAGE: dict[str, dict[str, str]] = {
    "typescript": {"internal_module": "MODULE", "module": "MODULE"},
    "tsx": {"internal_module": "MODULE", "module": "MODULE"},
    "csharp": {
        "namespace_declaration": "MODULE", "file_scoped_namespace_declaration": "MODULE",
        "struct_declaration": "STRUCT", "enum_declaration": "ENUM",
        "record_declaration": "CLASS", "constructor_declaration": "METHOD",
    },
    "cpp": {
        "namespace_definition": "MODULE", "class_specifier": "CLASS",
        "struct_specifier": "STRUCT", "enum_specifier": "ENUM",
    },
}  # fmt: skip
_CPP_NAMES = ("identifier", "field_identifier", "qualified_identifier", "destructor_name",
              "operator_name", "type_identifier")  # fmt: skip


def grammar(name: str) -> Language:
    """The tree-sitter language ``name`` (a value of :data:`LANGUAGES`)."""
    if name == "python":
        import tree_sitter_python as grammar_py

        return Language(grammar_py.language())
    if name == "rust":
        import tree_sitter_rust as grammar_rs

        return Language(grammar_rs.language())
    if name == "javascript":
        import tree_sitter_javascript as grammar_js

        return Language(grammar_js.language())
    if name in ("typescript", "tsx"):
        import tree_sitter_typescript as grammar_ts

        fn = grammar_ts.language_tsx if name == "tsx" else grammar_ts.language_typescript
        return Language(fn())
    if name == "csharp":
        import tree_sitter_c_sharp as grammar_cs

        return Language(grammar_cs.language())
    if name == "cpp":
        import tree_sitter_cpp as grammar_cpp

        return Language(grammar_cpp.language())
    import tree_sitter_go as grammar_go

    return Language(grammar_go.language())


def definition_label(node: Node, language: str) -> str | None:
    """The label of the definition ``node`` is in ``language``, ``None`` when it is none (a
    Rust ``mod foo;`` is an import: the caller's)."""
    if not node.is_named:  # a keyword token (TypeScript's `module`) is no declaration
        return None
    label = _DEFINITIONS.get(node.type) or _BY_LANGUAGE.get(language, {}).get(node.type)
    if label is None:
        return None
    if language == "cpp" and node.type.endswith("_specifier"):
        return label if node.child_by_field_name("body") is not None else None
    return label


def _cpp_function_name(node: Node) -> str | None:
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type not in _CPP_NAMES:
        declarator = declarator.child_by_field_name("declarator")
    if declarator is None or declarator.text is None:
        return None
    return declarator.text.decode("utf-8", "replace").rsplit("::", 1)[-1]


def name_of(node: Node, language: str) -> str:
    """A definition's name as written (``<anonymous>`` without one; a quoted TypeScript
    module name without its quotes)."""
    if language == "cpp" and node.type == "function_definition":
        return _cpp_function_name(node) or "<anonymous>"
    field = node.child_by_field_name("name") or node.child_by_field_name("type")
    if field is None or field.text is None:
        return "<anonymous>"
    return field.text.decode("utf-8", "replace").strip("\"'")
