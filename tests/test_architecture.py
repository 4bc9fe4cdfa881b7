"""The module map holds: imports point one way, no module imports itself back, SQL stays
in the storage layers (issue 23 item 4; docs/architecture.md, "Modules", draws the same
table).

Rules written only on paper drift: ``search/`` came to import ``ingest/``, ``index/``
imported back up into ``graph/`` and ``embed/``, and three import circles grew, none of
which a review noticed when it was made. This scan reads every module of ``kb_mcp/`` with
``ast`` (nothing is imported, so it is quick and cannot be fooled by import order) and
fails naming each forbidden arrow or circle and the rule it breaks.

What counts:

- **layers**: every import, at module level, inside a function, or under
  ``TYPE_CHECKING``: a type names a concept of the layer it lives in, so an upward type
  import is an upward dependency even though it never runs.
- **circles**: every import that runs (module level and inside functions), not those under
  ``TYPE_CHECKING``, which never run. An import inside a function still closes a circle:
  it only moves the failure from start-up to first use, and hides the tangle.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kb_mcp"

# The library layer: its services, as top-level modules or as the ``kb_mcp.library``
# package they move into (each spelling maps to the same layer, so either layout passes;
# the unit "library" also covers any other module of that package).
LIBRARY_SERVICES = (
    "library",
    "lookup",
    "writing",
    "reader",
    "folders",
    "views",
    "entities",
    "catalog",
    "state",
    "doctor",
    "results",
)


@dataclass(frozen=True)
class Layer:
    """A rank of the module map. ``units`` are module names relative to ``kb_mcp`` (a
    package name covers its modules; the longest name that matches a module places it).
    A module may import modules of a lower layer, and of its own layer only inside its
    own top-level package, unless the layer is ``open`` (its units are one piece and
    import each other freely; the circle check still holds)."""

    name: str
    units: tuple[str, ...]
    open: bool = False


# Top to bottom. Imports point down this table (docs/architecture.md, "Modules").
LAYERS = (
    # The package's public names, imported lazily (test_the_package_root_imports_nothing).
    Layer("entry", ("__init__", "__main__")),
    Layer("adapter: cli (runs the others)", ("cli",)),
    Layer("adapter: bench", ("bench",)),
    Layer("adapter: web", ("web",)),
    Layer("adapter: server", ("server",)),
    # Results to JSON and text: below the adapters, above the library, which never renders.
    Layer("render (adapters only)", ("render", "library.render")),
    Layer(
        "library",
        LIBRARY_SERVICES
        + tuple(f"library.{name}" for name in LIBRARY_SERVICES)
        # A library's active vectors: state.py holds them, they build results' values.
        + ("embed.active",),
        open=True,
    ),
    Layer("pipelines", ("ingest", "search", "grep")),
    Layer("relations", ("relations",)),
    # The reranker's models run on the embedder's runtime and fence as the extractor does.
    Layer("reranker", ("rerank",)),
    Layer("models", ("embed", "graph")),
    # SQL: index/ (derived tables) over store/ (rows); store/migrations creates and fills
    # index tables (migration 12), so the two share a layer; the circle check still holds.
    Layer("storage", ("index", "store"), open=True),
    # Pure text, values and ports every layer may use, and the settings and errors.
    Layer(
        "base",
        (
            "chunk",
            "text",
            "cite",
            "redact",
            "graph.extract",
            "graph.resolve",
            "graph.facts",
            "embed.base",
            "index.textprep",
            "settings",
            # the store setting's URL: parsed and shown without secrets when settings load
            "store.postgres.url",
            "limits",
            "fsutil",
            "ollama_http",
            "home",
            "errors",
        ),
        open=True,
    ),
)

# Modules that do no I/O: they may not import what does it.
PURE = (
    "chunk",
    "text",
    "cite",
    "graph.extract",
    "graph.resolve",
    "index.textprep",
    "search.query",
    "search.fuse",
    "search.adjust",
    "search.features",
    "search.freshness",
    "search.relations",
    "relations.change",
    "relations.detect",
    "relations.references",
    "bench.metrics",
)
IO_MODULES = ("apsw", "os", "pathlib", "io", "shutil", "subprocess", "socket", "sqlite3")

# Where SQL may be written.
SQL_HOMES = ("store", "index")

# Arrows known to close a circle, left out of the circle check: (importer, imported
# module or package). Each must still exist (test_the_known_circle_arrows_still_exist).
KNOWN_CIRCLE_ARROWS = {
    # Database runs the migrations when it opens, and migrations 12 and on create and fill
    # index tables (index/ imports store/db back). Ends when a library is opened by a
    # function above both and store/db stops running migrations (issue 24's store port).
    ("store.migrations", "index"),
    # By design: the whole rule set runs over what two of its rules decode (base64) or
    # join (continued lines). Its code is fingerprinted (redact/version), so breaking
    # this import apart is a rules-version decision.
    ("redact.encoded", "redact"),
    ("redact.joined", "redact"),
}


def _known_circle_arrow(source: str, target: str) -> bool:
    return any(
        source == known_source and (target == known or target.startswith(known + "."))
        for known_source, known in KNOWN_CIRCLE_ARROWS
    )


@dataclass(frozen=True)
class Import:
    source: str  # module name relative to kb_mcp, e.g. "search.rank"
    target: str
    line: int
    runs: bool  # False under TYPE_CHECKING


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
TREES = {module: ast.parse(path.read_text(encoding="utf-8")) for module, path in MODULES.items()}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolved(name: str) -> str | None:
    """``kb_mcp.a.b`` → ``a.b`` (the longest module that exists); None outside kb_mcp."""
    if name != "kb_mcp" and not name.startswith("kb_mcp."):
        return None
    parts = name.split(".")[1:]
    while parts and ".".join(parts) not in MODULES:
        parts.pop()
    return ".".join(parts) if parts else "__init__"


def _imports(module: str) -> Iterator[Import]:
    path = MODULES[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]

    def visit(node: ast.AST, runs: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for part in child.body:
                    yield from visit_one(part, False)
                for part in child.orelse:
                    yield from visit_one(part, runs)
            else:
                yield from visit_one(child, runs)

    def visit_one(node: ast.AST, runs: bool) -> Iterator[Import]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolved(alias.name)
                if target is not None:
                    yield Import(module, target, node.lineno, runs)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["kb_mcp", *package][: len(package) + 2 - node.level]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                # ``from kb_mcp.index import fts`` imports the module fts.
                target = _resolved(f"{origin}.{alias.name}")
                if target is not None:
                    yield Import(module, target, node.lineno, runs)
        else:
            yield from visit(node, runs)

    yield from visit(TREES[module], True)


IMPORTS = [found for module in MODULES for found in _imports(module)]


def _matches(module: str, unit: str) -> bool:
    return module == unit or module.startswith(unit + ".")


def _place(module: str) -> tuple[int, str]:
    """(rank in LAYERS, unit) of a module, by the longest unit that names it."""
    best: tuple[int, int, str] | None = None
    for rank, layer in enumerate(LAYERS):
        for unit in layer.units:
            if _matches(module, unit) and (best is None or len(unit) > best[0]):
                best = (len(unit), rank, unit)
    if best is None:
        raise AssertionError(f"kb_mcp.{module} is in no layer: add it to LAYERS")
    return best[1], best[2]


def _top(module: str) -> str:
    return module.split(".")[0]


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        _place(module)


def _arrow_error(found: Import) -> str | None:
    if found.target == "__init__":  # ``from kb_mcp import __version__``: the root runs
        return None  # before any module of the package anyway, and imports nothing
    source_rank, _ = _place(found.source)
    target_rank, _ = _place(found.target)
    source, target = LAYERS[source_rank], LAYERS[target_rank]
    path = MODULES.get(found.source)
    where = f"kb_mcp/{path.relative_to(PACKAGE) if path else found.source}:{found.line}"
    arrow = f"{where}: {found.source} → {found.target}"
    if target_rank < source_rank:
        return f"{arrow}: layer '{source.name}' imports the higher layer '{target.name}'"
    if target_rank == source_rank and not source.open and _top(found.source) != _top(found.target):
        return (
            f"{arrow}: '{_top(found.source)}' and '{_top(found.target)}' are siblings "
            f"in layer '{source.name}', which do not import each other"
        )
    return None


def test_the_package_root_imports_nothing() -> None:
    """``kb_mcp/__init__`` names the public API lazily: importing any module of the
    package runs it, so an import there would load the library into ``kb-mcp serve``'s
    first milliseconds (and into every layer below it)."""
    running = [f.target for f in IMPORTS if f.source == "__init__" and f.runs]
    assert not running, f"kb_mcp/__init__.py imports {running} at run time"


def test_imports_point_down_the_layers() -> None:
    errors = list(dict.fromkeys(error for found in IMPORTS if (error := _arrow_error(found))))
    assert not errors, "forbidden imports (rule: LAYERS in this file):\n" + "\n".join(errors)


def _packages_run(source: str, target: str) -> Iterator[str]:
    """The packages whose ``__init__`` an import of ``target`` runs, beyond those of
    ``source``'s own packages (already running)."""
    parts = target.split(".")
    for end in range(1, len(parts)):
        package = ".".join(parts[:end])
        if package in MODULES and not _matches(source, package):
            yield package


def _circles() -> dict[frozenset[str], list[str]]:
    """Strongly connected components of more than one module (Tarjan), each with a cycle
    through its first module, in import order, to name it by. Importing ``kb_mcp.a.b``
    runs ``kb_mcp/a/__init__`` first, so that is an arrow too (from outside ``a``)."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for found in IMPORTS:
        closes_known = _known_circle_arrow(found.source, found.target)
        if found.runs and found.target != found.source and not closes_known:
            graph[found.source].add(found.target)
            graph[found.source].update(_packages_run(found.source, found.target))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                strong(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            strong(module)
    return {frozenset(component): _cycle(component, graph) for component in components}


def _cycle(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One cycle through the first module of a component (breadth-first back to it)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    raise AssertionError(f"no cycle in {component}")


def test_no_module_imports_itself_back() -> None:
    circles = list(_circles().values())
    assert not circles, "import circles (rule: imports point one way):\n" + "\n".join(
        " → ".join(cycle) for cycle in circles
    )


def test_the_known_circle_arrows_still_exist() -> None:
    """A known arrow that is gone leaves a stale exception: delete its line."""
    gone = {
        (source, known)
        for source, known in KNOWN_CIRCLE_ARROWS
        if not any(f.source == source and _known_circle_arrow(source, f.target) for f in IMPORTS)
    }
    assert not gone, f"gone, delete from KNOWN_CIRCLE_ARROWS: {sorted(gone)}"


def test_pure_modules_import_nothing_that_does_io() -> None:
    errors = []
    for module in MODULES:
        if not any(_matches(module, pure) for pure in PURE):
            continue
        for node in ast.walk(TREES[module]):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            pure_paths = isinstance(node, ast.ImportFrom) and node.module == "pathlib"
            if pure_paths and all(alias.name.startswith("Pure") for alias in node.names):
                continue  # path arithmetic, no file system
            for name in names:
                if name.split(".")[0] in IO_MODULES:
                    errors.append(f"kb_mcp.{module}:{node.lineno} imports {name}")
    assert not errors, "pure modules doing I/O (rule: PURE in this file):\n" + "\n".join(errors)


# An SQL keyword followed by the words a statement has, not prose that starts with
# "Update" or "Select".
SQL = re.compile(
    r"^\s*(SELECT\b.+\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(TEMP\s+)?(TABLE|INDEX|TRIGGER|VIEW|VIRTUAL)|DROP\s+\w+|PRAGMA\s+\w+|"
    r"WITH\s+\w+.*\bAS\s*\(|BEGIN\b|VACUUM\b)",
    re.DOTALL,
)


def test_sql_lives_only_in_store_and_index() -> None:
    """Every statement handed to ``execute`` / ``executemany`` (or any string that reads
    as SQL) outside ``store/`` and ``index/`` is a leak of the storage layers."""
    errors = []
    for module, path in MODULES.items():
        if _top(module) in SQL_HOMES:
            continue
        for node in ast.walk(TREES[module]):
            executed = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("execute", "executemany")
            )
            if executed:
                errors.append(f"kb_mcp/{path.relative_to(PACKAGE)}:{node.lineno} .execute")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SQL.match(node.value)
            ):
                errors.append(
                    f"kb_mcp/{path.relative_to(PACKAGE)}:{node.lineno} {node.value[:40]!r}"
                )
    assert not errors, "SQL outside store/ and index/:\n" + "\n".join(sorted(set(errors)))


@pytest.mark.parametrize("layer", LAYERS, ids=lambda layer: layer.name)
def test_the_layer_table_names_real_modules(layer: Layer) -> None:
    """A unit that names nothing (a module renamed, a package moved) is a rule that no
    longer guards anything; the library's two spellings are the exception."""
    spelled_twice = {f"library.{name}" for name in LIBRARY_SERVICES} | set(LIBRARY_SERVICES)
    for unit in layer.units:
        if unit in spelled_twice or unit == "library.render" or unit == "render":
            continue
        assert any(_matches(module, unit) for module in MODULES), f"{unit} names no module"


@pytest.mark.parametrize(
    ("source", "target", "allowed"),
    [
        ("cli.main", "server.tools", True),  # an adapter launches a lower one
        ("web.app", "render", True),
        ("library.lookup", "render", False),  # the library never renders
        ("lookup", "render", False),
        ("search.rank", "ingest.pipeline", False),  # siblings in one layer
        ("relations.detect", "search.engine", False),  # up a layer
        ("index.graph", "graph.llm", False),  # storage into a network client
        ("index.graph", "graph.extract", True),  # the pure extractor is below
        ("store.db", "search.engine", False),
        ("search.engine", "store.db", True),
        ("catalog", "state", True),  # the library's services are one piece
        ("library.catalog", "library.state", True),
    ],
)
def test_the_table_allows_and_forbids(source: str, target: str, allowed: bool) -> None:
    """The rules bite: a few arrows, each allowed or forbidden by the table."""
    assert (_arrow_error(Import(source, target, 1, True)) is None) == allowed
