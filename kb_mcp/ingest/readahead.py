"""Which files a sync reads where, and in what order they reach the writer.

``read_ahead`` yields ``(file, work)`` in walk order. With a pool (``reader_pool``: a
sync of ``PARALLEL_MIN_FILES`` files or more) files are read in spawned worker processes
ahead of the writer, at most ``READ_AHEAD`` files and ``READ_AHEAD_BYTES`` in flight;
a large file (``filework.LARGE_FILE_BYTES``) is read in the writer when its turn comes;
PDFs (a sync reads them after every other file is committed: ``ingest/sync``) are
converted in bounded processes of their own, ``BOUNDED_WORKERS`` at a time
(``_BoundedReads``). Reading functions are looked up on
``filework`` when called, so a bench can hand the pool another one by name
(``bench/graph_cost``, ``bench/ingest_cpu``).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path

from kb_mcp.errors import Unavailable
from kb_mcp.ingest import filework
from kb_mcp.ingest.filework import FileWork
from kb_mcp.ingest.walk import FoundFile
from kb_mcp.ingest.workers import exit_with_parent
from kb_mcp.store import documents as rows

# Reading in worker processes pays once a sync has this many files to read (spawning a
# worker costs about 0.3 s); at most MAX_READERS workers, and READ_AHEAD files in flight.
PARALLEL_MIN_FILES = 400
MAX_READERS = 4
READ_AHEAD = 256
# Bytes of files in flight in the workers: a result holds about three copies of its file
# (text, chunks, index rows), pickled there and unpickled in the writer.
READ_AHEAD_BYTES = 32 * 1024 * 1024
# Bounded conversions run this many at a time (one per core of the 2-core machine the
# figures are from), from the start of their part of a sync, so PDFs convert while the
# ones before them are written; at most BOUNDED_AHEAD are started or done ahead of the
# writer, so finished conversions waiting for their turn stay few.
BOUNDED_WORKERS = 2
BOUNDED_AHEAD = 4


def stat_unchanged(found: FoundFile, previous: rows.LocationState | None) -> bool:
    """Size and mtime as recorded: the file is not opened at all."""
    return previous is not None and (previous.size, previous.mtime_ns) == (
        found.size,
        found.mtime_ns,
    )


def indexed_hash(previous: rows.LocationState | None) -> str | None:
    return previous.file_hash if previous and previous.state == "indexed" else None


_Later = tuple  # (reading function, its arguments): the file is read when its turn comes


class _BoundedReads:
    """Bounded conversions (PDFs) started ahead of the writer, ``BOUNDED_WORKERS`` at a
    time, each in its own process (``filework.read_bounded``).

    Trigger: PDFs were converted one after another when the writer reached them, so a
    folder of PDFs took the sum of their times after the text files (issue 10). Outcome:
    the first ``BOUNDED_AHEAD`` start with the sync, in threads that only wait on their
    child process, and each ``take`` starts the next; a killed conversion is that file's
    failure. ``close`` kills the conversions still running (a stopped or failed sync).
    """

    def __init__(self, root: Path, files: list[FoundFile], hashes: dict[str, str | None],
                 pdf_mode: str) -> None:  # fmt: skip
        self._args = [(root, f, hashes.get(f.rel), filework.utc_now(), pdf_mode) for f in files]
        self._cancel = threading.Event()
        self._threads = ThreadPoolExecutor(BOUNDED_WORKERS, thread_name_prefix="kb-mcp-bounded")
        self._futures: dict[str, Future[FileWork]] = {}
        self._next = 0
        while self._next < min(BOUNDED_AHEAD, len(self._args)):
            self._start_next()

    def _start_next(self) -> None:
        args = self._args[self._next]
        self._futures[args[1].rel] = self._threads.submit(
            filework.read_bounded, *args, self._cancel
        )
        self._next += 1

    def take(self, found: FoundFile) -> Future[FileWork]:
        """The conversion of ``found`` (started now if it was not yet), and the next one
        started; files are taken in the order they were given."""
        while found.rel not in self._futures and self._next < len(self._args):
            self._start_next()
        future = self._futures.pop(found.rel)
        if self._next < len(self._args):
            self._start_next()
        return future

    def close(self) -> None:
        self._cancel.set()
        self._threads.shutdown(wait=True, cancel_futures=True)


def read_ahead(
    root: Path,
    files: tuple[FoundFile, ...],
    known: dict[str, rows.LocationState],
    pool: ProcessPoolExecutor | None,
    pdf_mode: str = "layout",
) -> Iterator[tuple[FoundFile, FileWork | None]]:
    """``(file, work)`` in walk order; work is None for a file whose stat is unchanged.

    With a pool, files are read in worker processes ahead of the writer, at most
    ``READ_AHEAD`` files and ``READ_AHEAD_BYTES`` of them in flight, so memory stays
    bounded however large the folder and its files. A file over ``filework.LARGE_FILE_BYTES`` is
    read in this process when its turn comes: its text, chunks and index rows would
    otherwise exist twice (pickled in the worker, unpickled here), and only one such
    file is in memory at a time.
    """
    now = filework.utc_now()
    pending: deque[tuple[FoundFile, Future[FileWork] | _Later | None]] = deque()
    in_flight = 0
    bounded = [
        f for f in files if filework.is_bounded(f) and not stat_unchanged(f, known.get(f.rel))
    ]
    hashes = {f.rel: indexed_hash(known.get(f.rel)) for f in bounded}
    conversions = _BoundedReads(root, bounded, hashes, pdf_mode) if bounded else None
    try:
        for found in files:
            previous = known.get(found.rel)
            args = (root, found, indexed_hash(previous), now)
            pooled = False
            if stat_unchanged(found, previous):
                pending.append((found, None))
            elif conversions is not None and filework.is_bounded(found):
                pending.append((found, conversions.take(found)))
            elif pool is None or found.size > filework.LARGE_FILE_BYTES:
                pending.append((found, (filework.read_file, args)))
            else:
                pending.append(
                    (found, pool.submit(filework.read_without_gc, filework.read_file, *args))
                )
                pooled = True
            in_flight += found.size if pooled else 0
            while pending and (
                pool is None or len(pending) > READ_AHEAD or in_flight > READ_AHEAD_BYTES
            ):
                item = pending.popleft()
                if (
                    pool is not None
                    and isinstance(item[1], Future)
                    and not filework.is_bounded(item[0])
                ):
                    in_flight -= item[0].size
                yield _resolve(item)
        yield from _drain(pending)
    finally:
        if conversions is not None:
            conversions.close()


def _drain(
    pending: deque[tuple[FoundFile, Future[FileWork] | _Later | None]],
) -> Iterator[tuple[FoundFile, FileWork | None]]:
    while pending:
        yield _resolve(pending.popleft())


def _resolve(
    item: tuple[FoundFile, Future[FileWork] | _Later | None],
) -> tuple[FoundFile, FileWork | None]:
    found, future = item
    if future is None:
        return found, None
    if isinstance(future, tuple):
        read, args = future
        return found, read(*args)
    try:
        return found, future.result()
    except BrokenProcessPool as exc:
        # Every file in flight fails with the pool, so the culprit is unknown: none is
        # recorded as failed, the batches committed so far are kept, and the source ends
        # in ``error`` with this message.
        raise Unavailable(
            f"a reader worker process died (killed or crashed) around {found.rel}",
            hint="run the sync again: it resumes where this one stopped",
        ) from exc
    except Exception as exc:  # the work could not come back from the worker (pickling)
        return found, FileWork(found, filework.utc_now(), failure=filework.failure_reason(exc))


@contextmanager
def reader_pool(files_to_read: int) -> Iterator[ProcessPoolExecutor | None]:
    """Worker processes for reading, converting and chunking, when there is enough to read.

    Parsing is pure Python and the database writer is one thread, so on a large sync the
    work splits across cores. Workers are spawned (never forked: the server has threads
    and open database connections), are stopped with pending work cancelled, and exit
    by themselves when this process dies (``workers.exit_with_parent``).
    """
    workers = min(MAX_READERS, os.cpu_count() or 1)
    if files_to_read < PARALLEL_MIN_FILES or workers < 2:
        yield None
        return
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=exit_with_parent,
        initargs=(os.getpid(),),
    )
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
