"""The bounds of every integer a caller can pass: one declaration per limit.

The MCP tool schemas (``server/tools.py`` Field bounds), the CLI's argument parsing and
the library's own validation all read these, so an agent, a person and a script meet the
same range and the same message. Issue 7 item 19: before this table ``top_k`` was capped
at 50 over MCP and 100 in the CLI, ``max_matches`` at 1,000 and 10,000, ``--top-k 0``
was accepted, and ``list(offset=2**63)`` overflowed SQLite's 64-bit integers into an
internal error.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from kb_mcp.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class Limit:
    """One bounded integer argument: its name, inclusive range, default and why."""

    name: str
    minimum: int
    maximum: int
    default: int | None
    why: str

    def problem(self, value: object) -> str | None:
        """What is wrong with ``value`` ("must be between 1 and 100, got 0"), or None."""
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be a whole number, got {value!r}"
        if not self.minimum <= value <= self.maximum:
            return f"must be between {self.minimum:,} and {self.maximum:,}, got {value:,}"
        return None

    def check(self, value: int, *, name: str | None = None) -> int:
        """``value`` when it is in range; otherwise ``InvalidInput`` naming it and its range."""
        problem = self.problem(value)
        if problem is not None:
            raise InvalidInput(f"{name or self.name} {problem}; nothing was done", hint=self.why)
        return value

    def argparse_type(self) -> Callable[[str], int]:
        """An argparse ``type=``: a usage error (exit 2) for text or an out-of-range value;
        argparse names the flag ("argument --top-k: must be between 1 and 100, got 0")."""

        def parse(raw: str) -> int:
            try:
                value = int(raw)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected a whole number, got {raw!r}") from None
            problem = self.problem(value)
            if problem is not None:
                raise argparse.ArgumentTypeError(f"{problem} ({self.why})")
            return value

        return parse


TOP_K = Limit(
    "top_k",
    1,
    100,
    8,
    "documents per search; 100 is the depth `bench retrieval` reads for recall@100",
)
MAX_MATCHES = Limit(
    "max_matches",
    1,
    1_000,
    200,
    "lines per grep call; 1,000 lines of up to 500 characters is already ~0.5 MB of output",
)
LIST_LIMIT = Limit("limit", 1, 200, 50, "documents per page of `list`; page on with offset")
OFFSET = Limit(
    "offset",
    0,
    1_000_000_000,
    0,
    "entries to skip; far beyond any library (SQLite integers overflow at 2**63)",
)
LINE = Limit(
    "line",
    1,
    100_000_000,
    None,
    "1-based line numbers; no document the readers accept holds more lines",
)

# Integer settings (config.toml / KB_MCP_* / flags); checked when settings are loaded.
SEARCH_TIMEOUT_MS = Limit(
    "search_timeout_ms", 10, 600_000, 2_000, "a search or read query's deadline in SQLite"
)
GREP_TIMEOUT_MS = Limit("grep_timeout_ms", 10, 600_000, 3_000, "one grep call's time limit")
MAX_DOCUMENT_BYTES = Limit(
    "max_document_bytes",
    1,
    50 * 1024 * 1024,
    2_000_000,
    "largest add_document text; 50 MiB is the readers' cap on any file",
)
MAX_TITLE_CHARS = Limit("max_title_chars", 1, 10_000, 300, "longest add_document title")
SYNC_INTERVAL_S = Limit(
    "sync_interval_s", 0, 7 * 24 * 3600, 300, "seconds between background syncs (0 = at start)"
)
MAX_FILES_PER_SOURCE = Limit(
    "max_files_per_source", 1, 10_000_000, 20_000, "files per folder source, newest kept"
)
WEB_CLIENT_TIMEOUT_S = Limit(
    "web_client_timeout_s",
    1,
    3_600,
    10,
    "seconds a web client may keep the server waiting: to send a request, to read its answer",
)
WEB_MAX_CONNECTIONS = Limit(
    "web_max_connections", 1, 10_000, 64, "open connections to the web view; past it: 503"
)

LIMITS: tuple[Limit, ...] = (
    TOP_K,
    MAX_MATCHES,
    LIST_LIMIT,
    OFFSET,
    LINE,
    SEARCH_TIMEOUT_MS,
    GREP_TIMEOUT_MS,
    MAX_DOCUMENT_BYTES,
    MAX_TITLE_CHARS,
    SYNC_INTERVAL_S,
    MAX_FILES_PER_SOURCE,
    WEB_CLIENT_TIMEOUT_S,
    WEB_MAX_CONNECTIONS,
)
