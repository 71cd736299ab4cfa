"""The docs name code that exists (docs/architecture.md, "Where to put a new …"): every
``telha/…`` or ``workers/…`` path and every dotted ``telha.…`` name written in backticks in
``docs/*.md`` and ``README.md`` is a file or folder of the repository, or a module, or an
attribute of one. A module moved or a name renamed without its docs fails here."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
#: A path in backticks: ``telha/service/wiring.py``, ``workers/workers_common/``.
PATH = re.compile(r"`((?:telha|workers)/[^`\s]*)`")
#: A dotted name in backticks: ``telha.client.AsyncTelha``.
DOTTED = re.compile(r"`(telha(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")
#: What a path may stand for rather than name: ``telha/<feature>/``, ``{sqlite,postgres}``,
#: ``*_routes.py``, ``cli_*``.
PATTERN_CHARS = set("{<*…")
#: Logger names (``structlog.get_logger("telha.access")``) read like dotted names.
LOGGER = re.compile(r"get_logger\(\"(telha[.\w]*)\"\)")


def _logger_names() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "telha").rglob("*.py"):
        names.update(LOGGER.findall(path.read_text(encoding="utf-8")))
    return names


def _in_this_tree(module: str) -> bool:
    """Whether ``module`` is found in this checkout (an editable install of another one
    would find a module moved away here in its own tree)."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return False
    if spec is None:
        return False
    places = [spec.origin] if spec.origin else list(spec.submodule_search_locations or ())
    return any(Path(place).resolve().is_relative_to(ROOT) for place in places if place)


def resolves(name: str) -> bool:
    """Whether ``name`` is a module of this checkout, or an attribute path under the longest
    module prefix."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if not _in_this_tree(module):
            continue
        obj: object = importlib.import_module(module)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_path_the_docs_name_exists() -> None:
    missing = [
        f"{doc.name}: {path}"
        for doc in DOCS
        for path in PATH.findall(doc.read_text(encoding="utf-8"))
        if not PATTERN_CHARS & set(path) and not (ROOT / path.split(":")[0]).exists()
    ]
    assert missing == []


def test_every_dotted_name_the_docs_use_resolves() -> None:
    loggers = _logger_names()
    missing = [
        f"{doc.name}: {name}"
        for doc in DOCS
        for name in DOTTED.findall(doc.read_text(encoding="utf-8"))
        if name not in loggers and not resolves(name)
    ]
    assert missing == []


def test_a_moved_module_is_caught() -> None:
    """The check itself: a module path and a name that no longer exist are reported."""
    assert not resolves("telha.search_indexer")
    assert not resolves("telha.domain.model.TERMINAL_STATES")
    assert resolves("telha.search.indexer.SearchIndexer")
