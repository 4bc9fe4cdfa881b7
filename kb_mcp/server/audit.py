"""Append-only audit log of tool calls: tool, duration, outcome — never arguments or text.

One JSON object per line in ``<home>/audit.log``. What an agent asked and what it got
back may be private; that a call happened, how long it took and whether it failed is
what a user needs to see what their agents do.

``record_call`` is the writer; FastMCP's calls reach it through ``tools.AuditMiddleware``.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path

from kb_mcp.home import AUDIT_FILE  # the reader of the log (views.py) names it too

__all__ = ["AUDIT_FILE", "record_call"]
_lock = threading.Lock()


def record_call(home: Path, tool: str, duration_ms: float, outcome: str) -> None:
    """Append one line; a failure to log never fails the call it describes."""
    line = json.dumps(
        {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "tool": tool,
            "duration_ms": round(duration_ms, 1),
            "outcome": outcome,
        }
    )
    try:
        home.mkdir(parents=True, exist_ok=True)  # a call may come before the library opens
        with _lock, open(home / AUDIT_FILE, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    except OSError:
        pass
