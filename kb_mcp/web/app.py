"""Routes: each page is one ``Library`` call, its result through ``render.to_data`` (the
tools' redaction), then ``pages``. Every request passes ``guard`` first.

Handlers are plain functions: Starlette runs them in its thread pool, and the library
keeps one SQLite connection per thread. A ``KbError`` becomes an error page with its
status; anything else is "internal error" (the traceback goes to the log, never the page).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from kb_mcp import limits, render
from kb_mcp.errors import Conflict, InvalidInput, KbError, NotFound, Refused, Unavailable
from kb_mcp.redact import redact_output
from kb_mcp.server import budget
from kb_mcp.store.failures import storage_failure
from kb_mcp.web import pages, paging
from kb_mcp.web.guard import Guard, Policy

if TYPE_CHECKING:
    from kb_mcp.library import Library

log = logging.getLogger("kb_mcp.web")

# The MCP search tool's bound on `query` (server/tools.py: max_length=4000).
MAX_QUERY_CHARS = 4_000
MAX_PARAM_CHARS = 4_096  # any other parameter (the read tool's bound on `doc`)
ENTITIES_SHOWN = 10
FAILED_SHOWN = 200
AUDIT_SHOWN = 100
AUDIT_WINDOW = 2_000  # calls summarised per tool
_LINES = re.compile(r"^(\d{1,9})(?:-(\d{1,9}))?$")

STATUS = {
    InvalidInput: (400, "Bad request"),
    NotFound: (404, "Not found"),
    Refused: (403, "Refused"),
    Conflict: (409, "Conflict"),
    Unavailable: (503, "Unavailable"),
}

Handler = Callable[[Request], str]


def _status_of(exc: KbError) -> tuple[int, str]:
    for kind, status in STATUS.items():
        if isinstance(exc, kind):
            return status
    return 422, "Cannot do that"


def _param(request: Request, name: str, limit: int = MAX_PARAM_CHARS) -> str:
    value = request.query_params.get(name, "")
    if len(value) > limit:
        raise InvalidInput(
            f"{name} is {len(value):,} characters; at most {limit:,} are accepted",
            hint="use fewer words",
        )
    return value


def _guarded(handler: Handler, home: Path) -> Callable[[Request], Response]:
    """``handler``'s page, or the error page a failure deserves (never a traceback)."""

    def endpoint(request: Request) -> Response:
        started = time.perf_counter()
        response = _answer(handler, request, home)
        # Server time (library call + HTML), for the browser's devtools and `bench web`.
        took = (time.perf_counter() - started) * 1000
        response.headers["server-timing"] = f"page;dur={took:.2f}"
        return response

    return endpoint


def _answer(handler: Handler, request: Request, home: Path) -> HTMLResponse:
    try:
        return HTMLResponse(handler(request))
    except Exception as exc:
        known = exc if isinstance(exc, KbError) else storage_failure(exc, home)
        if known is not None:  # a damaged kb.db or a full disk names its fix too
            status, title = _status_of(known)
            message = redact_output(known.message).text
            hint = redact_output(known.hint).text if known.hint else None
            return HTMLResponse(pages.error_page(status, title, message, hint), status)
        log.exception("internal error in %s", request.url.path)
        message = "internal error; the server's log has the details"
        return HTMLResponse(pages.error_page(500, "Internal error", message), 500)


def warm(library: Library) -> None:
    """Count the library page's figures before the first visit (kept until a commit:
    ``LibraryState.memo``), so that visit does not pay the whole-index scans."""
    library.catalog.overview()
    library.views.failed_files(FAILED_SHOWN)


def build_app(library: Library, policy: Policy) -> Guard:
    """The web view of ``library`` behind ``policy``'s rules."""

    def home(_request: Request) -> str:
        overview = render.to_data(library.catalog.overview())
        return pages.library_page(
            overview, render.to_data(library.views.failed_files(FAILED_SHOWN))
        )

    def search(request: Request) -> str:
        q = _param(request, "q", MAX_QUERY_CHARS)
        mode = _param(request, "mode") or "auto"
        source = _param(request, "source")
        names = render.to_data(library.catalog.source_names())
        form = pages.search_form(redact_output(q).text, mode, source, names)
        if not q.strip():
            return pages.search_page(form, "", None, ())
        # Passages cut as the search tool cuts them (a long passage says which cite to read).
        found, _note = budget.bound_search(
            library.lookup.search(q, mode=mode, source=source or None)
        )
        result = render.search_data(found)
        terms = render.to_data(library.views.query_terms(q))
        return pages.search_page(form, q, result, terms)

    def document(request: Request) -> str:
        doc = request.path_params["doc"]
        if len(doc) > MAX_PARAM_CHARS:
            raise InvalidInput(f"document id is {len(doc):,} characters; at most 4,096")
        view = library.views.document_view(doc)
        cited = _lines(_param(request, "lines")) or view.cited
        start = _start_line(_param(request, "start_line"))
        # Paged as ``read`` pages (``budget.bound_read``): the reader redacted the whole
        # document before any cut; what leaves is redacted again, as every tool result.
        whole = view.read.text.split("\n")
        if start is not None and start > len(whole):
            raise InvalidInput(
                f"the document has {len(whole):,} lines; line {start:,} is past its end"
            )
        if start is not None:
            window = paging.page_from(whole, start)
        else:
            window = paging.page_holding(whole, cited) if cited else paging.page_from(whole, 1)
        shown = redact_output("\n".join(window.shown)).text.split("\n")
        window = dataclasses.replace(window, shown=tuple(shown))
        view = dataclasses.replace(view, read=dataclasses.replace(view.read, text=""))
        return pages.document_page(render.to_data(view), window, cited)

    def entities(request: Request) -> str:
        q = _param(request, "q", MAX_QUERY_CHARS)
        found = library.entities.find(q.strip() or None, ENTITIES_SHOWN, drawn=1)
        return pages.entities_page(redact_output(q).text, render.to_data(found))

    def audit(_request: Request) -> str:
        return pages.audit_page(render.to_data(library.views.audit_log(AUDIT_SHOWN, AUDIT_WINDOW)))

    routes = [
        Route("/", _guarded(home, library.settings.home)),
        Route("/search", _guarded(search, library.settings.home)),
        Route("/doc/{doc:path}", _guarded(document, library.settings.home)),
        Route("/entities", _guarded(entities, library.settings.home)),
        Route("/audit", _guarded(audit, library.settings.home)),
        Route("/static/web.css", stylesheet),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error},  # type: ignore[dict-item]
    )
    return Guard(app, policy)


def _start_line(text: str) -> int | None:
    """``start_line=1201`` (the first line of a page of the text) → 1201; '' → None."""
    if not text:
        return None
    if not text.isdecimal() or len(text) > 9:
        raise InvalidInput(f"start_line {text!r} is not a line number", hint="write start_line=1")
    return limits.LINE.check(int(text), name="start_line")


def _lines(text: str) -> tuple[int, int] | None:
    """``12-40`` (or ``12``) → (12, 40); '' → None; anything else is bad input."""
    if not text:
        return None
    found = _LINES.match(text)
    if found is None:
        raise InvalidInput(f"lines {text!r} is not a range", hint="write lines=12-40")
    start = int(found[1])
    end = int(found[2] or found[1])
    limits.LINE.check(start, name="lines")
    limits.LINE.check(end, name="lines")
    if end < start:
        raise InvalidInput(f"lines {text!r} ends before it starts")
    return start, end


_CSS = resources.files("kb_mcp.web").joinpath("static/web.css")


def stylesheet(_request: Request) -> Response:
    return Response(_CSS.read_text(encoding="utf-8"), media_type="text/css")


async def _http_error(_request: Request, exc: HTTPException) -> Response:
    """Starlette's own 404 / 405 as our error page."""
    title = {404: "Not found", 405: "Method not allowed"}.get(exc.status_code, "Error")
    message = "no such page; start at the library page, /" if exc.status_code == 404 else title
    return HTMLResponse(pages.error_page(exc.status_code, title, message), exc.status_code)
