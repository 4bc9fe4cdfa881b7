"""Reader worker processes that never outlive the process that started them.

A ``ProcessPoolExecutor`` worker waits on its call queue, and it holds that queue's write
end itself, so a parent killed with ``kill -9`` never gives it an end-of-file: before
issue 7 (item 15) 36 kills of ``kb-mcp serve`` / ``sync`` left 18 orphans (439 MB).
``exit_with_parent`` is the pool's initializer, run in each worker before any task. On
Linux it asks the kernel for SIGKILL when the parent goes (``PR_SET_PDEATHSIG``); and on
every platform a daemon thread polls the parent pid and exits the worker once it changed
(a dead parent's children are re-parented), which also covers the kernel rule's one gap:
``PDEATHSIG`` fires when the *thread* that spawned the worker ends, not the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

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
