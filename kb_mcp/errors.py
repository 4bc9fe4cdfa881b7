"""The one error tree of kb-mcp.

Every failure a caller can act on is a ``KbError`` subclass with a stable ``code``,
a message that says what went wrong and with which input, and an optional ``hint``
that says what to do next. Exceptions from apsw, pymupdf, ollama or the OS are
caught where we call those libraries and re-raised as one of these with ``from``.
Adapters render them once: the MCP server as a tool error, the CLI as stderr plus
an exit code. Anything that is not a ``KbError`` is a bug ("internal error").
"""

from __future__ import annotations


class KbError(Exception):
    """Base of every expected kb-mcp failure."""

    code = "error"
    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        """One human-readable line (two with a hint), as shown to agents and people."""
        return f"{self.message}\nhint: {self.hint}" if self.hint else self.message


class InvalidInput(KbError):
    """The caller's input is malformed or out of bounds; nothing was changed."""

    code = "invalid_input"
    exit_code = 2


class NotFound(KbError):
    """The named document, source or range does not exist."""

    code = "not_found"
    exit_code = 3


class Refused(KbError):
    """The request is well formed but policy forbids it (writes off, sensitive path)."""

    code = "refused"
    exit_code = 4


class Unavailable(KbError):
    """A needed component is missing or failing (optional extra, embedder, database)."""

    code = "unavailable"
    exit_code = 5


class SearchTimedOut(Unavailable):
    """A search's database work passed ``search_timeout_ms`` and was stopped. Its own
    class so a bench can count it as a miss instead of losing the whole run."""


class NoSpace(Unavailable):
    """The device holding the library is full (ENOSPC, SQLite's "disk is full"); what was
    stored before is intact. Its own class so ``reindex --rebuild`` never takes it for a
    damaged database and moves the file aside."""


class Conflict(KbError):
    """The request collides with existing state (duplicate name, busy library)."""

    code = "conflict"
    exit_code = 6


class Unreadable(KbError):
    """A file could not be turned into text; the message says why (image-only PDF, binary)."""

    code = "unreadable"
    exit_code = 7
