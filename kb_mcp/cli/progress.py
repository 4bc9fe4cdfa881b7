"""A one-line progress bar on stderr (only when stderr is a terminal)."""

from __future__ import annotations

import sys
import time

from kb_mcp.redact import redact


class ProgressBar:
    """``bar(done, total, label)`` redraws at most ten times a second; ``close()`` ends the line."""

    def __init__(self, title: str, width: int = 30) -> None:
        self.title = title
        self.width = width
        self.enabled = sys.stderr.isatty()
        self._last = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int, label: str = "") -> None:
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.1 and done != total):
            return
        self._last = now
        filled = int(self.width * done / total) if total else self.width
        bar = "#" * filled + "-" * (self.width - filled)
        shown = redact(label).text[-40:]  # a file's name may hold a secret (issue 20)
        sys.stderr.write(f"\r{self.title} [{bar}] {done}/{total} {shown:<40}")
        sys.stderr.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()
