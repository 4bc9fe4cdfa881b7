"""Vector index speed and recall at growing sizes, through a real library on disk.

``python -m kb_mcp.bench.vectors --sizes 10000,100000`` builds, per size, a library of
that many chunk rows with unit vectors stored through ``index/vectors.store_vectors`` in
write transactions of 32 (as the embedding queue stores them), then measures: the store
rate, the cold load of the codes, search latency p50 / p95 (``VectorIndex.search``,
limit 10, query embedding excluded), and recall@10 against exact cosine search.

Synthetic vectors are uniformly random directions (the worst case for sign codes: no
structure) or, with ``--clusters N``, spread around N random centres. ``--real
P.npy,Q.npy`` uses real passage and query embeddings instead (rows of unit vectors).
Latency is reported as wall time and as process CPU time (the machine may be shared),
p50 / p95 by ``bench/metrics.percentile`` (nearest rank), as every other bench reports.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kb_mcp.bench.metrics import percentile
from kb_mcp.chunk import Chunk
from kb_mcp.embed.base import EmbeddingSignature
from kb_mcp.index import vectors
from kb_mcp.library import Library
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows

STORE_BATCH = 32
QUERIES = 200
NOW = "2024-01-01T00:00:00Z"


@dataclass(frozen=True, slots=True)
class VectorBenchRow:
    size: int
    dims: int
    store_per_s: float
    cold_load_ms: float
    search_p50_ms: float
    search_p95_ms: float
    search_cpu_p50_ms: float  # process CPU time: what the search costs on a busy machine
    search_cpu_p95_ms: float
    recall_at_10: float


def synthetic(size: int, dims: int, clusters: int, seed: int = 7) -> np.ndarray:
    """``size`` unit vectors: around ``clusters`` random centres (0: uniformly random)."""
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((size, dims))
    if clusters:
        centres = rng.standard_normal((clusters, dims))
        matrix = centres[rng.integers(0, clusters, size)] + 0.8 * matrix
    return (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)


def _chunk_rows(library: Library, size: int) -> list[int]:
    """``size`` chunk rows in one document (the index keys on chunk ids only)."""
    with library.db.write() as conn:
        source_id = rows.ensure_source(conn, "bench", "agent", NOW)
        doc = rows.NewDocument("bench", "bench", None, "note", None, "x", "0", None, (), NOW, NOW)
        document_id = rows.insert_document(conn, doc)
        rows.upsert_location(conn, source_id, library.db.paths.of("bench"), document_id)
        chunks = [Chunk(i, (), i + 1, i + 1, f"passage {i}") for i in range(size)]
        return rows.insert_chunks(conn, document_id, chunks)


def _store(library: Library, sig_id: int, ids: list[int], matrix: np.ndarray) -> float:
    """Store in batches, one write transaction each; vectors per second."""
    started = time.perf_counter()
    for at in range(0, len(ids), STORE_BATCH):
        with library.db.write() as conn:
            vectors.store_vectors(
                conn, sig_id, ids[at : at + STORE_BATCH], matrix[at : at + STORE_BATCH]
            )
    return len(ids) / (time.perf_counter() - started)


def measure(matrix: np.ndarray, queries: np.ndarray, workdir: Path) -> VectorBenchRow:
    size, dims = matrix.shape
    signature = EmbeddingSignature("bench", "synthetic", dims, 2000)
    with Library(Settings(home=workdir / "home", embedder="none")) as library:
        ids = _chunk_rows(library, size)
        with library.db.write() as conn:
            sig_id = vectors.ensure_signature(conn, signature, NOW)
        store_rate = _store(library, sig_id, ids, matrix)
        index = library.vectors.index
        started = time.perf_counter()
        index.warm(library.db.conn, sig_id)
        cold_ms = (time.perf_counter() - started) * 1000
        # Exact answers first: BLAS threads still spinning after a large matmul would be
        # counted in the timings below.
        id_array = np.asarray(ids)
        exact = [set(id_array[np.argsort(-(matrix @ q))[:10]].tolist()) for q in queries]
        time.sleep(0.5)
        latencies, cpu, recalls = [], [], []
        for query, truth in zip(queries, exact, strict=True):
            started, started_cpu = time.perf_counter(), time.process_time()
            found = index.search(library.db.conn, sig_id, query, 10)
            latencies.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
            recalls.append(len(truth & {cid for cid, _ in found}) / 10)
    return VectorBenchRow(
        size=size,
        dims=dims,
        store_per_s=round(store_rate),
        cold_load_ms=round(cold_ms, 1),
        search_p50_ms=round(percentile(latencies, 50), 2),
        search_p95_ms=round(percentile(latencies, 95), 2),
        search_cpu_p50_ms=round(percentile(cpu, 50), 2),
        search_cpu_p95_ms=round(percentile(cpu, 95), 2),
        recall_at_10=round(float(np.mean(recalls)), 3),
    )


def queries_near(matrix: np.ndarray, count: int, noise: float, seed: int = 11) -> np.ndarray:
    """``count`` questions, each a stored vector moved by ``noise`` (so it has a true near
    neighbour, as a real question has a passage that answers it)."""
    rng = np.random.default_rng(seed)
    picked = matrix[rng.choice(len(matrix), count, replace=False)]
    noisy = picked + noise * rng.standard_normal(picked.shape) / np.sqrt(matrix.shape[1])
    return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--clusters", type=int, default=0, help="0: uniformly random vectors")
    parser.add_argument("--real", metavar="P.npy,Q.npy", help="real passage,query embeddings")
    args = parser.parse_args(argv)
    if args.real:
        passages_path, queries_path = args.real.split(",")
        passages = np.load(passages_path).astype(np.float32)
        runs = [(passages, np.load(queries_path).astype(np.float32)[:QUERIES])]
    else:
        runs = []
        for size in (int(s) for s in args.sizes.split(",")):
            matrix = synthetic(size, args.dims, args.clusters)
            runs.append((matrix, queries_near(matrix, QUERIES, noise=0.5)))
    for matrix, queries in runs:
        workdir = Path(tempfile.mkdtemp(prefix="kb-mcp-vectors-"))
        try:
            print(asdict(measure(matrix, queries, workdir)), flush=True)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
