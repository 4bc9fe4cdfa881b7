"""``doctor``: is this library healthy, and is everything it may need installed?

Each check is a value (name, ok, what was seen), never an exception: a broken folder or a
missing extra is reported beside everything that is fine. The effective settings are
listed from the settings table, so what ``doctor`` shows is what the code uses.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import fields
from typing import TYPE_CHECKING

from kb_mcp.index.fts import FtsIndex
from kb_mcp.ingest.sources import FolderSource
from kb_mcp.results import Check, DoctorReport, VectorState
from kb_mcp.settings import Settings
from kb_mcp.store.db import Database
from kb_mcp.store.migrations import MIGRATIONS, schema_version

if TYPE_CHECKING:
    from kb_mcp.embed.base import Embedder
    from kb_mcp.graph.enrich import EnrichStatus

# extra → (module it installs, what happens without it)
EXTRAS = {
    "pdf": (
        "pymupdf4llm",
        "PDF files are read by the built-in reader (pypdfium2: text, headings by font "
        "size); the extra adds reading order of columns and tables",
    ),
    "docx": ("docx", "DOCX files are skipped as unsupported"),
}


def _database(db: Database) -> Check:
    problems = db.integrity_problems()
    version = schema_version(db.conn)
    ok = not problems and version == len(MIGRATIONS)
    detail = f"schema {version}/{len(MIGRATIONS)}; " + (
        "integrity ok" if not problems else "; ".join(problems[:3])
    )
    return Check("database", ok, detail + ("" if ok else "; run `kb-mcp reindex --rebuild`"))


def _keyword_index(fts: FtsIndex) -> Check:
    if not fts.is_current():
        return Check("keyword index", True, "older representation; rebuilt on the next search")
    problem = fts.integrity_problem()
    return Check("keyword index", problem is None, problem or "current and consistent")


def _folder(folder: FolderSource) -> Check:
    readable = os.path.isdir(folder.root) and os.access(folder.root, os.R_OK | os.X_OK)
    detail = folder.root if readable else f"{folder.root} is missing or unreadable"
    return Check(f"source {folder.name}", readable, detail)


def _extra(name: str, module: str, what: str) -> Check:
    found = importlib.util.find_spec(module) is not None
    detail = "installed" if found else f"not installed: {what}; pip install 'kb-mcp[{name}]'"
    return Check(f"extra {name}", True, detail)


def _origin(settings: Settings, name: str) -> str:
    origin = settings.origin(name)
    return "the default" if origin == "default" else origin


def _embedder(settings: Settings, embedder: Embedder | None) -> Check:
    """Which embedder is active, why (where the setting came from), and whether it runs.

    An embedder the user chose (by flag, environment or config file) that cannot run is
    a failure; the default one missing is not, as a missing optional extra is not:
    keyword search and grep work either way.
    """
    from_where = f"from {_origin(settings, 'embedder')}"
    if embedder is None:
        return Check("embedder", True, f"none ({from_where}): keyword search and grep only")
    from kb_mcp.embed.base import EmbedderUnavailable

    model = settings.embed_model or "its default model"
    name = f"{settings.embedder} ({from_where}), model {model}"
    if settings.embed_model:
        name += f" (from {_origin(settings, 'embed_model')})"
    if settings.embedder == "ollama":
        name += f", host {settings.ollama_host} (from {_origin(settings, 'ollama_host')})"
    available = embedder.availability()
    try:
        signature = embedder.signature.describe() if available.ok else None
    except EmbedderUnavailable as exc:
        available, signature = type(available)(False, exc.message), None
    if available.ok:
        return Check("embedder", True, f"{name}: available, {signature}")
    chosen = settings.origin("embedder") != "default"
    return Check(
        "embedder",
        not chosen,
        f"{name}: NOT available ({available.reason}); keyword search still works",
    )


def _vectors(state: VectorState) -> Check:
    if state.usable and state.signature is not None:
        detail = (
            f"{state.signature.describe()}: {state.embedded:,} passages embedded, "
            f"{state.pending:,} pending"
        )
        return Check("vectors", True, detail)
    return Check("vectors", True, f"not in use: {state.reason}")


def _graph_llm(settings: Settings, status: EnrichStatus) -> Check:
    """The LLM pass: a failure is not a fault (the heuristic graph is complete), so ok."""
    detail = (
        f"ollama {status.model} at {settings.ollama_host}: {status.pending:,} chunks "
        f"pending, {status.failed:,} failed"
    )
    if status.last_failure:
        detail += f" (last: {status.last_failure}; retried later)"
    return Check("graph extractor", True, detail)


def run_checks(
    settings: Settings,
    db: Database,
    fts: FtsIndex,
    folders: list[FolderSource],
    failed_files: int,
    *,
    embedder: Embedder | None = None,
    vector_state: VectorState | None = None,
    graph_llm: EnrichStatus | None = None,
) -> DoctorReport:
    writable = os.access(settings.home, os.W_OK)
    checks = [
        Check("home", writable, f"{settings.home} ({'writable' if writable else 'read-only'})"),
        _database(db),
        _keyword_index(fts),
        *(_folder(f) for f in folders),
        Check("failed files", True, f"{failed_files} (see `kb-mcp list`)"),
        *(_extra(name, module, what) for name, (module, what) in EXTRAS.items()),
        _embedder(settings, embedder),
    ]
    if vector_state is not None:
        checks.append(_vectors(vector_state))
    if graph_llm is not None:
        checks.append(_graph_llm(settings, graph_llm))
    values = {f.name: getattr(settings, f.name) for f in fields(settings) if f.name != "origins"}
    return DoctorReport(tuple(checks), {k: str(v) for k, v in values.items()})
