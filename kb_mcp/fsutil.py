"""Filesystem primitives with guarantees: atomic writes, their crash leftovers, advisory
locks that die with their process, and contained path joins.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

from kb_mcp.errors import InvalidInput

try:  # Linux and macOS; Windows gets msvcrt byte-range locks below
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None  # type: ignore[assignment]
    import msvcrt

# ``atomic_write``'s temp names: ``.<target name>.<8 random chars>.tmp`` (``tempfile.mkstemp``
# draws the 8 from ``[a-z0-9_]``). Only names of this shape are ever cleaned up.
TEMP_NAME = re.compile(r"\A\..+\.[a-z0-9_]{8}\.tmp\Z")
# A temp file younger than this may belong to a write in progress in another process
# (a write takes milliseconds; the margin covers a slow disk and clock steps).
STALE_TEMP_SECONDS = 60.0


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half.

    The temp file lives in the same folder (``os.replace`` is atomic only within one
    filesystem), is fsynced before the rename, and the folder is fsynced after it so the
    rename itself survives a crash. The temp file is locked while it is written, so
    ``remove_stale_temps`` in another process can tell a live write from a crash leftover.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            _lock_fd(handle.fileno(), blocking=False)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def is_atomic_temp(path: Path) -> bool:
    """True for a name ``atomic_write`` gives its temp files; nothing else ever is one."""
    return TEMP_NAME.match(path.name) is not None


def remove_stale_temps(folder: Path, min_age_s: float = STALE_TEMP_SECONDS) -> list[str]:
    """Delete the temp files crashed ``atomic_write`` calls left in ``folder``; their names.

    A temp file goes only when it has our name pattern, is older than ``min_age_s`` and no
    live writer holds its lock: another process on the same home may be mid-write. Files
    that cannot be inspected or removed are left for the next open (best effort: a leftover
    costs a few bytes, a wrong delete would cost a document).
    """
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    now = time.time()
    removed = []
    for entry in entries:
        if is_atomic_temp(entry) and _remove_if_stale(entry, now - min_age_s):
            removed.append(entry.name)
    return removed


def _remove_if_stale(path: Path, cutoff: float) -> bool:
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_mtime > cutoff:
            return False
        with path.open("rb") as handle:
            if not _lock_fd(handle.fileno(), blocking=False):
                return False  # a live writer holds it
            path.unlink()
    except OSError:
        return False
    return True


class FileLock:
    """An advisory lock on ``path`` (created if missing), released when its process dies.

    ``flock`` locks belong to the open file, so two ``FileLock`` objects conflict even in
    one process, and a ``kill -9`` releases them: a held lock always means a live holder.
    The holder's pid is written into the file, for messages.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, *, blocking: bool = False) -> bool:
        """Take the lock (exclusive); False when ``blocking`` is off and someone holds it."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this FileLock")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        if not _lock_fd(fd, blocking=blocking):
            os.close(fd)
            return False
        self._fd = fd
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(os.getpid()).encode("ascii"))
        return True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the last descriptor releases the lock

    def holder_pid(self) -> int | None:
        """The pid the current (or last) holder wrote, if any."""
        try:
            return int(self.path.read_text(encoding="ascii").strip() or "x")
        except (OSError, ValueError):
            return None

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _lock_fd(fd: int, *, blocking: bool) -> bool:
    """Lock an open file exclusively; False when it is held elsewhere and not ``blocking``."""
    if fcntl is not None:
        flags = fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB)
        try:
            fcntl.flock(fd, flags)
        except BlockingIOError:
            return False
        return True
    mode = msvcrt.LK_LOCK if blocking else msvcrt.LK_NBLCK  # pragma: no cover
    try:  # pragma: no cover
        msvcrt.locking(fd, mode, 1)
    except OSError:  # pragma: no cover
        return False
    return True  # pragma: no cover


def contained_join(root: Path, relative: str) -> Path:
    """``root / relative``, refusing any result that escapes ``root`` (``..``, absolute)."""
    candidate = (root / relative).resolve()
    if not candidate.is_relative_to(root.resolve()):
        raise InvalidInput(f"path {relative!r} escapes {root}")
    return candidate
