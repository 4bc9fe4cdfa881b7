"""What a folder sync left out, kept per source so ``list`` and ``doctor`` can name it.

"skipped: hidden 13, junk 1, pruned 2, sensitive 5, unsupported 118" said nothing about
which files, nor how to read one anyway (issue 20 item 9). A sync stores, in its
source's status, the count per skip reason and the first ``walk.SKIPPED_EXAMPLES``
paths of each (in path order): a bounded sample, not a row per file, because skipped
files are not documents and a home folder skips hundreds of thousands. ``kb-mcp list
SOURCE --skipped`` walks the folder again to name them all.

Every stored path goes through ``store.paths.shown_path``, as locations' paths do: a file refused as
sensitive may carry its secret in its name (``password=hunter2.txt``), and the library
must not keep what it refused to read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from kb_mcp.ingest.walk import SKIP_HINTS, WalkResult
from kb_mcp.library.results import SkippedGroup
from kb_mcp.store.paths import shown_path

__all__ = ["groups", "summary", "walk_groups"]


def summary(walk: WalkResult) -> str:
    """The JSON a sync stores for its source: counts and redacted example paths."""
    return json.dumps(
        {
            "counts": dict(walk.skipped),
            "paths": {
                reason: [shown_path(path) for path in paths]
                for reason, paths in walk.skipped_paths.items()
            },
        },
        ensure_ascii=False,
        sort_keys=True,
    )


def groups(stored: str | None) -> tuple[SkippedGroup, ...]:
    """The stored summary as one group per reason, the most skipped first; none before
    the source's first sync (or when the summary cannot be read: it is rebuilt by the
    next sync)."""
    if not stored:
        return ()
    try:
        data = json.loads(stored)
        counts: Mapping[str, int] = data["counts"]
        paths: Mapping[str, list[str]] = data.get("paths", {})
    except (ValueError, KeyError, TypeError):
        return ()
    return tuple(
        SkippedGroup(reason, int(count), tuple(paths.get(reason, ())), SKIP_HINTS.get(reason, ""))
        for reason, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        if count
    )


def walk_groups(walk: WalkResult) -> tuple[SkippedGroup, ...]:
    """A walk's skips as groups, every path redacted (``list SOURCE --skipped``)."""
    return groups(summary(walk))
