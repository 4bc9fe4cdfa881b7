"""The five tools' bodies: arguments → one ``Library`` call → bound → rendered text + data.

FastMCP's tools (``server/tools.py``, which adds the schemas and the MCP result type) call
them; neither FastMCP, the MCP SDK nor pydantic is imported here, so a tool body is
testable and readable without the protocol.

``KbError`` becomes ``ToolFailed`` with ``[code] message`` (redacted: a message may quote
input), and so does a damaged database or a full disk (``store/failures.py``: an
``[unavailable]`` that says what to do); anything else becomes ``[internal] …`` with the
traceback in the server log only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

log = logging.getLogger("kb_mcp.server")
INTERNAL_ERROR = "[internal] internal error in kb-mcp; the server log has the details"


class LibraryHolder:
    """Opens the library on first use, from whichever worker thread gets there first.

    ``on_open`` runs once, right after the library opens and before any caller gets it
    (the server starts the embedding model's load there, so no search can begin
    loading it itself first).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.on_open: Callable[[Library], None] | None = None
        self._library: Library | None = None
        self._lock = threading.Lock()

    def get(self) -> Library:
        with self._lock:
            if self._library is None:
                from kb_mcp.library import Library

                self._library = Library(self.settings)
                if self.on_open is not None:
                    try:
                        self.on_open(self._library)
                    except Exception:  # a warm-up; the call itself reports what is wrong
                        log.warning("preparing the library failed", exc_info=True)
            return self._library

    def close(self) -> None:
        with self._lock:
            if self._library is not None:
                self._library.close()
                self._library = None


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool answers: the text for the model and the same result as data."""

    text: str
    data: dict[str, Any]


class ToolFailed(Exception):
    """A tool's error, already in its final words (``[code] message``, redacted)."""


def run(
    holder: LibraryHolder,
    tool: str,
    call: Callable[[Library], Any],
    render_text: Callable[[Any], str],
    render_data: Callable[[Any], dict[str, Any]],
    bound: Callable[[Any], Any] | None = None,
) -> ToolOutput:
    """The one path of every tool: library call, bound, render, errors mapped.

    ``bound`` cuts the result to the response budget, ``fit_response`` makes sure.
    Blocking: callers run it in a worker thread.
    """
    from kb_mcp.errors import KbError
    from kb_mcp.library import storage_failure
    from kb_mcp.redact import redact_output
    from kb_mcp.server import budget

    try:
        result = call(holder.get())
        result, note = (bound or budget.no_bound)(result)
        text, data = render_text(result), render_data(result)
        if note:
            data["truncated_note"] = note
            if note not in text:
                text += f"\n\n[truncated: {note}]"
        text, data = budget.fit_response(text, data)
        return ToolOutput(text, data)
    except Exception as exc:
        known = exc if isinstance(exc, KbError) else storage_failure(exc, holder.settings.home)
        if known is None:
            log.exception("tool %s failed", tool)
            raise ToolFailed(INTERNAL_ERROR) from exc
        if known is not exc:  # a damaged database or a full disk: the log says so too
            log.warning("tool %s: %s", tool, known.message)
        raise ToolFailed(f"[{known.code}] {redact_output(known.render()).text}") from exc


def search(
    holder: LibraryHolder,
    query: str,
    top_k: int,
    mode: str = "auto",
    source: str | None = None,
    legs: list[str] | None = None,
) -> ToolOutput:
    from kb_mcp import render
    from kb_mcp.server import budget

    return run(
        holder,
        "search",
        lambda lib: lib.lookup.search(query, top_k, mode, source, legs),
        render.search_text,
        render.search_data,
        budget.bound_search,
    )


def grep(
    holder: LibraryHolder,
    pattern: str,
    max_matches: int,
    regex: bool = False,
    ignore_case: bool = False,
    source: str | None = None,
    path_glob: str | None = None,
) -> ToolOutput:
    from kb_mcp import render
    from kb_mcp.server import budget

    return run(
        holder,
        "grep",
        lambda lib: lib.lookup.grep(
            pattern,
            regex=regex,
            ignore_case=ignore_case,
            source=source,
            path_glob=path_glob,
            max_matches=max_matches,
        ),
        render.grep_text,
        render.to_data,
        budget.bound_grep,
    )


def read(
    holder: LibraryHolder, doc: str, start_line: int | None = None, end_line: int | None = None
) -> ToolOutput:
    from kb_mcp import render
    from kb_mcp.server import budget

    return run(
        holder,
        "read",
        lambda lib: lib.lookup.read(doc, start_line, end_line),
        render.read_text,
        render.to_data,
        budget.bound_read,
    )


def list_(
    holder: LibraryHolder, source: str | None = None, limit: int = 50, offset: int = 0
) -> ToolOutput:
    from kb_mcp import render
    from kb_mcp.server import budget

    if source is None:
        return run(
            holder, "list", lambda lib: lib.catalog.overview(), render.overview_text, render.to_data
        )
    return run(
        holder,
        "list",
        lambda lib: lib.catalog.list_source(source, limit, offset),
        render.listing_text,
        render.to_data,
        budget.bound_listing,
    )


def add_document(
    holder: LibraryHolder,
    title: str,
    content: str,
    source_uri: str,
    tags: list[str] | None = None,
) -> ToolOutput:
    from kb_mcp import render

    return run(
        holder,
        "add_document",
        lambda lib: lib.writing.add_document(title, content, source_uri, tags, link=False),
        render.add_text,
        render.to_data,
    )
