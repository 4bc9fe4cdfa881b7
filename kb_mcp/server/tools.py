"""The MCP adapter: five tools, each parse → its body in ``server/calls.py`` in a worker thread.

The library is opened after ``initialize`` has been answered (``server/lifecycle.py``
starts the background work, which warms it) or by the first tool call, not before: the
server answers ``initialize`` at once, whatever the size of the library. ``KbError``
becomes a tool error with its code, message and hint; anything else becomes "internal
error" with the traceback in the server log only. Every call, including one whose arguments FastMCP
rejects, is audited by ``AuditMiddleware`` (tool, duration, outcome); a rejected argument
is reported by ``ArgumentErrors`` in our ``[invalid_input]`` shape, redacted.
"""

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware
from fastmcp.tools.base import ToolResult
from pydantic import Field, ValidationError

from kb_mcp import __version__, limits
from kb_mcp.server import calls
from kb_mcp.server.arguments import ArgumentErrors
from kb_mcp.server.audit import record_call
from kb_mcp.server.background import BackgroundWork, load_model
from kb_mcp.server.calls import LibraryHolder
from kb_mcp.server.instructions import server_instructions
from kb_mcp.server.lifecycle import Lifecycle
from kb_mcp.settings import Settings

SERVER_NAME = "kb-mcp"

SEARCH_DESCRIPTION = """\
Search the knowledge base for passages that answer a question: ranked keyword search
(Chinese/Japanese aware, code identifiers split: `user id lookup` finds `getUserById`),
fused with search by meaning when vectors are available; `legs` can add the entity graph
(the names in the question and what other passages say about them, for answers that join
two documents). Returns the best passage of each matching document with its title, path,
section, line span, `score` (the ranking model's estimate, 0 to 1, that it answers;
results come in score order), the `legs` that found it with their `leg_scores`, the
`adjustments` that moved it after ranking (a correction placed above what it corrects),
its `relations` to other documents (`corrected by <cite>`, `withdrawn on <date> by
<cite>`, `superseded by <cite>`, `corrects <cite>`, `contradicts <cite>`: tell the user
what changed, and never pick silently between contradicting results) and a `cite` string
(`<doc>#L12-L40`) that `read` accepts. If vector or hybrid mode cannot run, you get
keyword results with `fallback: "keyword"` and the `reason`. An empty `results` list means
the answer is probably not stored (the `reason` says why): say so rather than guessing.
Use `grep` instead for an exact string or regex, `read` to see more around a result."""

GREP_DESCRIPTION = """\
Find lines containing an exact string (or a regular expression with regex=true) in the
stored text of every document. Regexes are RE2 syntax: no lookaround or backreferences,
repeats up to {1000}; \\w and \\d are ASCII, \\pL matches any letter. Returns {doc, path,
line_number, line} per matching line, and says when it stopped at max_matches or at the
time limit. Use it for identifiers, error messages, config keys; use `search` for
questions in natural language."""

READ_DESCRIPTION = """\
Read a document, or part of it, as Markdown with its metadata. `doc` is a document id,
a `cite` string from search (`<doc>#L12-L40` reads exactly those lines), a source uri or a
file path. Optional start_line / end_line (1-based, inclusive) select lines. `relations`
lists what corrects, withdraws, supersedes or updates it, and what it changes."""

LIST_DESCRIPTION = """\
Without `source`: the library's sources (folders, agent-added, uploads) with document
and chunk counts, sync state, index health and the search modes available. With
`source`: that source's documents, newest first, a page at a time (limit / offset), and
the files its last sync could not index or left out, with the reason for each."""

ADD_DESCRIPTION = """\
Save text you have already read into the knowledge base so later searches find it.
`source_uri` identifies the document (its URL or path): adding again with the same uri
replaces the earlier version; it is a label only and is never opened. Secrets in the text
are redacted before storage. Disabled unless the user allowed agent writes."""


async def run_tool(body: Callable[[], calls.ToolOutput]) -> ToolResult:
    """A tool body (``server/calls.py``) off the event loop, as an MCP tool result."""
    try:
        output = await anyio.to_thread.run_sync(body)
    except calls.ToolFailed as exc:
        raise ToolError(str(exc)) from exc
    return ToolResult(content=output.text, structured_content=output.data)


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


def build_server(settings: Settings) -> tuple[FastMCP, LibraryHolder]:
    """The FastMCP server with exactly the five tools, bound to one library."""
    holder = LibraryHolder(settings)
    holder.on_open = load_model
    work = BackgroundWork(holder.get, settings.sync_interval_s, settings.watch)

    @asynccontextmanager
    async def lifespan(_server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {}
        finally:
            await anyio.to_thread.run_sync(work.stop)

    instructions = server_instructions(settings.home, settings)
    mcp = FastMCP(SERVER_NAME, instructions=instructions, lifespan=lifespan, version=__version__)
    mcp.add_middleware(Lifecycle(on_ready=work.start_after))
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
            list[Literal["keyword", "vector", "graph", "document", "feedback"]] | None,
            Field(
                description="Run only these legs instead of the mode's plan (to compare "
                "them); document ranks whole documents, feedback searches again with the "
                "rare words of the first results, graph follows the entities the question "
                "names to related passages.",
                min_length=1,
                max_length=5,
            ),
        ] = None,
    ) -> ToolResult:
        return await run_tool(lambda: calls.search(holder, query, top_k, mode, source, legs))

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
            lambda: calls.grep(holder, pattern, max_matches, regex, ignore_case, source, path_glob)
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
        return await run_tool(lambda: calls.read(holder, doc, start_line, end_line))

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
        return await run_tool(lambda: calls.list_(holder, source, limit, offset))

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
        return await run_tool(lambda: calls.add_document(holder, title, content, source_uri, tags))

    return mcp, holder
