"""Append-only audit log of tool calls: tool, duration, outcome — never arguments or text.

One JSON object per line in ``<home>/audit.log``. What an agent asked and what it got
back may be private; that a call happened, how long it took and whether it failed is
what a user needs to see what their agents do.
"""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastmcp.server.middleware import Middleware
from pydantic import ValidationError

from kb_mcp.views import AUDIT_FILE

__all__ = ["AUDIT_FILE", "AuditMiddleware", "record_call"]
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


_CODE = re.compile(r"^\[(\w+)\]")


def _outcome(exc: BaseException) -> str:
    """``error:<code>`` from a kb-mcp tool error, ``error:invalid_input`` for a rejected
    argument, else ``error:internal``."""
    if isinstance(exc, ValidationError) or isinstance(exc.__cause__, ValidationError):
        return "error:invalid_input"
    found = _CODE.match(str(exc))
    return f"error:{found[1]}" if found else "error:internal"


class AuditMiddleware(Middleware):
    """Audits every ``tools/call``, including calls rejected before the tool runs."""

    def __init__(self, home: Path) -> None:
        self.home = home

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        started = time.perf_counter()
        outcome = "ok"
        try:
            result = await call_next(context)
            if getattr(result, "is_error", False):
                outcome = "error"
            return result
        except Exception as exc:
            outcome = _outcome(exc)
            raise
        finally:
            elapsed = (time.perf_counter() - started) * 1000
            record_call(self.home, context.message.name, elapsed, outcome)
