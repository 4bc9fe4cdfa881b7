"""A library's active vectors: which embedder, which signature a search may use, and
keeping the vectors complete. ``Library`` holds one and delegates to it.

- The embedder is built on first use, never when the library opens (so neither the MCP
  handshake nor a keyword search waits for a model), and once per (provider, model).
- ``embed_pending`` runs the queue (``embed/queue.py``) under a lock per signature
  (the library lock ``embed-<key>``, ``store/locks.py``): two processes, or two
  machines on a shared library, never embed the same chunks.
- ``state()`` answers, for every search, which signature's vectors to use and with which
  embedder to embed the query; it is cached for a second, or until vectors or chunks
  change. Model change: the configured signature once it is complete; until then the
  one holding the most vectors whose own embedder still runs (the old model's, for its
  queries); once the configured one is complete every other signature is dropped.
  Vectors of two signatures are never compared.

numpy is never imported here at load time: with ``--embedder none`` nothing of this
module computes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from kb_mcp.index import embed_runs, vector_store
from kb_mcp.index.vectors import SignatureRow
from kb_mcp.library.results import VectorBacklog, VectorState
from kb_mcp.search.vector import building_reason
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store import locks
from kb_mcp.store.db import Database

if TYPE_CHECKING:
    from kb_mcp.embed.base import Embedder
    from kb_mcp.embed.queue import EmbedReport, Progress
    from kb_mcp.index.vectors import VectorIndex

# How long a computed VectorState is reused: it is asked on every search, and counting
# 100k chunks costs ~10 ms. A store or removal of vectors invalidates it at once.
STATE_TTL_S = 1.0
NO_EMBEDDER = "no embedder configured (--embedder none)"
# The library lock of one signature (beside ingest/synclock.py's of one source).
LOCK_NAME = "embed-{key}"
# The short measurement ``kb-mcp add`` makes when the library has no rate of its own:
# the second of two batches is timed (the first loads the model). Two batches of 16
# added ~10 s to a 1,000-file ``add`` at load 8 on 2 cores (5.4 passages/s, model load
# included); 8 passages are under a second at the 18.6/s.
MEASURE_BATCH = 8
MEASURE_BATCHES = 2

# (provider, model or None) → the embedder for it, or None for "none". Tests pass a
# factory of their own real embedders; the default is ``embed.registry.build_embedder``.
EmbedderFactory = Callable[[str, str | None], "Embedder | None"]


def foreground_embedders(settings: Settings) -> EmbedderFactory:
    """The embedder factory of a CLI command (``add``, ``sync``, ``search``...): the person
    waits on it, so the local model runs on every core. The server keeps the default of
    1 thread, so its background embedding leaves a core for searches. Measured (issue 8
    speed run: 160 SciFact chunks, 3 interleaved rounds, load 8-10 on 2 cores): 2 threads
    embedded 2.8 / 2.9 / 5.4 passages/s against 2.2 / 2.1 / 1.8 for 1 thread, at the
    same CPU per passage (47-55 ms)."""
    threads = max(1, os.cpu_count() or 1)

    def make(provider: str, model: str | None) -> Embedder | None:
        from kb_mcp.embed.registry import build_embedder

        return build_embedder(provider, model, settings, threads=threads)

    return make


class _Held(NamedTuple):
    """A signature the library holds vectors for, with its counts."""

    row: SignatureRow
    embedded: int
    pending: int


class ActiveVectors:
    """The vectors side of one ``Library``: embedder, queue runs, and search state."""

    def __init__(
        self, db: Database, settings: Settings, make_embedder: EmbedderFactory | None
    ) -> None:
        self._db = db
        self._settings = settings
        self._make_embedder = make_embedder
        self._embedders: dict[tuple[str, str], Embedder | None] = {}
        self._embedder_lock = threading.Lock()
        self._index: VectorIndex | None = None
        self._vector_state: tuple[float, int, VectorState] | None = None
        self.last_error: str | None = None  # the last failure, also before any signature
        # Set whenever there may be new chunks to embed (a sync, an added document);
        # the server's background embedder waits on it.
        self.wanted = threading.Event()

    def embedder(self) -> Embedder | None:
        """The configured embedder (None: ``--embedder none``), built on first use."""
        return self._embedder_for(self._settings.embedder, self._settings.embed_model or None)

    def _embedder_for(self, provider: str, model: str | None) -> Embedder | None:
        """One embedder per (provider, model), built once; ``none`` imports nothing."""
        if provider == "none":
            return None
        key = (provider, model or "")
        with self._embedder_lock:
            if key not in self._embedders:
                if self._make_embedder is not None:
                    built = self._make_embedder(provider, model)
                else:
                    from kb_mcp.embed.registry import build_embedder

                    built = build_embedder(provider, model, self._settings)
                self._embedders[key] = built
            return self._embedders[key]

    @property
    def index(self) -> VectorIndex:
        """The library's one approximate-neighbour index, its engine's
        (``index/vector_store.index``: codes cached in memory on SQLite, pgvector's HNSW
        in the server on PostgreSQL)."""
        if self._index is None:
            self._index = vector_store.index(self._db)
        return self._index

    def embed_pending(
        self,
        *,
        batch: int | None = None,
        should_stop: Callable[[], bool] | None = None,
        progress: Progress | None = None,
        wait: bool = True,
    ) -> EmbedReport | None:
        """Embed every chunk that has no vector of the configured embedder yet.

        None when there is nothing to run: ``--embedder none``, or (``wait=False``)
        another process is embedding this signature right now. One run per signature
        at a time across processes, so nothing is embedded twice. A provider failure
        ends the run with ``error`` set and the documents marked ``embed_pending``; the
        next run retries. When the configured signature is complete, the vectors of
        every other signature are dropped (they were kept for search until then).
        """
        embedder = self.embedder()
        if embedder is None:
            return None
        from kb_mcp.embed import queue
        from kb_mcp.embed.base import EmbedderUnavailable

        try:
            signature = embedder.signature
        except EmbedderUnavailable as exc:
            self.last_error = exc.message
            return queue.EmbedReport(0, rows.document_total(self._db.conn)[1], 0, exc.message, 0.0)
        with self._db.lock(LOCK_NAME.format(key=signature.key)) as lock:
            if not locks.take(lock, wait=wait, should_stop=should_stop):
                return None
            # A transaction of its own, committed at once: on PostgreSQL a new signature's
            # table references ``chunks``, and creating it locks out chunk writers until
            # the commit.
            with self._db.write() as conn:
                sig_id = vector_store.ensure_signature(conn, signature)
            report = queue.embed_pending(
                self._db,
                embedder,
                sig_id,
                batch=batch or queue.DEFAULT_BATCH,
                should_stop=should_stop,
                progress=progress,
            )
            self.last_error = report.error
            if report.complete:
                self._drop_other_signatures(sig_id)
        self._vector_state = None
        return report

    def backlog(self, *, measure: bool = False) -> VectorBacklog | None:
        """The passages left to embed and how long they will take (None: ``--embedder
        none``). The rate is the library's own last one (``index/embed_runs.py``); with
        none recorded and ``measure``, two small batches are embedded now to time the
        second (the first loads the model), unless another run holds the lock. What the
        measurement embeds is kept."""
        embedder = self.embedder()
        if embedder is None:
            return None
        from kb_mcp.embed.base import EmbedderUnavailable

        try:
            signature = embedder.signature
        except EmbedderUnavailable as exc:
            pending = rows.document_total(self._db.conn)[1]
            return VectorBacklog(self._settings.embedder, 0, pending, error=exc.message)
        key, error = signature.key, None
        rate, rate_from = embed_runs.last_rate(self._db.conn, key), "recorded"
        if rate is None and measure and self._totals(key)[1]:
            report = self._measure()
            error = report.error if report else None
            rate, rate_from = embed_runs.last_rate(self._db.conn, key), "measured"
        embedded, pending = self._totals(key)
        return VectorBacklog(
            signature.describe(),
            embedded,
            pending,
            rate.per_second if rate else None,
            rate_from if rate else None,
            rate.passages if rate else 0,
            embed_runs.running(self._db.conn, key),
            error,
        )

    def _totals(self, key: str) -> tuple[int, int]:
        """(embedded, pending) passages of signature ``key`` (all pending without a row)."""
        row = vector_store.find_signature(self._db.conn, key)
        if row is None:
            return 0, rows.document_total(self._db.conn)[1]
        return vector_store.totals(self._db.conn, row.id)

    def _measure(self) -> EmbedReport | None:
        """Embed ``MEASURE_BATCHES`` batches of ``MEASURE_BATCH`` now (the run records its
        rate); None when another run holds the signature's lock."""
        done = [0]

        def counted(embedded: int, total: int, label: str) -> None:
            done[0] = embedded

        return self.embed_pending(
            batch=MEASURE_BATCH,
            should_stop=lambda: done[0] >= MEASURE_BATCH * MEASURE_BATCHES,
            progress=counted,
            wait=False,
        )

    def _drop_other_signatures(self, keep: int) -> None:
        """The configured signature is complete: older models' vectors go (disk, memory)."""
        with self._db.write() as conn:
            for row in vector_store.signatures(conn):
                if row.id != keep:
                    vector_store.drop_signature(conn, row.key)
                    self.index.discard(row.id)

    def chunks_changed(self) -> None:
        """New or changed chunks: wake the background embedder, recount coverage."""
        self._vector_state = None
        self.wanted.set()

    def warm(self) -> None:
        """Load the codes of the signature search would use, so the first search does not."""
        state = self.state()
        if state.usable and state.signature_id is not None:
            self.index.warm(self._db.conn, state.signature_id)

    def state(self) -> VectorState:
        """Which signature a search can use now, with the embedder for its query.

        The configured signature once it is complete; during a model change the
        signature with more vectors, as long as its own embedder can still embed the
        query. Never loads a model (embedders are built cheaply; the model loads at the
        first ``embed``). Reused for ``STATE_TTL_S`` unless vectors changed.
        """
        if self._settings.embedder == "none":
            return VectorState(None, None, None, None, 0, 0, NO_EMBEDDER)
        now = time.monotonic()
        generation = vector_store.generation(self._db.conn)
        cached = self._vector_state
        if cached and cached[1] == generation and now - cached[0] < STATE_TTL_S:
            return cached[2]
        state = self._compute_vector_state()
        self._vector_state = (now, generation, state)
        return state

    def _compute_vector_state(self) -> VectorState:
        from kb_mcp.embed.base import EmbedderUnavailable

        conn = self._db.conn
        embedder = self.embedder()
        assert embedder is not None  # "none" was answered by state()
        try:
            configured = embedder.signature
            available = embedder.availability()
            problem = None if available.ok else f"embedder unavailable: {available.reason}"
        except EmbedderUnavailable as exc:
            configured, problem = None, f"embedder unavailable: {exc.message}"
        building = configured is not None and embed_runs.running(conn, configured.key)
        held = [
            _Held(row, *vector_store.totals(conn, row.id)) for row in vector_store.signatures(conn)
        ]
        mine = next((h for h in held if configured and h.row.key == configured.key), None)
        if mine is None:
            mine_embedded, mine_pending = 0, rows.document_total(conn)[1]
        else:
            mine_embedded, mine_pending = mine.embedded, mine.pending
        if mine and problem is None and mine_embedded and not mine_pending:
            return self._usable(mine, embedder, building)  # complete: the usual case
        for other in sorted(held, key=lambda h: -h.embedded):  # a model change under way
            if other is mine or other.embedded <= mine_embedded:
                continue
            old = self._embedder_for(other.row.provider, other.row.model)
            if old is not None and _can_embed_queries(old, other.row.key):
                return self._usable(other, old, building)
        if mine and problem is None and mine_embedded:
            return self._usable(mine, embedder, building)  # partial, and still the best there is
        if problem is None and mine_embedded + mine_pending == 0:
            problem = "no passages to embed yet: the library is empty"
        reason = problem or building_reason(mine_embedded, mine_embedded + mine_pending)
        sig_id = mine.row.id if mine else None
        return VectorState(
            sig_id, configured, None, None, mine_embedded, mine_pending, reason, building
        )

    def _usable(self, held: _Held, embedder: Embedder, building: bool) -> VectorState:
        return VectorState(
            held.row.id,
            held.row.signature,
            embedder,
            self.index,
            held.embedded,
            held.pending,
            building=building,
        )

    def configured_row(self) -> SignatureRow | None:
        """The configured embedder's signature row, if it has one (it may not run now)."""
        embedder = self.embedder()
        if embedder is None:
            return None
        from kb_mcp.embed.base import EmbedderUnavailable

        try:
            key = embedder.signature.key
        except EmbedderUnavailable:
            return None
        return vector_store.find_signature(self._db.conn, key)


def _can_embed_queries(embedder: Embedder, key: str) -> bool:
    """Whether ``embedder`` runs now and still makes vectors of signature ``key``."""
    from kb_mcp.embed.base import EmbedderUnavailable

    try:
        return embedder.availability().ok and embedder.signature.key == key
    except EmbedderUnavailable:
        return False
