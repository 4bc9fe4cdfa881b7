"""Reader worker processes that never outlive the process that started them.

A ``ProcessPoolExecutor`` worker waits on its call queue, and it holds that queue's write
end itself, so a parent killed with ``kill -9`` never gives it an end-of-file: before
issue 7 (item 15) 36 kills of ``kb-mcp serve`` / ``sync`` left 18 orphans (439 MB).
``exit_with_parent`` is the pool's initializer, run in each worker before any task. On
Linux it asks the kernel for SIGKILL when the parent goes (``PR_SET_PDEATHSIG``); and on
every platform a daemon thread polls the parent pid and exits the worker once it changed
(a dead parent's children are re-parented), which also covers the kernel rule's one gap:
``PDEATHSIG`` fires when the *thread* that spawned the worker ends, not the process.

``run_bounded`` runs one conversion (a PDF) in a child of its own under a CPU-time and
a memory bound, so a file that overruns is killed and recorded as failed with the reason.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

PARENT_POLL_S = 0.5  # how soon a worker notices its parent is gone, when the kernel cannot
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def exit_with_parent(parent_pid: int) -> None:
    """Pool initializer: end this worker process as soon as ``parent_pid`` is gone."""
    if sys.platform.startswith("linux"):
        _ask_kernel_for_sigkill_on_parent_death()
    if os.getppid() != parent_pid:  # the parent died before this worker got here
        os._exit(1)
    watcher = threading.Thread(
        target=_watch_parent, args=(parent_pid,), name="kb-mcp-parent-watch", daemon=True
    )
    watcher.start()


def _ask_kernel_for_sigkill_on_parent_death() -> None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no usable libc: the polling thread still covers it
        pass


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent_pid:
            os._exit(1)  # no cleanup to do: a reader holds no locks and writes nothing


# --- bounded conversions ---------------------------------------------------------------------

_POLL_S = 0.05  # how often the parent looks at a bounded child's clock and memory
# A child that is not using its CPU (waiting, stopped) is still stopped after this many
# times its CPU bound of wall-clock time.
WALL_FACTOR = 5


def run_bounded(
    fn: Callable[..., T],
    args: tuple,
    *,
    seconds: float,
    max_rss_bytes: int,
    cancel: threading.Event | None = None,
) -> tuple[T | None, str | None]:
    """``fn(*args)`` in a process of its own, killed past ``seconds`` of CPU time or
    ``max_rss_bytes``.

    Trigger: a PDF conversion (pymupdf4llm's layout model) took 508 MB and minutes on
    one user's two files, in the process that also writes the database (issue 10).
    Outcome: it runs in a spawned child that exits with its parent; the parent waits
    for the result, reading the child's resident memory from ``/proc`` meanwhile (where
    there is none, only the time bound holds), and kills it when a bound is passed.
    Returns ``(result, None)``, or ``(None, reason)`` when the child was killed or died;
    ``cancel`` set (a sync that stopped) kills it too.

    The time bound is the child's own CPU time (``/proc``; wall-clock time where there
    is none): on a loaded 2-core machine a wall-clock bound stopped four of five real
    36-111 page PDFs that needed 25-75 s of CPU each, which then stayed failed (issue 22).
    ``WALL_FACTOR`` times the bound in wall-clock time still stops a child that waits.
    """
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(
        target=_bounded_child, args=(sender, os.getpid(), fn, args), name="kb-mcp-bounded"
    )
    child.start()
    sender.close()
    try:
        return _await_bounded(child, receiver, seconds, max_rss_bytes, cancel)
    finally:
        receiver.close()
        if child.is_alive():
            child.kill()
        child.join()


def _await_bounded(
    child: multiprocessing.process.BaseProcess,
    receiver: multiprocessing.connection.Connection,
    seconds: float,
    max_rss_bytes: int,
    cancel: threading.Event | None = None,
) -> tuple[object | None, str | None]:
    started = time.monotonic()
    while not receiver.poll(_POLL_S):
        if cancel is not None and cancel.is_set():
            return None, "the sync stopped before the conversion ended"
        if not child.is_alive() and not receiver.poll(0):
            return None, f"the conversion process died (exit code {child.exitcode})"
        waited = time.monotonic() - started
        cpu = _cpu_seconds(child.pid)
        if (cpu if cpu is not None else waited) > seconds:
            return None, f"conversion took longer than {seconds:g} s of CPU and was stopped"
        if waited > seconds * WALL_FACTOR:
            return None, (
                f"conversion took longer than {seconds * WALL_FACTOR:g} s and was stopped"
            )
        rss = _resident_bytes(child.pid)
        if rss is not None and rss > max_rss_bytes:
            return None, (
                f"conversion needed more than {max_rss_bytes // 2**20} MB of memory and was stopped"
            )
    try:
        return receiver.recv(), None
    except (EOFError, OSError) as exc:
        return None, f"the conversion process died ({type(exc).__name__})"


def _bounded_child(
    sender: multiprocessing.connection.Connection, parent_pid: int, fn: Callable, args: tuple
) -> None:
    exit_with_parent(parent_pid)
    sender.send(fn(*args))
    sender.close()


def _cpu_seconds(pid: int | None) -> float | None:
    """A process's user + system CPU seconds from ``/proc/<pid>/stat``; None where unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # past the name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _resident_bytes(pid: int | None) -> int | None:
    """A process's resident memory from ``/proc/<pid>/statm``; None where unreadable."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
