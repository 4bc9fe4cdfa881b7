"""``doctor``: is this library healthy, and is everything it may need installed?

Each check is a value (name, ok, what was seen), never an exception: a broken folder or a
missing extra is reported beside everything that is fine. The effective settings are
listed from the settings table, so what ``doctor`` shows is what the code uses.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING

from kb_mcp.index.fts import FtsIndex
from kb_mcp.ingest import links
from kb_mcp.ingest.skipped import groups as skipped_groups
from kb_mcp.ingest.sources import FolderSource, folder_sources
from kb_mcp.library.results import Check, DoctorReport, FailedFile, VectorState
from kb_mcp.library.state import LibraryState
from kb_mcp.library.views import failed_files
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store.counts import source_counts
from kb_mcp.store.db import Database
from kb_mcp.store.failures import REBUILD_HINT, storage_failure

if TYPE_CHECKING:
    from kb_mcp.embed.base import Embedder
    from kb_mcp.graph.enrich import EnrichStatus
    from kb_mcp.rerank.base import Reranker

FILES_NAMED = 3  # failed files named by `doctor`; `kb-mcp list SOURCE --failed` has all
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
    problems = db.integrity_problems() or []
    version, known = db.schema()
    ok = not problems and version == known
    detail = f"{db.describe()}; schema {version}/{known}; " + (
        "integrity ok" if not problems else "; ".join(problems[:3])
    )
    return Check("database", ok, detail + ("" if ok else f"; {REBUILD_HINT}"))


def _keyword_index(fts: FtsIndex) -> Check:
    if not fts.is_current():
        return Check("keyword index", True, "older representation; rebuilt on the next search")
    problem = fts.integrity_problem()
    return Check("keyword index", problem is None, problem or "current and consistent")


def _linking(db: Database) -> Check:
    """The linking phase's progress (``ingest/links``): pending documents are keyword-
    searchable already, and catch up by themselves (the next sync, or the server)."""
    return Check("entities and relations", True, links.describe(db.conn))


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


def _reranker(settings: Settings, reranker: Reranker | None) -> Check:
    """Which reranker reorders the first results, where the setting came from, and
    whether it can run. One the user chose that cannot run is a failure, as an embedder
    is; searches still answer, in the ranking model's order."""
    from_where = f"from {_origin(settings, 'reranker')}"
    if reranker is None:
        return Check("reranker", True, f"none ({from_where}): results in the ranking model's order")
    name = f"{reranker.name} ({from_where})"
    if settings.reranker == "ollama":
        name += f", host {settings.ollama_host}"
    available = reranker.availability()
    if available.ok:
        return Check("reranker", True, f"{name}: available")
    return Check(
        "reranker",
        False,
        f"{name}: NOT available ({available.reason}); searches keep the ranking model's order",
    )


def _vectors(state: VectorState) -> Check:
    """Coverage as ``list`` says it (``catalog.describe_vectors``); never a failure:
    keyword search works whatever the vectors."""
    from kb_mcp.library.catalog import describe_vectors

    return Check("vectors", True, describe_vectors(state))


def _graph_llm(settings: Settings, status: EnrichStatus | None) -> Check | None:
    """The LLM pass (None when there is none): a failure is not a fault (the heuristic
    graph is complete), so ok."""
    if status is None:
        return None
    detail = (
        f"ollama {status.model} at {settings.ollama_host}: {status.pending:,} chunks "
        f"pending, {status.failed:,} failed"
    )
    if status.last_failure:
        detail += f" (last: {status.last_failure}; retried later)"
    return Check("graph extractor", True, detail)


def _failed_files(count: int, first: Sequence[FailedFile]) -> Check:
    """How many files failed, the first few with their reasons, and where the rest are."""
    if not count:
        return Check("failed files", True, "none")
    named = "; ".join(f"{f.source}/{f.path}: {f.reason}" for f in first[:FILES_NAMED])
    sources = sorted({f.source for f in first})
    source = sources[0] if len(sources) == 1 and count <= len(first) else "SOURCE"
    more = f" and {count - len(first[:FILES_NAMED])} more" if count > FILES_NAMED else ""
    where = f"`kb-mcp list {source} --failed`"
    return Check("failed files", True, f"{count}: {named}{more} (all: {where})")


def _skipped_files(skipped: Mapping[str, Mapping[str, int]]) -> Check:
    """What each folder source's last sync left out, counted per reason."""
    parts = [
        f"{source}: " + ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()))
        for source, counts in skipped.items()
        if counts
    ]
    if not parts:
        return Check("skipped files", True, "none")
    detail = "; ".join(parts) + " (which and why: `kb-mcp list SOURCE`, all: `--skipped`)"
    return Check("skipped files", True, detail)


def run_checks(
    settings: Settings,
    db: Database,
    fts: FtsIndex,
    folders: list[FolderSource],
    failed_files: Callable[[], int],
    *,
    failed_first: Callable[[], Sequence[FailedFile]] = tuple,
    skipped: Callable[[], Mapping[str, Mapping[str, int]]] = dict,
    embedder: Embedder | None = None,
    vector_state: Callable[[], VectorState] | None = None,
    graph_llm: Callable[[], EnrichStatus | None] | None = None,
    reranker: Reranker | None = None,
) -> DoctorReport:
    """Every check, each on its own: one that meets a damaged database or a full disk
    fails with what to do, and the others still run (issue 20 item 4: one overwritten
    page made ``doctor`` itself end in an internal error)."""

    def checked(name: str, check: Callable[[], Check | None]) -> Check | None:
        try:
            return check()
        except Exception as exc:
            known = storage_failure(exc, settings.home)
            if known is None:
                raise
            return Check(name, False, f"{known.message}; {known.hint}")

    writable = os.access(settings.home, os.W_OK)
    checks: list[Check | None] = [
        Check("home", writable, f"{settings.home} ({'writable' if writable else 'read-only'})"),
        checked("database", lambda: _database(db)),
        checked("keyword index", lambda: _keyword_index(fts)),
        checked("entities and relations", lambda: _linking(db)),
        *(_folder(f) for f in folders),
        checked("failed files", lambda: _failed_files(failed_files(), failed_first())),
        checked("skipped files", lambda: _skipped_files(skipped())),
        *(_extra(name, module, what) for name, (module, what) in EXTRAS.items()),
        _embedder(settings, embedder),
        _reranker(settings, reranker),
    ]
    if vector_state is not None:
        checks.append(checked("vectors", lambda: _vectors(vector_state())))
    if graph_llm is not None:
        checks.append(checked("graph extractor", lambda: _graph_llm(settings, graph_llm())))
    values = {f.name: getattr(settings, f.name) for f in fields(settings) if f.name != "origins"}
    shown = tuple(check for check in checks if check is not None)
    return DoctorReport(shown, {k: str(v) for k, v in values.items()})


class Health:
    """Is this library healthy (``library.health``): ``kb-mcp doctor`` and the web view."""

    def __init__(self, state: LibraryState) -> None:
        self._state = state

    def report(self) -> DoctorReport:
        """Health checks of the home, database, index, folders, optional extras, vectors
        and the LLM pass (``run_checks``)."""
        state = self._state

        def skipped() -> dict[str, dict[str, int]]:
            summaries = rows.skipped_summaries(state.db.conn)
            return {
                s.name: {g.reason: g.count for g in skipped_groups(summaries.get(s.id))}
                for s in rows.list_sources(state.db.conn)
            }

        return run_checks(
            state.settings,
            state.db,
            state.fts,
            folder_sources(state.home, state.settings.folders),
            lambda: sum(f for _, _, f in source_counts(state.db.conn).values()),
            failed_first=lambda: failed_files(state.db, FILES_NAMED),
            skipped=skipped,
            embedder=state.vectors.embedder(),
            vector_state=state.vectors.state,
            graph_llm=state.enrichment.status,
            reranker=state.reranker.get(),
        )

    def database_problems(self) -> list[str]:
        """What ``PRAGMA quick_check`` finds wrong with ``kb.db`` ([] when it is sound)."""
        return self._state.db.integrity_problems() or []
