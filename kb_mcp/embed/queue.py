"""The embedding work loop: pending chunks → vectors, one batch at a time.

A batch is read, embedded OUTSIDE any write transaction (a model call takes from
milliseconds to seconds, and the write lock must stay free for syncs and agent writes),
then stored in one short write transaction. What is committed stays committed: a run
stopped at any point (``should_stop``, an error, ``kill -9``) resumes at the next run
with the chunks that still have no vector, and a chunk with a vector is never embedded
again for the same signature. At most the one batch in flight is lost.

Text is embedded once per signature: a pending chunk whose exact embedding text a
removed chunk had takes that chunk's kept vector (``vectors.reuse_kept``; a re-synced
file's old chunks go before its new ones come), and equal texts in a batch are embedded
once. The kept vectors go when a run ends with nothing pending.

A provider failure (``EmbedderUnavailable``) marks the batch's documents
``embed_pending`` and records the reason on the signature (shown by ``list`` and
``doctor``), then ends the run: the next run retries, without re-chunking anything.
The caller (the CLI, the server's background thread) decides when that is.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kb_mcp.embed.base import Embedder, EmbedderUnavailable
from kb_mcp.index import embed_runs, vector_store
from kb_mcp.store.db import Database

DEFAULT_BATCH = 32
# progress(done, total, label): chunks embedded so far in this run, of those pending at
# its start (plus any that arrived meanwhile).
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class EmbedReport:
    """One run: chunks embedded, still pending at the end, failed in it, and why;
    ``reused``: how many of the embedded took a kept vector instead of a model call."""

    embedded: int
    pending: int
    failed: int
    error: str | None
    seconds: float
    reused: int = 0

    @property
    def complete(self) -> bool:
        return self.pending == 0 and self.error is None


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _checked(matrix: np.ndarray, rows: int, dims: int, describe: str) -> np.ndarray:
    """The provider's answer if it is ``rows × dims`` finite numbers, else unavailable:
    a wrong shape means the model under this name changed, and must not be stored."""
    array = np.asarray(matrix, dtype=np.float32)
    if array.shape != (rows, dims):
        raise EmbedderUnavailable(
            f"{describe} returned vectors of shape {array.shape}, expected ({rows}, {dims})",
            hint="the model changed under the same name; set --embed-model to re-embed",
        )
    if not np.isfinite(array).all():
        raise EmbedderUnavailable(f"{describe} returned vectors with NaN or infinite values")
    return array


def embed_pending(
    db: Database,
    embedder: Embedder,
    sig_id: int,
    *,
    batch: int = DEFAULT_BATCH,
    should_stop: Callable[[], bool] | None = None,
    progress: Progress | None = None,
) -> EmbedReport:
    """Embed every chunk that has no vector of ``sig_id`` yet, ``batch`` texts per call.

    ``embedder.signature`` must be the signature of ``sig_id``. Returns when nothing is
    pending, when ``should_stop()`` says so (checked between batches), or after the
    first provider failure (``error`` says why; nothing of that batch is stored).
    """
    started = time.perf_counter()
    signature = embedder.signature
    _, pending_at_start = vector_store.totals(db.conn, sig_id)
    try:
        return _run(db, embedder, sig_id, batch, should_stop, progress, pending_at_start, started)
    finally:
        # Only a run that stored a batch left a heartbeat (an idle run writes nothing).
        # A failure to clear it must not hide the run's own error: it goes stale by itself.
        with contextlib.suppress(Exception):
            if embed_runs.running(db.conn, signature.key):
                with db.write() as conn:
                    embed_runs.ended(conn, signature.key)


def _run(
    db: Database,
    embedder: Embedder,
    sig_id: int,
    batch: int,
    should_stop: Callable[[], bool] | None,
    progress: Progress | None,
    pending_at_start: int,
    started: float,
) -> EmbedReport:
    """``embed_pending``'s loop; each stored batch also records the run's rate of passages
    the model embedded (kept vectors taken are not its work), timed from the end of its
    first batch (which loads the model: ``index/embed_runs.py``)."""
    signature = embedder.signature
    embedded = reused_total = 0
    after_id = 0
    timed_from: tuple[float, int] | None = None  # (when, embedded) at the first batch's end
    while not (should_stop and should_stop()):
        chunks = vector_store.pending_chunks(db.conn, sig_id, batch, after_id=after_id)
        if not chunks:
            break
        after_id = chunks[-1].chunk_id
        document_ids = sorted({c.document_id for c in chunks})
        reused: set[int] = set()
        if vector_store.has_kept(db.conn, sig_id):
            with db.write() as conn:
                reused = vector_store.reuse_kept(conn, sig_id, chunks)
        embedded += len(reused)
        reused_total += len(reused)
        chunks = [c for c in chunks if c.chunk_id not in reused]
        texts = list(dict.fromkeys(c.text for c in chunks))  # a duplicate is embedded once
        try:
            matrix = np.zeros((0, signature.dims), dtype=np.float32)
            if texts:
                matrix = embedder.embed(texts, kind="passage")
                matrix = _checked(matrix, len(texts), signature.dims, signature.describe())
        except EmbedderUnavailable as exc:
            with db.write() as conn:
                vector_store.record_failure(conn, sig_id, document_ids, exc.message, _utc_now())
            _, pending = vector_store.totals(db.conn, sig_id)
            seconds = time.perf_counter() - started
            return EmbedReport(embedded, pending, len(chunks), exc.message, seconds, reused_total)
        row_of = {text: i for i, text in enumerate(texts)}
        with db.write() as conn:
            rows = matrix[[row_of[c.text] for c in chunks]]
            embedded += vector_store.store_vectors(conn, sig_id, [c.chunk_id for c in chunks], rows)
            vector_store.record_success(conn, sig_id, document_ids)
            now = time.perf_counter()
            if timed_from is None:
                timed_from = (now, embedded - reused_total)
            else:
                computed = embedded - reused_total - timed_from[1]
                embed_runs.record_rate(conn, signature.key, computed, now - timed_from[0])
            embed_runs.beat(conn, signature.key)
        if progress is not None:
            progress(embedded, max(pending_at_start, embedded), signature.describe())
    _, pending = vector_store.totals(db.conn, sig_id)
    if pending == 0 and vector_store.has_kept(db.conn, sig_id):
        with db.write() as conn:
            vector_store.forget_kept(conn, sig_id)
    return EmbedReport(embedded, pending, 0, None, time.perf_counter() - started, reused_total)
