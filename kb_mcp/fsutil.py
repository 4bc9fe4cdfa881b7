"""Filesystem primitives with guarantees: atomic writes and contained path joins."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kb_mcp.errors import InvalidInput


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half.

    The temp file lives in the same folder (``os.replace`` is atomic only within one
    filesystem), is fsynced before the rename, and the folder is fsynced after it so the
    rename itself survives a crash.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
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


def contained_join(root: Path, relative: str) -> Path:
    """``root / relative``, refusing any result that escapes ``root`` (``..``, absolute)."""
    candidate = (root / relative).resolve()
    if not candidate.is_relative_to(root.resolve()):
        raise InvalidInput(f"path {relative!r} escapes {root}")
    return candidate
