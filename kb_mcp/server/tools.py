"""The MCP adapter: five tools, each parse → one ``Library`` call in a worker thread → render.

The library is opened on the first tool call, not before: the server answers
``initialize`` at once, whatever the size of the library. ``KbError`` becomes a tool
error with its code, message and hint; anything else becomes "internal error" with the
traceback in the server log only. Every call, including one whose arguments FastMCP
rejects, is audited by ``AuditMiddleware`` (tool, duration, outcome); a rejected argument
is reported by ``ArgumentErrors`` in our ``[invalid_input]`` shape, redacted.
"""

import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import anyio
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.tools.base import ToolResult
from pydantic import Field

from kb_mcp import __version__, limits, render
from kb_mcp.errors import KbError
from kb_mcp.library import Library
from kb_mcp.redact import redact_output
from kb_mcp.server import budget
from kb_mcp.server.arguments import ArgumentErrors
from kb_mcp.server.audit import AuditMiddleware
from kb_mcp.server.background import BackgroundEmbedder, BackgroundEnricher, BackgroundSync
from kb_mcp.server.instructions import server_instructions
from kb_mcp.server.prelude import SERVER_NAME
from kb_mcp.settings import Settings

log = logging.getLogger("kb_mcp.server")

SEARCH_DESCRIPTION = """\
Search the knowledge base for passages that answer a question: ranked keyword search
(Chinese/Japanese aware, code identifiers split: `user id lookup` finds `getUserById`),
fused with search by meaning when vectors are available; `legs` can add the entity graph
(the names in the question and what other passages say about them, for answers that join
two documents). Returns the best passage of each matching document with its title, path,
section, line span, `score` (results come in score order), the `legs` that found it with
their `leg_scores`, the `adjustments` that moved it (superseded, draft, newer version),
its `relations` to other documents (`corrected by <cite>`, `withdrawn on <date> by
<cite>`, `superseded by <cite>`, `corrects <cite>`, `contradicts <cite>`: tell the user
what changed, and never pick silently between contradicting results) and a `cite` string
(`<doc>#L12-L40`) that `read` accepts. If vector or hybrid mode cannot run, you get
keyword results with `fallback: "keyword"` and the `reason`. An empty `results` list means
nothing relevant is stored: say so rather than guessing. Use `grep` instead for an exact
string or regex, `read` to see more around a result."""

GREP_DESCRIPTION = """\
Find lines containing an exact string (or a regular expression with regex=true) in the
stored text of every document. Returns {doc, path, line_number, line} per matching line,
and says when it stopped at max_matches or at the time limit. Use it for identifiers,
error messages, config keys; use `search` for questions in natural language."""

READ_DESCRIPTION = """\
Read a document, or part of it, as Markdown with its metadata. `doc` is a document id,
a `cite` string from search (`<doc>#L12-L40` reads exactly those lines), a source uri or a
file path. Optional start_line / end_line (1-based, inclusive) select lines. `relations`
lists what corrects, withdraws, supersedes or updates it, and what it changes."""

LIST_DESCRIPTION = """\
Without `source`: the library's sources (folders, agent-added, uploads) with document
and chunk counts, sync state, index health and the search modes available. With
`source`: that source's documents, newest first, a page at a time (limit / offset)."""

ADD_DESCRIPTION = """\
Save text you have already read into the knowledge base so later searches find it.
`source_uri` identifies the document (its URL or path): adding again with the same uri
replaces the earlier version; it is a label only and is never opened. Secrets in the text
are redacted before storage. Disabled unless the user allowed agent writes."""


class LibraryHolder:
    """Opens the library on first use, from whichever worker thread gets there first."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._library: Library | None = None
        self._lock = threading.Lock()

    def get(self) -> Library:
        with self._lock:
            if self._library is None:
                self._library = Library(self.settings)
            return self._library

    def close(self) -> None:
        with self._lock:
            if self._library is not None:
                self._library.close()
                self._library = None


async def run_tool(
    holder: LibraryHolder,
    tool: str,
    call: Callable[[Library], Any],
    render_text: Callable[[Any], str],
    render_data: Callable[[Any], dict[str, Any]],
    bound: Callable[[Any], budget.Bounded] = budget.no_bound,
) -> ToolResult:
    """The one path of every tool: library call off the event loop, bound, render, errors
    mapped. ``bound`` cuts the result to the response budget, ``fit_response`` makes sure."""
    try:
        result = await anyio.to_thread.run_sync(lambda: call(holder.get()))
        result, note = bound(result)
        text, data = render_text(result), render_data(result)
        if note:
            data["truncated_note"] = note
            if note not in text:
                text += f"\n\n[truncated: {note}]"
        text, data = budget.fit_response(text, data)
        return ToolResult(content=text, structured_content=data)
    except KbError as exc:
        # Errors leave through the same redaction as results: a message may quote input.
        raise ToolError(f"[{exc.code}] {redact_output(exc.render()).text}") from exc
    except Exception as exc:
        log.exception("tool %s failed", tool)
        raise ToolError(
            "[internal] internal error in kb-mcp; the server log has the details"
        ) from exc


def build_server(settings: Settings) -> tuple[FastMCP, LibraryHolder]:
    """The FastMCP server with exactly the five tools, bound to one library."""
    holder = LibraryHolder(settings)

    @asynccontextmanager
    async def lifespan(_server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        syncer = BackgroundSync(holder.get, settings.sync_interval_s, watch_mode=settings.watch)
        embedder = BackgroundEmbedder(holder.get)
        enricher = BackgroundEnricher(holder.get)
        syncer.start()
        embedder.start()
        enricher.start()
        try:
            yield {}
        finally:
            await anyio.to_thread.run_sync(syncer.stop)
            await anyio.to_thread.run_sync(embedder.stop)
            await anyio.to_thread.run_sync(enricher.stop)

    instructions = server_instructions(settings.home, settings)
    mcp = FastMCP(SERVER_NAME, instructions=instructions, lifespan=lifespan, version=__version__)
    mcp.add_middleware(AuditMiddleware(settings.home))
    mcp.add_middleware(ArgumentErrors(mcp))  # inside the audit: it records the rewritten error
    read_only = {"readOnlyHint": True, "openWorldHint": False}

    @mcp.tool(name="search", description=SEARCH_DESCRIPTION, annotations=read_only)
    async def search(
        query: Annotated[
            str, Field(description="What to look for, in words.", min_length=1, max_length=4000)
        ],
        top_k: Annotated[
            int,
            Field(
                description="How many documents to return.",
                ge=limits.TOP_K.minimum,
                le=limits.TOP_K.maximum,
            ),
        ] = settings.search_top_k,
        mode: Annotated[
            Literal["auto", "keyword", "vector", "hybrid"],
            Field(
                description="auto: hybrid when vectors are ready, else keyword; keyword, "
                "vector or hybrid to choose."
            ),
        ] = "auto",
        source: Annotated[str | None, Field(description="Only this source (see `list`).")] = None,
        legs: Annotated[
            list[Literal["keyword", "vector", "graph"]] | None,
            Field(
                description="Run only these legs instead of the mode's plan (to compare "
                "them); graph follows the entities the question names to related passages.",
                min_length=1,
                max_length=3,
            ),
        ] = None,
    ) -> ToolResult:
        return await run_tool(
            holder,
            "search",
            lambda lib: lib.search(query, top_k, mode, source, legs),
            render.search_text,
            render.search_data,
            budget.bound_search,
        )

    @mcp.tool(name="grep", description=GREP_DESCRIPTION, annotations=read_only)
    async def grep(
        pattern: Annotated[
            str,
            Field(
                description="Text to find (a regex if regex=true).", min_length=1, max_length=1000
            ),
        ],
        regex: Annotated[bool, Field(description="Treat pattern as a regular expression.")] = False,
        ignore_case: Annotated[bool, Field(description="Match regardless of case.")] = False,
        source: Annotated[str | None, Field(description="Only this source.")] = None,
        path_glob: Annotated[
            str | None, Field(description="Only paths matching this glob, e.g. 'docs/*.md'.")
        ] = None,
        max_matches: Annotated[
            int,
            Field(
                description="Stop after this many lines.",
                ge=limits.MAX_MATCHES.minimum,
                le=limits.MAX_MATCHES.maximum,
            ),
        ] = settings.grep_max_matches,
    ) -> ToolResult:
        return await run_tool(
            holder,
            "grep",
            lambda lib: lib.grep(
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

    @mcp.tool(name="read", description=READ_DESCRIPTION, annotations=read_only)
    async def read(
        doc: Annotated[
            str,
            Field(
                description="Document id, cite string, uri or path.", min_length=1, max_length=4096
            ),
        ],
        start_line: Annotated[
            int | None,
            Field(
                description="First line (1-based).",
                ge=limits.LINE.minimum,
                le=limits.LINE.maximum,
            ),
        ] = None,
        end_line: Annotated[
            int | None,
            Field(
                description="Last line (inclusive).",
                ge=limits.LINE.minimum,
                le=limits.LINE.maximum,
            ),
        ] = None,
    ) -> ToolResult:
        return await run_tool(
            holder,
            "read",
            lambda lib: lib.read(doc, start_line, end_line),
            render.read_text,
            render.to_data,
            budget.bound_read,
        )

    @mcp.tool(name="list", description=LIST_DESCRIPTION, annotations=read_only)
    async def list_(
        source: Annotated[str | None, Field(description="A source name to browse.")] = None,
        limit: Annotated[
            int,
            Field(
                description="Documents per page.",
                ge=limits.LIST_LIMIT.minimum,
                le=limits.LIST_LIMIT.maximum,
            ),
        ] = 50,
        offset: Annotated[
            int,
            Field(
                description="Documents to skip.",
                ge=limits.OFFSET.minimum,
                le=limits.OFFSET.maximum,
            ),
        ] = 0,
    ) -> ToolResult:
        if source is None:
            return await run_tool(
                holder, "list", lambda lib: lib.overview(), render.overview_text, render.to_data
            )
        return await run_tool(
            holder,
            "list",
            lambda lib: lib.list_source(source, limit, offset),
            render.listing_text,
            render.to_data,
            budget.bound_listing,
        )

    @mcp.tool(
        name="add_document",
        description=ADD_DESCRIPTION,
        annotations={
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    )
    async def add_document(
        title: Annotated[
            str,
            Field(
                description="A short descriptive title.",
                min_length=1,
                max_length=settings.max_title_chars,
            ),
        ],
        content: Annotated[str, Field(description="The text, as Markdown.", min_length=1)],
        source_uri: Annotated[
            str,
            Field(
                description="Where the text came from; the document's identity.",
                min_length=1,
                max_length=2048,
            ),
        ],
        tags: Annotated[
            list[str] | None, Field(description="Optional tags.", max_length=32)
        ] = None,
    ) -> ToolResult:
        return await run_tool(
            holder,
            "add_document",
            lambda lib: lib.add_document(title, content, source_uri, tags),
            render.add_text,
            render.to_data,
        )

    return mcp, holder
