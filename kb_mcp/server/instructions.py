"""The MCP server's instructions, built from the live library (issue 12).

An agent reads the instructions once, at ``initialize``, and decides from them what it
may do: so they say what this library holds (sources and document counts), whether
``add_document`` will work, and which search modes exist here. The server builds them
before it answers ``initialize``, so ``server_instructions`` imports nothing heavy: the
settings, and a read-only summary query (``store/summary.py``, a few milliseconds at any
size).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kb_mcp.home import DB_FILE  # not from library.py: importing that costs ~0.3 s
from kb_mcp.store.summary import LibrarySummary, library_summary

if TYPE_CHECKING:
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

MAX_SOURCES_LISTED = 12  # past this an agent learns more from `list` than from a long line
MAX_NAME_CHARS = 60

TOOLS = """\
kb-mcp is the user's local knowledge base: their notes, docs and code, plus documents
agents added. Use `search` first for questions in words; `grep` for exact strings,
identifiers or regexes; `read` to open a passage a result cites (pass its `cite`);
`list` to see the sources and browse documents. Cite passages as `cite`."""


def server_instructions(library_or_home: Library | Path, settings: Settings) -> str:
    """The instructions for a server on this library (an open ``Library`` or its home)."""
    home = library_or_home if isinstance(library_or_home, Path) else library_or_home.home
    summary = library_summary(home / DB_FILE)
    return "\n\n".join(
        [TOOLS, _holdings(summary), _writes(settings.allow_agent_writes), _modes(summary, settings)]
    )


def _holdings(summary: LibrarySummary | None) -> str:
    if summary is None or summary.documents == 0:
        return (
            "The library is empty so far: search will find nothing until the user adds "
            "folders or files (`kb-mcp add PATH`). Say so rather than guessing."
        )
    shown = [
        f"{s.name[:MAX_NAME_CHARS]} ({s.kind}, {_count(s.documents, 'document')})"
        for s in summary.sources[:MAX_SOURCES_LISTED]
    ]
    more = len(summary.sources) - len(shown)
    if more > 0:
        shown.append(f"and {more} more (see `list`)")
    return (
        f"This library holds {_count(summary.documents, 'document')} "
        f"({_count(summary.chunks, 'passage')}) in {_count(len(summary.sources), 'source')}: "
        f"{'; '.join(shown)}. Pass a source's name as "
        "`source` to search only there."
    )


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _writes(allowed: bool) -> str:
    if allowed:
        return (
            "Agent writes are on: `add_document` saves text you have read (a URL or path as "
            "its `source_uri`; the same uri replaces the earlier version)."
        )
    return (
        "Agent writes are off: `add_document` will refuse. If the user wants you to save "
        "what you read, they can start the server with `--allow-agent-writes`."
    )


def _modes(summary: LibrarySummary | None, settings: Settings) -> str:
    if settings.embedder == "none":
        stored = (
            " (vectors of an earlier embedder are stored but unused)"
            if (summary and summary.vector_signatures)
            else ""
        )
        return (
            "Search modes: keyword only; no embedder is configured (`embedder = none`)"
            f"{stored}, so `vector` and `hybrid` fall back to keyword. `grep` always works."
        )
    return (
        f"Search modes: keyword, and vector / hybrid by meaning through the "
        f"`{settings.embedder}` embedder. `auto` (the default) is hybrid once the passages "
        "have vectors, and keyword with a `reason` while they are still being built. "
        "`grep` always works."
    )
