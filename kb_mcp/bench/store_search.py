"""``python -m kb_mcp.bench.store_search``: whole searches over a built library, with the
PostgreSQL server's CPU beside the caller's.

Why: ``bench perf`` times a search by the caller's wall and CPU time, which on
PostgreSQL leaves out the work the server's backends do for it (the keyword index's
statements, the HNSW walk). Here each question goes through ``library.lookup.search``
(the engine the MCP tool uses, ``perf.TOP_K`` results, keyword or hybrid) over the
library a ``bench perf --workdir`` run built (or moved there by ``kb-mcp migrate``),
asking the perf bench's questions (``perf.load_sets``), and when the server runs on this
machine (``--pgdata``, its data folder) the CPU time of every child of its postmaster is
read before and after each search from ``/proc/PID/schedstat`` (ns; ``stat``'s 10 ms
ticks are too coarse for one search). Other sessions' work on that server counts too:
run it on a server nobody else uses.

Hybrid uses the perf bench's stand-in vectors (``bench/corpus.standin_vectors``; the
library must hold them already, as ``bench perf --hybrid`` leaves it); the question's
embedding is looked up, not computed, and left out of the wall time.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kb_mcp.bench.metrics import percentile
from kb_mcp.bench.perf import (
    DATA_DIR,
    STANDIN_MARK,
    TOP_K,
    WARMUP,
    RealSet,
    load_sets,
    standin_embedder,
)
from kb_mcp.errors import InvalidInput, NotFound, Unavailable
from kb_mcp.settings import Store
from kb_mcp.store.postgres import url as postgres_url

MODES = ("keyword", "hybrid")


def server_cpu_ns(pgdata: Path) -> dict[int, int]:
    """CPU time so far of each child of the server's postmaster (the backends serving
    this process's pool among them), by process id."""
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
    spent = {}
    for pid in children:
        with contextlib.suppress(FileNotFoundError):  # ended since the list was read
            spent[int(pid)] = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    return spent


def server_ms_between(before: dict[int, int], after: dict[int, int]) -> float:
    """The server's CPU between two readings: what each process present at the second
    spent since the first (all of it for one started in between). A process that ended
    in between drops out rather than making the sum go back."""
    return sum(ns - before.get(pid, 0) for pid, ns in after.items()) / 1e6


@dataclass(frozen=True, slots=True)
class Row:
    """One query set in one mode: per-question milliseconds, p50 and p95."""

    queries: str
    mode: str
    asked: int
    stopped: int  # searches stopped by the time budget (their time still counts)
    wall: tuple[float, float]
    client_cpu: tuple[float, float]
    server_cpu: tuple[float, float] | None  # None without --pgdata
    cpu: tuple[float, float]  # each question's client + server CPU

    def line(self) -> str:
        def pair(values: tuple[float, float] | None) -> str:
            return "–" if values is None else f"{values[0]:.1f} / {values[1]:.1f}"

        return (
            f"| {self.queries} | {self.mode} | {self.asked} | {pair(self.wall)} | "
            f"{pair(self.client_cpu)} | {pair(self.server_cpu)} | {pair(self.cpu)} | "
            f"{self.stopped} |"
        )


HEADER = (
    "| queries | mode | asked | wall p50 / p95 ms | client CPU | server CPU | "
    "client + server CPU | stopped |\n|---|---|---|---|---|---|---|---|"
)


def _p(values: list[float]) -> tuple[float, float]:
    return percentile(values, 50), percentile(values, 95)


def run(
    home: Path,
    store: Store,
    data: Path = DATA_DIR,
    pgdata: Path | None = None,
    modes: Sequence[str] = MODES,
) -> list[Row]:
    """Each set's questions in each mode, one set at a time (its modes back to back), each
    after ``perf.WARMUP`` untimed ones."""
    from kb_mcp.library import Library
    from kb_mcp.search.calibration import has_cjk
    from kb_mcp.settings import Settings

    if "hybrid" in modes and not (home / STANDIN_MARK).is_file():
        raise NotFound(
            f"no stand-in vectors recorded in {home}",
            hint="build with `kb-mcp bench perf --hybrid --workdir DIR` (or copy its "
            f"{STANDIN_MARK} file into the home of a library moved by migrate)",
        )
    sets: list[RealSet] = load_sets(data)
    embedder = standin_embedder(sets)
    server = (lambda: server_cpu_ns(pgdata)) if pgdata is not None else dict
    settings = Settings(home=home, max_files_per_source=10**7, embedder="local", store=store)
    rows = []
    with Library(settings, make_embedder=lambda provider, model: embedder) as library:
        if "hybrid" in modes:
            library.vectors.warm()
        for real in sets:
            for mode in modes:
                queries = [q for q in real.queries if mode == "keyword" or not has_cjk(q)]
                if not queries:
                    continue  # the stand-in model, like the real one, reads no Chinese
                wall, client, served, stopped = [], [], [], 0
                warm = queries[:WARMUP]
                for n, query in enumerate([*warm, *queries]):
                    s0, c0, w0 = server(), time.thread_time(), time.perf_counter()
                    embed_ms = 0.0
                    try:
                        result = library.lookup.search(query, top_k=TOP_K, mode=mode)
                        if mode == "hybrid" and result.fallback:
                            raise InvalidInput(f"hybrid search fell back: {result.reason}")
                        embed_ms = getattr(result, "embed_ms", None) or 0.0
                    except Unavailable:
                        stopped += n >= len(warm)
                    if n >= len(warm):
                        wall.append((time.perf_counter() - w0) * 1000 - embed_ms)
                        client.append((time.thread_time() - c0) * 1000)
                        served.append(server_ms_between(s0, server()))
                both = [a + b for a, b in zip(client, served, strict=True)]
                rows.append(
                    Row(
                        real.name,
                        mode,
                        len(wall),
                        stopped,
                        _p(wall),
                        _p(client),
                        _p(served) if pgdata is not None else None,
                        _p(both),
                    )
                )
                print(rows[-1].line(), flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kb_mcp.bench.store_search", description=__doc__
    )
    parser.add_argument("--home", type=Path, required=True, help="the library's home")
    parser.add_argument("--store", default=None, help="a postgresql:// URL (default: sqlite)")
    parser.add_argument(
        "--pgdata", type=Path, help="the PostgreSQL server's data folder, on this machine"
    )
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="the perf bench's sets")
    parser.add_argument("--mode", action="append", choices=MODES, help="default: both")
    args = parser.parse_args(argv)
    print(HEADER, flush=True)
    store = Store(postgres_url.check(args.store)) if args.store else Store()
    run(args.home, store, args.data, args.pgdata, args.mode or MODES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
