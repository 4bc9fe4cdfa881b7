"""Pages as HTML strings, built from results already passed through ``render.to_data``
(every string redacted as the tools redact it). Every value is escaped here, once, as it
is placed; nothing in a page is script.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

from kb_mcp.cite import parse_cite, split_cites
from kb_mcp.web import paging
from kb_mcp.web.layout import Edge, Node, graph_svg
from kb_mcp.web.markup import highlight, markdown_html

NAV = (("/", "Library"), ("/search", "Search"), ("/entities", "Entities"), ("/audit", "Audit"))
SEARCH_MODES = ("auto", "keyword", "vector", "hybrid")

# What grows with the library is bounded on every page (issue 20 item 6): a relation or
# a frontmatter value is cut at VALUE_CHARS, a list at RELATIONS_SHOWN with "and N more".
RELATIONS_SHOWN = 50
VALUE_CHARS = 300

e = html.escape


def _cut(text: str, chars: int = VALUE_CHARS) -> str:
    return text if len(text) <= chars else text[:chars] + "…"


def page(title: str, body: str, *, q: str = "") -> str:
    """The frame of every page: head (one stylesheet, no script), nav with a search box."""
    links = "".join(f'<a href="{href}">{e(name)}</a>' for href, name in NAV)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{e(title)} · kb-mcp</title>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<link rel='stylesheet' href='/static/web.css'></head><body>"
        f"<header><strong>kb-mcp</strong><nav>{links}</nav>"
        "<form action='/search' method='get' class='quick'>"
        f"<input name='q' value='{e(q)}' placeholder='search the library' aria-label='search'>"
        "</form></header><main>"
        f"<h1>{e(title)}</h1>{body}</main></body></html>"
    )


def error_page(status: int, title: str, message: str, hint: str | None = None) -> str:
    body = f"<p class='error' id='error'>{e(message)}</p>"
    if hint:
        body += f"<p class='hint'>{e(hint)}</p>"
    return page(f"{status} {title}", body)


def doc_href(doc: str, lines: tuple[int, int] | None = None) -> str:
    """The page of a document; with ``lines`` it highlights them and scrolls to them."""
    href = "/doc/" + quote(doc, safe="")
    if lines:
        href += f"?lines={lines[0]}-{lines[1]}#L{lines[0]}-L{lines[1]}"
    return href


def cite_href(cite: str) -> str:
    found = parse_cite(cite)
    if found is None:
        return doc_href(cite)
    return doc_href(found.doc, (found.start_line, found.end_line))


def linked_cites(text: str) -> str:
    """``text`` escaped, each document key or cite in it a link to that document's lines."""
    return "".join(
        f"<a href='{e(cite_href(piece))}'>{e(piece)}</a>" if is_cite else e(piece)
        for piece, is_cite in split_cites(text)
    )


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], css: str = "") -> str:
    """Cells are HTML already (escaped by the caller)."""
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='{css}'><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


# --- / --------------------------------------------------------------------------------


def library_page(overview: dict[str, Any], failed: list[dict[str, Any]]) -> str:
    """Sources with counts, sync state, last sync and coverage; health; failed files."""
    rows = []
    for s in overview["sources"]:
        coverage = "—"
        if s["embedded"] is not None:
            total = s["embedded"] + s["embed_pending"]
            coverage = f"{s['embedded']:,} / {total:,}"
        state = e(s["sync_state"]) + (
            f"<br><span class='error'>{e(s['error'])}</span>" if s["error"] else ""
        )
        rows.append(
            (
                f"<a href='/search?{urlencode({'source': s['name']})}'>{e(s['name'])}</a>",
                e(s["kind"]) + (f"<br><code>{e(s['root'])}</code>" if s["root"] else ""),
                f"{s['documents']:,}",
                f"{s['chunks']:,}",
                f"{s['failed']:,}",
                state,
                e(s["synced_at"] or "never"),
                coverage,
            )
        )
    body = (
        f"<p>{e(overview['store'] or overview['home'])}: "
        f"<strong>{overview['documents']:,}</strong> documents, "
        f"<strong>{overview['chunks']:,}</strong> chunks. Search modes: "
        f"{e(', '.join(overview['modes']))}.</p><h2>Sources</h2>"
        + _table(
            (
                "source",
                "kind",
                "documents",
                "chunks",
                "failed",
                "sync",
                "last sync",
                "vectors (embedded / all)",
            ),
            rows,
            "sources",
        )
        + "<h2>Index health</h2>"
        + _table(
            ("check", "state"),
            [(e(k), e(str(v))) for k, v in overview["health"].items()],
            "health",
        )
    )
    if overview["near_duplicates"]:
        pairs = [
            (e(p["a"]), e(p["b"]), f"{p['similarity']:.0f}%") for p in overview["near_duplicates"]
        ]
        body += "<h2>Near-duplicates</h2>" + _table(("a", "b", "similarity"), pairs)
    body += "<h2>Failed files</h2>"
    if failed:
        cells = [(e(f["source"]), f"<code>{e(f['path'])}</code>", e(f["reason"])) for f in failed]
        body += _table(("source", "path", "reason"), cells, "failed")
    else:
        body += "<p>None: every file of every folder was indexed.</p>"
    return page("Library", body)


# --- /search --------------------------------------------------------------------------


def search_form(q: str, mode: str, source: str, sources: Sequence[str]) -> str:
    modes = "".join(f"<option{' selected' if m == mode else ''}>{m}</option>" for m in SEARCH_MODES)
    scopes = "<option value=''>all sources</option>" + "".join(
        f"<option value='{e(s)}'{' selected' if s == source else ''}>{e(s)}</option>"
        for s in sources
    )
    return (
        "<form action='/search' method='get' class='search'>"
        f"<input name='q' value='{e(q)}' size='50' placeholder='what to look for' autofocus>"
        f"<select name='mode' aria-label='mode'>{modes}</select>"
        f"<select name='source' aria-label='source'>{scopes}</select>"
        "<button type='submit'>Search</button></form>"
    )


def _legs(hit: dict[str, Any]) -> str:
    cells = []
    for leg in hit["legs"]:
        rank, score = hit["leg_ranks"].get(leg), hit["leg_scores"].get(leg)
        text = (
            leg + (f" #{rank}" if rank else "") + (f" ({score:.4g})" if score is not None else "")
        )
        cells.append(f"<span class='leg'>{e(text)}</span>")
    return " ".join(cells)


def _hit(hit: dict[str, Any], terms: Sequence[str]) -> str:
    lines = (hit["start_line"], hit["end_line"])
    section = " › ".join(hit["section"])
    where = hit["path"] or hit["doc"]
    parts = [
        f"<article class='hit'><h3>{hit['rank']}. "
        f"<a class='cite' href='{e(doc_href(hit['doc'], lines))}'>{e(hit['title'])}</a></h3>",
        f"<p class='where'><code>{e(where)}</code>"
        + (f" § {e(section)}" if section else "")
        + f" · <code>{e(hit['cite'])}</code> · score {hit['score']:.4g}</p>",
        f"<p class='legs'>legs: {_legs(hit)}</p>",
    ]
    if hit["adjustments"]:
        moved = "; ".join(f"{a['reason']} ×{a['factor']:g}" for a in hit["adjustments"])
        parts.append(f"<p class='adjusted'>adjusted: {linked_cites(moved)}</p>")
    if hit["relations"]:
        shown = hit["relations"][:RELATIONS_SHOWN]
        linked = "; ".join(linked_cites(_cut(text)) for text in shown)
        if len(hit["relations"]) > len(shown):
            linked += f"; and {len(hit['relations']) - len(shown):,} more, not shown"
        parts.append(f"<p class='relations'>relations: {linked}</p>")
    parts.append(f"<pre class='passage'>{highlight(hit['text'], terms)}</pre></article>")
    return "".join(parts)


def search_page(form: str, q: str, result: dict[str, Any] | None, terms: Sequence[str]) -> str:
    """The form, then the head (count, mode, fallback), then each hit, or why none."""
    if result is None:
        return page("Search", form, q=q)
    hits = result["results"]
    head = f"{len(hits)} result(s) for “{e(result['query'])}” (mode {e(result['mode'])}"
    head += f", fell back to {e(result['fallback'])})" if result["fallback"] else ")"
    body = form + f"<p class='head'>{head}</p>"
    if result["reason"]:
        css = "reason empty" if not hits else "reason"
        body += f"<p class='{css}' id='reason'>{e(result['reason'])}</p>"
    elif not hits:
        body += "<p class='reason empty' id='reason'>no results</p>"
    body += "".join(_hit(hit, terms) for hit in hits)
    return page(f"Search: {result['query'][:80]}", body, q=result["query"])


# --- /doc/<id> ------------------------------------------------------------------------

RENDERED_BYTES = 2 * paging.PAGE_BYTES  # the page's lines rendered as Markdown, at most
FRONTMATTER_SHOWN = 50  # keys


def page_href(doc: str, start: int, cited: tuple[int, int] | None) -> str:
    """The page of ``doc``'s lines that starts at ``start``; a cited range stays marked."""
    query = {"start_line": start} | ({"lines": f"{cited[0]}-{cited[1]}"} if cited else {})
    return "/doc/" + quote(doc, safe="") + "?" + urlencode(query) + "#lines"


def _pager(doc: str, window: paging.Window, cited: tuple[int, int] | None) -> str:
    """Lines a-b of n, and first / previous / next / last page links."""
    links = []
    if window.previous is not None:
        links.append(f"<a rel='first' href='{e(page_href(doc, 1, cited))}'>first</a>")
        links.append(
            f"<a rel='prev' href='{e(page_href(doc, window.previous, cited))}'>previous</a>"
        )
    if window.next is not None:
        links.append(f"<a rel='next' href='{e(page_href(doc, window.next, cited))}'>next</a>")
        links.append(f"<a rel='last' href='{e(page_href(doc, window.last_page, cited))}'>last</a>")
    where = f"lines {window.first:,}-{window.last:,} of {window.total:,}"
    return f"<p class='pager'>{where}{' · ' if links else ''}{' · '.join(links)}</p>"


def _relations(links: list[dict[str, Any]]) -> str:
    if not links:
        return "<p>None known.</p>"
    items = []
    for link in links[:RELATIONS_SHOWN]:
        text = e(_cut(link["text"]))
        if link["other"]:
            text = f"<a class='relation' href='{e(doc_href(link['other']))}'>{text}</a>"
            if link["other_title"]:
                text += f" “{e(link['other_title'])}”"
        if link["evidence"]:
            text += f" (evidence: <a href='{e(cite_href(link['evidence']))}'>"
            text += f"{e(link['evidence'])}</a>)"
        items.append(f"<li>{text}</li>")
    more = len(links) - RELATIONS_SHOWN
    if more > 0:
        items.append(f"<li class='hint'>and {more:,} more, not shown</li>")
    return f"<ul class='relations'>{''.join(items)}</ul>"


def document_page(
    view: dict[str, Any], window: paging.Window, cited: tuple[int, int] | None
) -> str:
    """Metadata, frontmatter, relations (linked), entities, then one page of the text:
    rendered as Markdown and as numbered lines, with links to the other pages."""
    read = view["read"]
    meta = [
        ("doc", f"<code>{e(read['doc'])}</code>"),
        ("path", f"<code>{e(read['path'] or '')}</code>"),
        ("source", e(read["source"] or "")),
        ("kind", e(read["kind"])),
        ("date", e(read["date"] or "")),
        ("tags", e(", ".join(read["tags"]))),
        ("created", e(read["created_at"])),
        ("updated", e(read["updated_at"])),
        ("lines", f"{read['total_lines']:,}"),
    ]
    body = _table(("field", "value"), meta, "meta")
    if read["stale"]:
        body += "<p class='hint'>The file changed since it was indexed; it was re-indexed.</p>"
    if view["frontmatter"]:
        front = list(view["frontmatter"].items())
        rows = [(e(_cut(k)), e(_cut(v))) for k, v in front[:FRONTMATTER_SHOWN]]
        body += "<h2>Frontmatter</h2>" + _table(("key", "value"), rows, "front")
    body += "<h2>Relations</h2>" + _relations(view["relations"])
    body += "<h2>Entities</h2>"
    if view["entities"]:
        names = ", ".join(
            f"<a href='/entities?{urlencode({'q': name})}'>{e(name)}</a> "
            f"<span class='kind'>{e(kind)}</span>"
            for name, kind, _w in view["entities"]
        )
        body += f"<p class='entities'>{names}</p>"
    else:
        body += "<p>None found.</p>"
    pager = _pager(read["doc"], window, cited)
    body += "<h2>Text</h2>" + pager + _rendered(view["body_line"], window)
    body += "<h2 id='lines'>Lines</h2>"
    if window.cut_chars is not None:
        body += (
            f"<p class='hint'>line {window.first:,} has {window.cut_chars:,} characters; "
            f"the first {paging.CUT_CHARS:,} are shown (grep finds text in the rest)</p>"
        )
    body += pager + paging.numbered_html(window, cited) + pager
    return page(read["title"] or read["doc"], body)


def _rendered(body_line: int, window: paging.Window) -> str:
    """The window's lines after the frontmatter as Markdown, within ``RENDERED_BYTES``."""
    skip = max(0, body_line - window.first)
    prose = "\n".join(window.shown[skip:])
    rendered = markdown_html(prose, RENDERED_BYTES)
    if rendered is None:
        rendered = (
            f"<p class='hint'>These lines rendered would be over {RENDERED_BYTES // 1024} KB "
            "of HTML; they are shown below as text.</p>"
        )
    return f"<div class='rendered'>{rendered}</div>"


# --- /entities ------------------------------------------------------------------------


def _entity(view: dict[str, Any], first: bool) -> str:
    head = (
        f"<h2 id='{e(view['key'])}'>{e(view['name'])} <span class='kind'>{e(view['kind'])}"
        f"</span></h2><p>{view['mentions']:,} mention(s)"
    )
    if len(view["aliases"]) > 1:
        head += "; aliases: " + e(", ".join(view["aliases"]))
    head += "</p>"
    cites = "".join(
        f"<li><a class='mention' href='{e(cite_href(c))}'>{e(c)}</a></li>" for c in view["cites"]
    )
    near = "".join(
        f"<li><a href='/entities?{urlencode({'q': n['name']})}'>{e(n['name'])}</a> "
        f"({e(n['label'] or 'co-mentioned')} ×{n['weight']:g})</li>"
        for n in view["neighbours"]
    )
    body = head + f"<h3>Mentions</h3><ul>{cites or '<li>none</li>'}</ul>"
    body += f"<h3>Neighbours</h3><ul>{near or '<li>none</li>'}</ul>"
    if first and view["neighbours"]:
        body += _neighbourhood(view)
    return f"<section class='entity'>{body}</section>"


def _neighbourhood(view: dict[str, Any]) -> str:
    nodes = [Node(view["key"], view["name"], "/entities?" + urlencode({"q": view["name"]}))]
    edges = []
    for i, n in enumerate(view["neighbours"], start=1):
        nodes.append(Node(n["key"], n["name"], "/entities?" + urlencode({"q": n["name"]})))
        edges.append(Edge(0, i, n["weight"], n["label"]))
    at = {node.key: i for i, node in enumerate(nodes)}
    for link in view["links"]:
        if link["a"] in at and link["b"] in at:
            edges.append(Edge(at[link["a"]], at[link["b"]], link["weight"], link["label"]))
    return f"<figure class='graph'>{graph_svg(nodes, edges)}</figure>"


def entities_page(q: str, views: list[dict[str, Any]]) -> str:
    form = (
        "<form action='/entities' method='get' class='search'>"
        f"<input name='q' value='{e(q)}' placeholder='a name, e.g. a class or a term'>"
        "<button type='submit'>Look up</button></form>"
    )
    if not views:
        return page("Entities", form + "<p class='reason empty'>no entity matches</p>")
    shown = "".join(_entity(v, i == 0) for i, v in enumerate(views))
    return page("Entities", form + shown)


# --- /audit ---------------------------------------------------------------------------


def audit_page(log: dict[str, Any]) -> str:
    """Per tool over the window, then the newest calls: tool, duration, outcome."""
    if not log["recent"]:
        return page("Audit log", "<p>No tool call recorded yet.</p>")
    intro = "<p>Tool calls of agents: tool, duration, outcome. "
    intro += "Arguments and results are never recorded.</p>"
    tools = [
        (
            e(t["tool"]),
            f"{t['calls']:,}",
            f"{t['errors']:,}",
            f"{t['median_ms']:,.1f} ms",
            f"{t['max_ms']:,.1f} ms",
        )
        for t in log["tools"]
    ]
    summary = f"<h2>By tool, last {log['window']:,} calls</h2>" + _table(
        ("tool", "calls", "errors", "median", "slowest"), tools, "tools"
    )
    rows = [
        (e(a["ts"]), e(a["tool"]), f"{a['duration_ms']:,.1f} ms", e(a["outcome"]))
        for a in log["recent"]
    ]
    recent = "<h2>Newest calls</h2>" + _table(
        ("time", "tool", "duration", "outcome"), rows, "audit"
    )
    return page("Audit log", intro + summary + recent)
