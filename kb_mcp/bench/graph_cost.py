"""What heuristic entity extraction costs at ingest: a real folder synced twice.

``python -m kb_mcp.bench.graph_cost FOLDER [--rounds N]`` syncs FOLDER into fresh homes,
alternating a normal sync with one whose graph step (``index/graph.add_chunks``) does
nothing, and prints the median files per second of each and their ratio, and the median
CPU seconds of this (the writer) process: the wall-time ratio moves with the machine's
load, the writer's CPU shows where the graph step's cost is. Issue 9 asks that ingest
with heuristic extraction stay within 25 % of ingest without it.

The graph step is switched off here by replacing that one function for the duration of
a round, in this process only: a measurement, never a product setting (the graph is
derived data every search leg may rely on).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kb_mcp.index import graph
from kb_mcp.library import Library
from kb_mcp.settings import Settings


def _sync_seconds(folder: Path, *, with_graph: bool) -> tuple[float, float, int]:
    home = Path(tempfile.mkdtemp(prefix="kb-mcp-graph-cost-"))
    original = graph.add_chunks
    try:
        if not with_graph:
            graph.add_chunks = lambda conn, chunks, code=False: None  # type: ignore[assignment]
        with Library(Settings(home=home, embedder="none", max_files_per_source=100_000)) as lib:
            lib.add_folder(folder)
            started, cpu = time.perf_counter(), time.process_time()
            (report,) = lib.sync()
            return time.perf_counter() - started, time.process_time() - cpu, report.added
    finally:
        graph.add_chunks = original
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    timings: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    files = 0
    for _ in range(args.rounds):
        for with_graph in (False, True):
            seconds, cpu_seconds, files = _sync_seconds(args.folder, with_graph=with_graph)
            timings[with_graph].append(seconds)
            cpu[with_graph].append(cpu_seconds)
    without = statistics.median(timings[False])
    with_ = statistics.median(timings[True])
    cpu_without, cpu_with = statistics.median(cpu[False]), statistics.median(cpu[True])
    print(
        f"{files} files; without graph {files / without:.1f} files/s ({without:.2f} s), "
        f"with heuristic graph {files / with_:.1f} files/s ({with_:.2f} s); "
        f"throughput ratio {without / with_:.3f}; "
        f"CPU of this process {cpu_without:.2f} s / {cpu_with:.2f} s "
        f"(ratio {cpu_without / cpu_with:.3f}; reader processes not counted)"
    )


if __name__ == "__main__":
    main()
