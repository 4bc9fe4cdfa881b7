"""Where a sync's CPU goes: a folder synced into a fresh library, writer and readers apart.

``python -m kb_mcp.bench.ingest_cpu FOLDER [--profile DIR]`` syncs FOLDER once (``--perf
N``: the ``bench perf`` corpus of N chunks, written into FOLDER first if it is empty)
and prints its megabytes, the CPU seconds of this process (the writer) and of the reader
processes (``RUSAGE_CHILDREN``: the pool joins them at the end of the sync), and MB/s of
the two cores' capacity (megabytes over half the total CPU: what an idle 2-core machine
would do if both were kept busy; wall time on the shared machine is noise). Issue 10 asks
for 10 MB/s. The two phases (issue 22) are measured apart: the keyword phase (the sync,
``link=False``: the folder is keyword-searchable at its end, its wall time printed) and
the linking phase after it (``library.links.run``: entities, relations, names,
near-duplicates), each with its writer and readers' CPU.

``--profile DIR`` also runs cProfile (CPU clock) in the writer and in each reader (the
reading function handed to the pool is ``_read_file_profiled``, imported by name in each
spawned worker) and writes ``DIR/writer.prof`` and ``DIR/readers.prof``; profiling slows
both, so take the CPU figures from a run without it.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import shutil
import tempfile
import time
from pathlib import Path

from kb_mcp.ingest import filework

_READ_FILE = filework.read_file  # the real one, whichever process imports this module
_PROFILER: cProfile.Profile | None = None  # a reader worker's, made on its first file
LAST_PHASES: dict[str, float] = {}  # the last ``measure``: wall to searchable, linking CPU


def _profile_dir(parent: int) -> Path:
    """Where the reader workers of process ``parent`` dump their profiles."""
    return Path(tempfile.gettempdir()) / f"kb-mcp-ingest-profile-{parent}"


def _read_file_profiled(*args: object) -> filework.FileWork:
    """``filework.read_file`` under this worker's profiler, dumped after each file (the
    worker is stopped by the pool, so nothing runs at its exit)."""
    global _PROFILER
    if _PROFILER is None:
        _PROFILER = cProfile.Profile(time.process_time)
    _PROFILER.enable()
    try:
        return _READ_FILE(*args)  # type: ignore[arg-type]
    finally:
        _PROFILER.disable()
        folder = _profile_dir(os.getppid())
        folder.mkdir(exist_ok=True)
        _PROFILER.dump_stats(folder / f"reader-{os.getpid()}.prof")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(folder: Path, profile: Path | None = None) -> tuple[float, float, float]:
    """Megabytes of ``folder``'s files, writer CPU seconds, readers' CPU seconds (of the
    keyword phase; the linking phase's are in ``LAST_PHASES``)."""
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    megabytes = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6
    home = Path(tempfile.mkdtemp(prefix="kb-mcp-ingest-cpu-"))
    dumps = _profile_dir(os.getpid())
    shutil.rmtree(dumps, ignore_errors=True)
    writer = cProfile.Profile(time.thread_time) if profile is not None else None
    try:
        if profile is not None:
            filework.read_file = _read_file_profiled  # type: ignore[assignment]
        with Library(Settings(home=home, embedder="none", max_files_per_source=1_000_000)) as lib:
            lib.folders.add_folder(folder, "corpus")
            cpu, readers, wall = time.process_time(), _children_cpu(), time.monotonic()
            if writer is not None:
                writer.enable()
            lib.folders.sync("corpus", link=False)
            if writer is not None:
                writer.disable()
            writer_s, readers_s = time.process_time() - cpu, _children_cpu() - readers
            searchable_s = time.monotonic() - wall
            cpu, readers = time.process_time(), _children_cpu()
            lib.links.run()
            LAST_PHASES.update(
                searchable_s=searchable_s,
                link_writer_s=time.process_time() - cpu,
                link_readers_s=_children_cpu() - readers,
                link_wall_s=time.monotonic() - wall - searchable_s,
            )
    finally:
        filework.read_file = _READ_FILE
        shutil.rmtree(home, ignore_errors=True)
    if profile is not None and writer is not None:
        profile.mkdir(parents=True, exist_ok=True)
        writer.dump_stats(profile / "writer.prof")
        parts = sorted(dumps.glob("reader-*.prof"))
        if parts:
            pstats.Stats(*map(str, parts)).dump_stats(profile / "readers.prof")
        shutil.rmtree(dumps, ignore_errors=True)
    return megabytes, writer_s, readers_s


def measure_naive(folder: Path) -> tuple[float, float]:
    """Wall and CPU seconds of the naive baseline over the files a sync of ``folder``
    reads (the same walk): each file's bytes decoded as UTF-8 and inserted whole as one
    row of one FTS5 table (``index/naive.py``), in one transaction. Issue 22 bounds
    kb-mcp's keyword phase at 4x this, measured in the same run."""
    from kb_mcp.index.naive import NaiveIndex
    from kb_mcp.ingest.sources import FolderSource
    from kb_mcp.ingest.sync import walk_source

    source = FolderSource("corpus", str(folder.resolve()), gitignore=True)
    files = walk_source(source, max_files=1_000_000).files
    workdir = Path(tempfile.mkdtemp(prefix="kb-mcp-naive-"))
    try:
        wall, cpu = time.monotonic(), time.process_time()
        naive = NaiveIndex(workdir / "naive.db")
        naive.add((f.rel, f.path.read_bytes().decode("utf-8", "replace")) for f in files)
        naive.close()
        return time.monotonic() - wall, time.process_time() - cpu
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _write_perf_corpus(folder: Path, chunks: int) -> None:
    from kb_mcp.bench.perf import load_sets, passages, write_corpus

    write_corpus(folder, list(passages(load_sets(), chunks)))


def ingest_report(folder: Path, profile: Path | None = None) -> str:
    """The naive baseline, then a sync of ``folder``: both phases' CPU and the ratios."""
    naive_wall, naive_cpu = measure_naive(folder)
    megabytes, writer_s, readers_s = measure(folder, profile)
    capacity = megabytes / ((writer_s + readers_s) / 2)
    phases = LAST_PHASES
    naive_wall, naive_cpu = max(naive_wall, 1e-6), max(naive_cpu, 1e-6)  # an empty folder
    return "\n".join(
        (
            f"{megabytes:.1f} MB; keyword phase: writer CPU {writer_s:.2f} s, readers CPU "
            f"{readers_s:.2f} s; {capacity:.2f} MB/s of 2 cores' capacity; writer peak RSS "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB",
            f"keyword-searchable after {phases['searchable_s']:.1f} s wall; then linking "
            f"(entities, relations, near-duplicates): writer CPU "
            f"{phases['link_writer_s']:.2f} s, readers CPU {phases['link_readers_s']:.2f} s, "
            f"{phases['link_wall_s']:.1f} s wall",
            f"naive FTS5 table over the same files: {naive_wall:.1f} s wall, {naive_cpu:.1f} s "
            f"CPU; kb-mcp's keyword phase is {phases['searchable_s'] / naive_wall:.1f}x its "
            f"wall time and {(writer_s + readers_s) / naive_cpu:.1f}x its CPU",
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--perf", type=int, default=0, help="write the bench perf corpus")
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    if args.perf and not any(args.folder.glob("*")):
        _write_perf_corpus(args.folder, args.perf)
    print(ingest_report(args.folder, args.profile))


if __name__ == "__main__":
    main()
