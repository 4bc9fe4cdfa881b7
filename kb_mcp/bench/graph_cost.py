"""What the linking phase costs at ingest: a real folder synced twice.

``python -m kb_mcp.bench.graph_cost FOLDER [--rounds N]`` syncs FOLDER into fresh homes,
alternating a sync followed by the linking phase (``ingest/links``: entity extraction,
relation detection and matching, near-duplicates) with the keyword phase alone
(``library.folders.sync(link=False)``), and prints the median files per second of each and their
ratio, and the median CPU seconds of this (the writer) process and of the worker
processes: the wall-time ratio moves with the machine's load, the CPU shows where the
cost is. Issue 9 asked that ingest with heuristic extraction stay within 25 % of ingest
without it; since issue 22 the extraction comes after the folder is keyword-searchable.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kb_mcp.library import Library
from kb_mcp.settings import Settings


def _children_cpu() -> float:
    """CPU seconds of the reader processes that ended (the pool joins them at the end)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _sync_seconds(folder: Path, *, with_graph: bool) -> tuple[float, float, float, int]:
    """Wall seconds, this (the writer) process's CPU, the readers' CPU, files added."""
    home = Path(tempfile.mkdtemp(prefix="kb-mcp-graph-cost-"))
    try:
        with Library(Settings(home=home, embedder="none", max_files_per_source=100_000)) as lib:
            lib.folders.add_folder(folder)
            started, cpu, readers = time.perf_counter(), time.process_time(), _children_cpu()
            (report,) = lib.folders.sync(link=with_graph)
            wall, writer = time.perf_counter() - started, time.process_time() - cpu
            return wall, writer, _children_cpu() - readers, report.added
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    timings: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    readers: dict[bool, list[float]] = {True: [], False: []}
    files = 0
    for _ in range(args.rounds):
        for with_graph in (False, True):
            seconds, writer_s, readers_s, files = _sync_seconds(args.folder, with_graph=with_graph)
            timings[with_graph].append(seconds)
            cpu[with_graph].append(writer_s)
            readers[with_graph].append(readers_s)
    without = statistics.median(timings[False])
    with_ = statistics.median(timings[True])
    cpu_without, cpu_with = statistics.median(cpu[False]), statistics.median(cpu[True])
    print(
        f"{files} files; without graph {files / without:.1f} files/s ({without:.2f} s), "
        f"with heuristic graph {files / with_:.1f} files/s ({with_:.2f} s); "
        f"throughput ratio {without / with_:.3f}; "
        f"CPU of this process {cpu_without:.2f} s / {cpu_with:.2f} s "
        f"(ratio {cpu_without / cpu_with:.3f}); reader processes "
        f"{statistics.median(readers[False]):.2f} s / {statistics.median(readers[True]):.2f} s"
    )


if __name__ == "__main__":
    main()
