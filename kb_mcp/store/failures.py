"""A damaged ``kb.db`` or a full disk, as the errors a person can act on (issue 20 items 4, 5).

Both can surface from any statement or any file write: a damaged page is met by whichever
query reads it (a search, a grep, a sync), and a full disk by whichever write comes next
(``add_document``'s file under ``docs/``, a sync's batch, a reindex, the WAL). So they
are not caught at each call site: the adapters (``server/calls.py``, ``cli/main.py``,
``web/``) ask ``storage_failure`` in the one branch where anything unexpected would
become "internal error", and answer the ``Unavailable`` it gives. A write that failed
this way was rolled back whole (``Database.write``), so nothing acknowledged is lost,
and writes work again once there is space.

Checked along the exception's chain (``__cause__`` / ``__context__``), so a failure
re-raised by another layer is still recognised.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Iterator
from pathlib import Path

import apsw

from kb_mcp.errors import KbError, NoSpace, Unavailable
from kb_mcp.home import DB_FILE

REBUILD_HINT = (
    "run `kb-mcp reindex --rebuild` (stop kb-mcp servers first): it moves the damaged "
    "file aside (kept, not deleted) and rebuilds the index from your folders and docs/"
)
# An I/O error while the device has less than this free is taken for a full disk: SQLite
# reports some failed writes as SQLITE_IOERR (a short write) rather than SQLITE_FULL.
NEARLY_FULL_BYTES = 1 << 20
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def storage_failure(exc: BaseException, home: Path) -> KbError | None:
    """The ``Unavailable`` for a damaged database or a full disk under ``exc``, else None."""
    for link in _chain(exc):
        if isinstance(link, (apsw.CorruptError, apsw.NotADBError)):
            return damaged(home / DB_FILE, link)
        if _is_no_space(link, home):
            return no_space(home)
    return None


def damaged(path: Path, exc: BaseException) -> Unavailable:
    return Unavailable(f"the library database {path} is damaged ({exc})", hint=REBUILD_HINT)


def no_space(home: Path) -> NoSpace:
    return NoSpace(
        f"no space left on the device holding {home}; nothing was changed",
        hint="free some space on that device and try again; what was stored before is intact",
    )


def _is_no_space(exc: BaseException, home: Path) -> bool:
    if isinstance(exc, apsw.FullError):
        return True
    if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
        return True
    return isinstance(exc, apsw.IOError) and _free_bytes(home) < NEARLY_FULL_BYTES


def _free_bytes(home: Path) -> int:
    try:
        return shutil.disk_usage(home).free
    except OSError:
        return NEARLY_FULL_BYTES  # unknown: not taken for a full disk


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__
