"""glibc malloc in the server: few arenas and a fixed mmap threshold (issue 10 memory).

Trigger: glibc gives every thread that allocates its own arena (up to 8 per core), and
memory freed in one arena serves only that arena's threads. ``kb-mcp serve`` runs its
tool calls in a pool of worker threads that come and go, embeds each question in a
thread of its own (``search/vector.embed_within``), and loads the model, syncs and
embeds in background threads: each left its freed blocks in an arena of its own, which
the next thread did not reuse.

Trigger too: glibc serves a block over its mmap threshold with a mapping of its own,
given back on ``free``, but after freeing one it raises the threshold to that block's
size (up to 32 MiB). Loading the model (``embed/local.py``: onnxruntime folds the int8
weights into 90 MB of floats, through large temporaries) and the vector codes
(``index/vectors.py``) free such blocks, so from then on every large buffer came from
the heap, and what was freed there stayed resident. A fixed threshold
(``MMAP_THRESHOLD_BYTES``) keeps large buffers in mappings of their own.

``configure`` is called first thing in ``serve`` (before any thread starts), through
``mallopt`` (ctypes): the variables ``MALLOC_ARENA_MAX`` and ``MALLOC_MMAP_THRESHOLD_``
are read by glibc only at process start, too late for a process already running.
Elsewhere (musl, macOS, Windows) it does nothing and says so. Figures (300k chunks,
``tests/server_rss.py``): docs/architecture.md ("Server memory").
"""

from __future__ import annotations

import ctypes

# Arenas in all: the main one and one shared by every other thread. With the GIL held
# around most allocations, threads rarely contend for an arena's lock.
ARENA_MAX = 2
# Blocks from 1 MiB up get a mapping of their own (and the heap's top is trimmed past
# it). At 300k chunks, hybrid, 200 searches: steady RSS 441 MB with the arena cap alone,
# 352 MB with 256 KiB, 344 MB with 1 MiB; a question's embedding took the same CPU with
# 1 MiB as with glibc's default (10.05 / 9.92 ms median, three alternating runs).
MMAP_THRESHOLD_BYTES = 1 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # glibc malloc.h


def configure() -> bool:
    """Cap the arenas at ``ARENA_MAX`` and fix the mmap threshold; False when the C
    library is not glibc (or refuses), and nothing changed."""
    libc = _glibc()
    if libc is None:
        return False
    return all(
        libc.mallopt(option, value)
        for option, value in (
            (_M_ARENA_MAX, ARENA_MAX),
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
            (_M_TRIM_THRESHOLD, MMAP_THRESHOLD_BYTES),
        )
    )


def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (it has ``gnu_get_libc_version``).

    ``CDLL(None)`` is the symbols already loaded, libc's among them: no library search
    (``ctypes.util.find_library`` runs ``ldconfig``, a process, at every start-up).
    """
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # Windows has no CDLL(None)
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    return libc
