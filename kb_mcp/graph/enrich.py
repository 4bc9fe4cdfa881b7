"""The background LLM pass: pending chunks → typed entities and relations, a batch at a time.

Heuristic extraction runs at ingest, in the chunk's own transaction, so keyword search
and the graph leg never wait for a model; this pass adds what the LLM finds afterwards.
Like the embedding queue (``embed/queue.py``): a batch is read, its chunks are sent to
the model by a bounded pool of ``workers`` threads OUTSIDE any write transaction, and
the results are stored in one short write transaction per batch, each chunk's facts
with its done marker (``index/graph_facts``). A pass stopped at any point (``kill -9``
included) loses at most the batch in flight and resumes with the chunks still pending;
a done chunk is never asked again for the same model.

A rejected answer (``AnswerRejected``) marks that chunk failed with the reason and a
retry time (``backoff_s`` × 2^attempts, at most ``max_backoff_s``); the chunk keeps its
heuristic entities meanwhile. A transport failure (``ExtractorUnavailable``: refused,
timeout, HTTP 500) marks the batch's unanswered chunks the same way and ends the pass:
the extractor's cooldown makes the next pass cheap until the host is back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import apsw

from kb_mcp.errors import KbError
from kb_mcp.graph.llm import AnswerRejected, ExtractorUnavailable, LlmFacts
from kb_mcp.index import graph_facts
from kb_mcp.index.graph import GRAPH_VERSION
from kb_mcp.settings import Settings
from kb_mcp.store import locks
from kb_mcp.store.db import Database

WORKERS = 2  # the build machine has two cores; Ollama serialises a small model anyway
BATCH = 8
BACKOFF_S = 60.0
MAX_BACKOFF_S = 6 * 3600.0
Progress = Callable[[int, int, str], None]


class Extractor(Protocol):
    model: str

    def extract(self, text: str, heading_path: Sequence[str] = ()) -> LlmFacts: ...


@dataclass(frozen=True, slots=True)
class EnrichReport:
    """One pass: chunks enriched, failed in it, still pending at the end, and why it stopped."""

    enriched: int
    failed: int
    pending: int
    error: str | None
    seconds: float


@dataclass(frozen=True, slots=True)
class EnrichStatus:
    """For ``doctor``: the model, chunks still to ask, chunks failed (and the last reason)."""

    model: str
    pending: int
    failed: int
    last_failure: str | None


def _ask(extractor: Extractor, chunk: graph_facts.PendingChunk) -> LlmFacts | KbError:
    try:
        return extractor.extract(chunk.text, chunk.heading_path)
    except (AnswerRejected, ExtractorUnavailable) as exc:
        return exc


def enrich_pending(
    db: Database,
    extractor: Extractor,
    *,
    workers: int = WORKERS,
    batch: int = BATCH,
    backoff_s: float = BACKOFF_S,
    max_backoff_s: float = MAX_BACKOFF_S,
    should_stop: Callable[[], bool] | None = None,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.time,
) -> EnrichReport:
    """Run ``extractor`` over every pending chunk; see the module docstring."""
    started = time.perf_counter()
    model = extractor.model
    with db.write() as conn:
        graph_facts.check_base(conn, GRAPH_VERSION)
        graph_facts.drop_orphans(conn)
    total = graph_facts.pending_count(db.conn, model, now=clock())
    enriched = failed = 0
    error: str | None = None
    after_id = 0
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="kb-graph") as pool:
        while error is None and not (should_stop and should_stop()):
            chunks = graph_facts.pending_chunks(
                db.conn, model, batch, after_id=after_id, now=clock()
            )
            if not chunks:
                break
            answers = list(pool.map(lambda c: _ask(extractor, c), chunks))
            with db.write() as conn:
                for chunk, answer in zip(chunks, answers, strict=True):
                    if isinstance(answer, LlmFacts):
                        enriched += graph_facts.store_facts(conn, chunk, model, answer)
                        continue
                    delay = min(backoff_s * 2**chunk.attempts, max_backoff_s)
                    graph_facts.record_failure(conn, chunk, model, answer.message, clock() + delay)
                    failed += 1
                    if isinstance(answer, ExtractorUnavailable):
                        error = answer.message
            after_id = chunks[-1].chunk_id
            if progress is not None:
                progress(enriched + failed, max(total, enriched + failed), f"graph {model}")
    pending = graph_facts.pending_count(db.conn, model, now=clock())
    return EnrichReport(enriched, failed, pending, error, time.perf_counter() - started)


# The library lock of one model's pass (beside embed/active.LOCK_NAME's of a signature).
LOCK_NAME = "graph-llm-{model}"
# (host, model) → extractor. Tests pass their own; the default is ``OllamaExtractor``.
ExtractorFactory = Callable[[str, str], Extractor]


class GraphEnrichment:
    """The LLM pass of one ``Library``: its extractor (built on first use), a lock per
    model across processes, and the event that wakes the server's background pass."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        make: ExtractorFactory | None = None,
        *,
        prepare: Callable[[], None] | None = None,
    ) -> None:
        """``prepare``: brings the entity graph (and what it reads) up to date before a
        pass writes into it (``LibraryState.ready``)."""
        self._db = db
        self._settings = settings
        self._make = make
        self._prepare = prepare
        self._extractor: Extractor | None = None
        self._lock = threading.Lock()
        self.wanted = threading.Event()

    @property
    def enabled(self) -> bool:
        return self._settings.graph_extractor != "heuristic"

    def extractor(self) -> Extractor | None:
        """The configured LLM extractor, built at its first use (None: ``heuristic``)."""
        if not self.enabled:
            return None
        with self._lock:
            if self._extractor is None:
                host, model = self._settings.ollama_host, self._settings.graph_model
                if self._make is not None:
                    self._extractor = self._make(host, model)
                else:
                    from kb_mcp.graph.llm import OllamaExtractor

                    self._extractor = OllamaExtractor(host, model)
            return self._extractor

    def run(
        self,
        *,
        should_stop: Callable[[], bool] | None = None,
        progress: Progress | None = None,
        wait: bool = True,
    ) -> EnrichReport | None:
        """Run the LLM extractor over the chunks it has not seen (``library.enrichment``).

        None when ``graph_extractor`` is ``heuristic``, or (``wait=False``) another
        process runs the pass for this model now. Failures keep the heuristic entities;
        the chunks are retried by a later pass, after a backoff.
        """
        if self._prepare is not None:
            self._prepare()
        extractor = self.extractor()
        if extractor is None:
            return None
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in extractor.model)
        with self._db.lock(LOCK_NAME.format(model=safe)) as lock:
            if not locks.take(lock, wait=wait, should_stop=should_stop):
                return None
            return enrich_pending(self._db, extractor, should_stop=should_stop, progress=progress)

    def status(self) -> EnrichStatus | None:
        """Where the pass stands (no network): None with the heuristic extractor."""
        if not self.enabled:
            return None
        conn, model = self._db.conn, self._settings.graph_model
        return EnrichStatus(
            model,
            graph_facts.pending_count(conn, model, now=time.time()),
            graph_facts.failed_count(conn, model),
            graph_facts.last_failure(conn, model),
        )

    def forget(self, conn: apsw.Connection) -> None:
        """The graph was rebuilt: every chunk is asked again. Call inside ``db.write()``."""
        graph_facts.forget_markers(conn)
