"""``python -m kb_mcp.bench.hybrid_1m``: a hybrid search's legs and their fusion at 1M.

Why this shape: a real 1M-passage library on PostgreSQL takes hours to ingest here, but
each leg exists at 1M on its own, and a hybrid search is the legs plus their fusion:

- **keyword**: the question's lists at ``--passages``, simulated from the library at
  ``--home`` (``keyword_pg.simulated_terms``: each key's document frequency scaled, at
  random positions; the words in over half the passages left out, as the engine's
  ``without_common_units`` does), ranked by the PostgreSQL keyword index's own call,
  ``maxscore.top_documents``, at the depth the engine asks of the leg
  (``rank.CANDIDATE_DOCUMENTS``); building the lists is not timed;
- **vector**: ``VectorIndex.search`` on a PostgreSQL database made by
  ``python -m kb_mcp.bench.pg_vectors --size 1000000 --real …`` (``--url``), at the
  engine's depth (``engine.VECTOR_PASSAGES``) and the default ``ef_search``, with the
  question embedded beforehand by the bench home's own model (not timed);
- **feedback**: the feedback leg's second keyword search, its terms picked by
  ``feedback.feedback_terms`` from the home's own first passages (as the engine picks
  them), their lists scaled like the keyword leg's, ranked by the same call;
- **fusion**: ``fuse.fuse_rankings`` on the three legs with the engine's weights.

Per question, in one process: each part's process CPU time and wall time. The vector
search runs in the server, so its wall time is what the client sees, and its CPU is
mostly the server backend's: read per search from ``/proc/PID/schedstat`` (this
machine's server only) as the part ``server``, counted in the CPU sum. The load average
before and after each pass says how much of the wall time is waiting for a core.

Not measured: the document leg (documents ranked whole, then each one's best passage,
scored over the cited documents' passages alone: ``keyword_pg --simulate N
--citations``), the ranking after the fusion (passage rows, features, the model over the
first 40; it does not grow with the library), and a source filter.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import psycopg

from kb_mcp.bench.beir import load_beir
from kb_mcp.bench.keyword_pg import _library_copy, simulated_terms
from kb_mcp.bench.metrics import percentile
from kb_mcp.embed.base import EmbeddingSignature
from kb_mcp.embed.registry import make_embedder
from kb_mcp.index import maxscore, topk
from kb_mcp.index.bm25 import length_norm
from kb_mcp.index.fts import FtsIndex
from kb_mcp.index.postgres.keyword_reader import PRESELECT
from kb_mcp.index.postgres.vectors import VectorIndex, find_signature
from kb_mcp.search.calibration import calibration_for
from kb_mcp.search.engine import FEEDBACK_WEIGHT, KEYWORD_WEIGHT, VECTOR_PASSAGES
from kb_mcp.search.feedback import FEEDBACK_DOCUMENTS, feedback_terms
from kb_mcp.search.fuse import LegHit, fuse_rankings
from kb_mcp.search.keyword import keyword_leg
from kb_mcp.search.query import Query, parse_query, without_common_units
from kb_mcp.search.rank import CANDIDATE_DOCUMENTS
from kb_mcp.search.stats import UnitStats, unit_stats
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store.db import Database

PASSAGES = 1_000_000
EMBED_BATCH = 32
PARTS = ("keyword", "feedback", "vector", "server", "fusion", "sum")
# The server backend's CPU for the vector search: in the CPU column only (its wall time
# is the vector part's); the CPU sum counts it, the wall sum does not twice.
SERVER = "server"
T = TypeVar("T")


def _on_cpu_ms(pid: int) -> float:
    """Time process ``pid`` has run on a CPU, in ms (``/proc/PID/schedstat``'s first
    field, in ns: fine enough for one search, unlike ``stat``'s 10 ms ticks)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e6


def _timed(into: Pass, part: str, call: Callable[[], T]) -> T:
    started, started_cpu = time.perf_counter(), time.process_time()
    found = call()
    into.wall[part].append((time.perf_counter() - started) * 1000)
    into.cpu[part].append((time.process_time() - started_cpu) * 1000)
    return found


def _feedback_query(db: Database, fts: FtsIndex, matched: Query, stats: UnitStats) -> Query:
    """The feedback leg's terms, picked as the engine picks them (``feedback_terms`` over
    the first passages the keyword leg finds in the home's own library): which words a
    question's feedback asks is the library's, only their lists are scaled."""
    first = keyword_leg(fts, matched, FEEDBACK_DOCUMENTS)
    found = rows.passages(db.conn, [hit.chunk_id for hit in first], False)
    asked = {t for tokens in stats.tokens.values() for t in tokens}
    words = feedback_terms(fts, [p.text for p in found.values()], asked)
    return Query(matched.text, tuple(words), ())


def _hits(found: Sequence[tuple[int, float]]) -> list[LegHit]:
    return [LegHit(cid, rank, score) for rank, (cid, score) in enumerate(found, start=1)]


@dataclass(slots=True)
class Pass:
    """One pass over the questions: each part's times per question, the server's CPU."""

    wall: dict[str, list[float]] = field(
        default_factory=lambda: {p: [] for p in PARTS if p != SERVER}
    )
    cpu: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PARTS})
    short: int = 0  # vector searches that found fewer passages than asked
    load: tuple[float, ...] = ()

    def report(self, name: str) -> list[str]:
        lines = [f"{name}: part  CPU p50 / p95 ms   wall p50 / p95 ms"]
        for part in PARTS:
            cpu, wall = self.cpu[part], self.wall.get(part)
            line = f"  {part:8}  {percentile(cpu, 50):6.1f} / {percentile(cpu, 95):6.1f}"
            if wall is not None:
                line += f"    {percentile(wall, 50):6.1f} / {percentile(wall, 95):6.1f}"
            lines.append(line)
        lines.append(
            f"  ({SERVER}: the PostgreSQL backend's CPU for the vector search; wall: none); "
            f"load average (1 min) before / after: {self.load[0]:.1f} / {self.load[1]:.1f}; "
            f"vector searches short of {VECTOR_PASSAGES}: {self.short}"
        )
        return lines


def run(
    home: Path,
    dataset: Path,
    split: str,
    url: str,
    passages: int,
    limit: int | None,
    passes: int,
) -> str:
    questions = [q.text for q in load_beir(dataset, split).queries][:limit]
    with tempfile.TemporaryDirectory() as folder:
        db = _library_copy(home, Path(folder))
        embedder = make_embedder(Settings(home=Path(folder)))
        if embedder is None:
            raise SystemExit("the home's settings name no embedder")
        vectors = np.concatenate(
            [
                embedder.embed(questions[at : at + EMBED_BATCH], kind="query")
                for at in range(0, len(questions), EMBED_BATCH)
            ]
        )
        weights = {
            "keyword": KEYWORD_WEIGHT,
            "vector": calibration_for(embedder.signature).weight,
            "feedback": FEEDBACK_WEIGHT,
        }
        fts = FtsIndex(db)
        total = fts.chunk_count()
        scale = passages / total
        rng = np.random.default_rng(1)
        norm = length_norm(rng.integers(50, 400, passages).astype(np.float64), 200.0)
        ids = np.arange(passages, dtype=np.int64)

        def select(at: np.ndarray, values: np.ndarray) -> list[tuple[int, float]]:
            return topk.best_per_document(ids[at], ids[at], values, CANDIDATE_DOCUMENTS, PRESELECT)

        def ranked(terms: list[maxscore.TermList]) -> list[LegHit]:
            found = maxscore.top_documents(terms, norm, CANDIDATE_DOCUMENTS, select)
            return _hits(found) if terms else []

        lists = (passages, scale, rng)

        index = VectorIndex()
        signature = EmbeddingSignature("bench", "real", vectors.shape[1], 2000)
        done: list[Pass] = []
        with psycopg.connect(url) as conn:
            found = find_signature(conn, signature.key)
            if found is None:
                raise SystemExit(f"no pg_vectors --real signature ({signature.key}) at {url}")
            backend = conn.info.backend_pid
            for _ in range(passes):
                timed = Pass()
                load_before = os.getloadavg()[0]
                for text, vector in zip(questions, vectors, strict=True):
                    query = parse_query(text)  # as the engine asks the leg: common words out
                    stats = unit_stats(fts, query)
                    matched = without_common_units(query, stats.unit_df(), total)
                    terms = simulated_terms(fts, matched, passages, scale, rng)
                    keyword = _timed(timed, "keyword", lambda t=terms: ranked(t))
                    more = simulated_terms(fts, _feedback_query(db, fts, matched, stats), *lists)
                    feedback = _timed(timed, "feedback", lambda t=more: ranked(t))
                    server_before = _on_cpu_ms(backend)
                    nearest = _timed(
                        timed,
                        "vector",
                        lambda v=vector: _hits(index.search(conn, found.id, v, VECTOR_PASSAGES)),
                    )
                    timed.cpu[SERVER].append(_on_cpu_ms(backend) - server_before)
                    timed.short += len(nearest) < VECTOR_PASSAGES
                    legs = {"keyword": keyword, "vector": nearest, "feedback": feedback}
                    _timed(timed, "fusion", lambda legs=legs: fuse_rankings(legs, weights))
                    for into in (timed.wall, timed.cpu):
                        parts = [into[part][-1] for part in PARTS[:-1] if part in into]
                        into["sum"].append(sum(parts))
                timed.load = (load_before, os.getloadavg()[0])
                done.append(timed)
        db.close()
    lines = [
        f"{len(questions)} questions, {passages:,} passages, legs at "
        f"{CANDIDATE_DOCUMENTS} / {VECTOR_PASSAGES}, ef_search {index.ef_search}"
    ]
    for number, timed in enumerate(done, start=1):
        lines += timed.report(f"pass {number}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kb_mcp.bench.hybrid_1m", description=__doc__)
    parser.add_argument("--home", type=Path, required=True, help="a bench retrieval home")
    parser.add_argument("--dataset", type=Path, required=True, help="the BEIR folder")
    parser.add_argument("--split", default="test")
    parser.add_argument(
        "--url", required=True, help="the database `pg_vectors --size 1000000 --real` made"
    )
    parser.add_argument("--passages", type=int, default=PASSAGES)
    parser.add_argument("--limit", type=int, help="at most this many questions")
    parser.add_argument(
        "--passes", type=int, default=2, help="passes over the questions (the first warms)"
    )
    args = parser.parse_args(argv)
    print(
        run(args.home, args.dataset, args.split, args.url, args.passages, args.limit, args.passes)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
