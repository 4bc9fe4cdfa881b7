"""Lookup: the three ways to find stored text, ``search``, ``grep`` and ``read``.

Why cut here: these are the reads an agent asks for (three of the five tools), and each
brings derived data up to date first, so none answers from text under older rules. The
search engine is ``search/engine.py``; what is done here is the library's part around
it: validation, the deadline, and the vector leg built from the library's vectors
(with the question embedded before the deadline starts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from kb_mcp import grep as grep_mod
from kb_mcp import limits
from kb_mcp.errors import SearchTimedOut
from kb_mcp.library.reader import read_document
from kb_mcp.library.results import ReadResult
from kb_mcp.library.state import LibraryState
from kb_mcp.search.engine import (
    Ranked,
    SearchRequest,
    SearchResult,
    check_legs,
    plan_search,
    rank_request,
    run_search,
)
from kb_mcp.store import documents as rows
from kb_mcp.store.db import DEADLINE_WALL_FACTOR, QueryTimeout

if TYPE_CHECKING:  # imported when vectors are used: keyword-only start-up stays lean
    from kb_mcp.search.rerank import Reranking
    from kb_mcp.search.vector import VectorLeg

# The reason of a search's keyword fallback while the server loads the local model (about
# a second after start; waiting for it took searches past their deadline: issue 10).
MODEL_LOADING = (
    "the embedding model is still loading (once, just after the server starts); "
    "keyword results until it is ready"
)


class Lookup:
    """Search, grep and read (``library.lookup``)."""

    def __init__(self, state: LibraryState) -> None:
        self.settings = state.settings
        self.db = state.db
        self.fts = state.fts
        self.graph = state.graph
        # The state's shared steps, under the names the methods below call them by.
        self._ready = state.ready
        self._source_id = state.source_id
        self.vector_state = state.vectors.state
        self._reranker = state.reranker

    def search(
        self,
        query: str,
        top_k: int | None = None,
        mode: str = "auto",
        source: str | None = None,
        legs: Sequence[str] | None = None,
    ) -> SearchResult:
        """Ranked, cited passages, one per document; empty (with a reason) when none match
        or the ranking model doubts the best one answers.

        ``legs`` names the legs to run (any of ``engine.LEGS``) instead of the
        mode's plan, so each leg's contribution can be measured.
        """
        top_k = self.settings.search_top_k if top_k is None else limits.TOP_K.check(top_k)
        named = check_legs(legs) if legs is not None else None
        request = SearchRequest(
            query, top_k, mode, source, named, self.settings.relations
        ).validated()
        source_id, leg = self._prepared(request)
        try:
            reranking = self._reranking()  # its time is the deadline's, from now on
            with self.db.deadline(self.settings.search_timeout_ms):
                result = run_search(
                    self.db,
                    self.fts,
                    request,
                    source_id,
                    leg,
                    graph=self.graph,
                    reranking=reranking,
                )
        except QueryTimeout as exc:
            limit = self.settings.search_timeout_ms
            if exc.busy:
                raise SearchTimedOut(
                    f"search was stopped after {limit * DEADLINE_WALL_FACTOR} ms: the machine "
                    f"is busy (it had less than {limit} ms of CPU)",
                    hint="try again when the machine is less loaded",
                ) from exc
            raise SearchTimedOut(
                f"search took longer than {limit} ms of CPU and was stopped",
                hint="use fewer or more specific words",
            ) from exc
        if leg is not None and leg.embed_seconds:  # the leg is this search's own
            result = replace(result, embed_ms=round(leg.embed_seconds * 1000, 2))
        return result

    def ranked(self, query: str, mode: str, source: str | None, exclude: frozenset[str]) -> Ranked:
        """The fused ranking of ``query`` with every candidate's features, in fused order
        and without a deadline, as if ``exclude`` were not stored: what ``kb-mcp bench
        train-ranker`` learns from (``search/model.py``)."""
        request = SearchRequest(query, 10, mode, source, None, self.settings.relations)
        source_id, leg = self._prepared(request.validated())
        return rank_request(
            self.db, self.fts, request, source_id, leg, self.graph, model=None, exclude=exclude
        )

    def _prepared(self, request: SearchRequest) -> tuple[int | None, VectorLeg | None]:
        """The request's source id and vector leg, with the index brought up to date and
        the question embedded. All of it before the deadline starts: a lazy index rebuild
        is proportional to the library, not to the query, or a large library could never
        finish upgrading."""
        source_id = self._source_id(request.source) if request.source else None
        self._ready()
        named = request.legs
        wants_vectors = "vector" in named if named is not None else request.mode != "keyword"
        leg = self._vector_leg() if wants_vectors else None
        self._embed_question(leg, request)
        return source_id, leg

    def _embed_question(self, leg: VectorLeg | None, request: SearchRequest) -> None:
        """Embed the question before the database deadline starts, when the plan runs
        the vector leg: the deadline covers the database work only, and the embedding
        has its own budget of the same length (``search/vector.py`` says why)."""
        from kb_mcp.search.vector import EmbeddedLeg

        if isinstance(leg, EmbeddedLeg) and "vector" in plan_search(request, leg).legs:
            leg.embed_question(request.query, self.settings.search_timeout_ms / 1000)

    def _reranking(self) -> Reranking | None:
        """The configured reranker with this search's time (None: ``reranker = none``)."""
        reranker = self._reranker.get()
        if reranker is None:
            return None
        from kb_mcp.search.rerank import Reranking, loaded

        return Reranking(loaded(reranker), self.settings.search_timeout_ms / 1000)

    def _vector_leg(self) -> VectorLeg | None:
        """The search engine's vector leg (None: ``--embedder none``), from ``vector_state``."""
        if self.settings.embedder == "none":
            return None
        from kb_mcp.search.vector import EmbeddedLeg, UnusableLeg, readiness

        state = self.vector_state()
        ready = readiness(state)
        if not ready.usable:
            return UnusableLeg(ready.reason or "")
        loading = getattr(state.embedder, "loading", None)  # the local model has it
        if loading is not None and loading():
            return UnusableLeg(MODEL_LOADING)
        assert state.index is not None and state.embedder is not None
        assert state.signature_id is not None
        return EmbeddedLeg(self.db, state.index, state.embedder, state.signature_id, ready)

    def grep(
        self,
        pattern: str,
        *,
        regex: bool = False,
        ignore_case: bool = False,
        source: str | None = None,
        path_glob: str | None = None,
        max_matches: int | None = None,
    ) -> grep_mod.GrepResult:
        """Lines of stored text matching ``pattern``, bounded by count and time."""
        limit = self.settings.grep_max_matches if max_matches is None else max_matches
        limits.MAX_MATCHES.check(limit)
        compiled = grep_mod.compile_pattern(pattern, is_regex=regex, ignore_case=ignore_case)
        self._ready()  # grep must never match text stored under older rules
        source_id = self._source_id(source) if source else None
        matches, truncated, timed_out, scanned = grep_mod.grep_texts(
            rows.iter_texts(self.db.conn, source_id),
            compiled,
            path_glob=path_glob,
            max_matches=limit,
            timeout_s=self.settings.grep_timeout_ms / 1000,
        )
        return grep_mod.GrepResult(pattern, tuple(matches), truncated, timed_out, scanned)

    def read(
        self, doc: str, start_line: int | None = None, end_line: int | None = None
    ) -> ReadResult:
        """A document, or a line range of it, by id, cite string, uri or path."""
        for name, line in (("start_line", start_line), ("end_line", end_line)):
            if line is not None:
                limits.LINE.check(line, name=name)
        self._ready()
        return read_document(self.db, doc, start_line, end_line)
