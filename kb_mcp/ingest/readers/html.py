"""HTML → Markdown: the page's own text, without its chrome, using only the stdlib parser.

The parser builds a small element tree (closing the end tags HTML lets authors
omit), then the tree is rendered block by block: headings, paragraphs, nested
lists, fenced code, tables, quotes and links. Scripts, styles and other non-text
elements are always dropped; navigation, sidebars, forms, and page-level headers
and footers are dropped as boilerplate. Content is taken from ``<main>`` (or a
lone ``<article>``) when the page marks it, else from ``<body>``.

Site navigation is dropped by the structure that marks it, not by its words (issue 20
item 11: every page of a DocBook- or Sphinx-built site began with its Prev / Up / Home /
Next table): an ARIA navigation, search, banner or content-info role; a class word that
names navigation (DocBook XSL's ``navheader`` / ``navfooter``, Sphinx's ``related`` bars
and ``sphinxsidebar``, breadcrumbs, ``toc``, footers); an id that is one such word on an
element holding no heading (a section's id is its title's slug, so "Navigation" or
"Footer" sections stay); and a short block of links to the previous, next or parent
page (``rel="next"``: texinfo's "Next: … Previous: … Up: …" line, pagers).

A table that lays out the page rather than holding data is rendered as the blocks of its
cells in document order, not as a Markdown table whose one-line cells would flatten its
headings and code (issue 25: xmlsoft.org's pages and gtk-doc references are nested
layout tables, Valgrind's FAQ is a DocBook Q and A table): a table of one cell, or one
whose cell holds a heading, a ``<pre>`` or another table (``_is_layout``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

from kb_mcp.errors import Unreadable
from kb_mcp.ingest.decode import decode_bytes
from kb_mcp.ingest.readers.base import Converted, markdown_table

SUFFIXES = frozenset({".html", ".htm", ".xhtml"})

# Controls (a copy button inside a code block, a version picker's options) are page
# machinery, never the page's text.
_NEVER_TEXT = frozenset(
    {"head", "title", "script", "style", "noscript", "template", "svg", "iframe", "object"}
    | {"button", "select"}
)
_CHROME = frozenset({"nav", "aside", "form", "header", "footer"})
# Inside <main> or <article>, <header> and <footer> hold that content's own
# heading and byline, not the site's banner, so they are kept there.
_CONTENT_CHROME = _CHROME - {"header", "footer"}
# Navigation marked by structure (module docstring). Class words are split at "-" and
# "_" (``wy-breadcrumbs``, ``nav-panel``, ``rst-footer-buttons``); "header" is not one:
# asciidoc's div#header holds the page title and its NAME section.
_NAVIGATION_ROLES = frozenset({"navigation", "search", "banner", "contentinfo"})
_NAVIGATION_WORDS = frozenset(
    {
        *("nav", "navbar", "navigation", "navheader", "navfooter", "breadcrumb"),
        *("breadcrumbs", "related", "sphinxsidebar", "toc", "footer"),
    }
)
_NAVIGATION_RELS = frozenset({"next", "prev", "previous", "up"})
# What a link bar may say besides its links: labels such as "Next:", "Up:" and separators.
_LINK_BAR_LABEL_CHARS = 40

_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_CONTROLS = frozenset({"button", "input", "select", "textarea"})
_UNSAID = _NEVER_TEXT | _CONTROLS  # left out of a <pre>'s text as well
# What a data table's cell does not hold: a table with such a cell (or a single cell) lays
# out the page, and its cells are rendered as blocks in document order. Paragraphs and
# lists are not in it: Sphinx wraps each data cell in <p>, and a cell may list options.
_LAYOUT_CONTENT = _HEADINGS | {"pre", "table"}
# A cell longer than this is content laid out in a table (an index page's columns of long
# lists: one Markdown row of 200 KB was then refused as a minified file), so the table's
# cells are rendered as blocks instead.
MAX_TABLE_CELL_CHARS = 2_000
_BLOCKS = _HEADINGS | {
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd",
    "details", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form",
    "header", "hgroup", "hr", "html", "li", "main", "nav", "ol", "p", "pre", "section",
    "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
}  # fmt: skip

# End tags HTML lets authors omit: a new tag closes the outermost open element
# of the first set found above it, searching no further than the second set.
_IMPLIED_END: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "li": (frozenset({"li"}), frozenset({"ul", "ol"})),
    "dt": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "dd": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "tr": (frozenset({"tr", "td", "th"}), frozenset({"table", "thead", "tbody", "tfoot"})),
    "td": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "th": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
}
# Any block start ends an open paragraph, which cannot contain blocks.
_PARAGRAPH_END = (frozenset({"p"}), _BLOCKS - {"p"})

_BREAK = "\x00"  # stands for <br> until whitespace is collapsed; decoded text has no NULs
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([\w.:-]+)", re.IGNORECASE)
# A code block's language, as one class word: ``language-js`` / ``lang-js`` on the block or
# inside it (highlight.js, Prism, Markdown renderers), or on the two elements around its
# ``<pre>`` (MkDocs' ``<div class="language-python highlight">``, Jekyll's
# ``language-ruby highlighter-rouge``), where Sphinx also writes ``highlight-python3``.
# Sphinx's ``default`` and ``none`` (and Prism's ``language-none``) name no language.
_LANGUAGE_CLASS = re.compile(r"(?:language|lang)-([\w+#.-]+)")
_WRAPPER_LANGUAGE_CLASS = re.compile(r"(?:language|lang|highlight)-([\w+#.-]+)")
_NO_LANGUAGE = frozenset({"default", "none"})
_LANGUAGE_WRAPPERS = 2


@dataclass(slots=True)
class _Element:
    tag: str
    attrs: dict[str, str]
    children: list[_Element | str] = field(default_factory=list)
    # The enclosing element, for what a wrapper says about its content (a code block's
    # language); left out of comparisons and repr, which would otherwise loop.
    parent: _Element | None = field(default=None, repr=False, compare=False)


_Skip = Callable[[_Element], bool]


def read_html(data: bytes) -> Converted:
    """Convert an HTML page to Markdown titled by ``<title>``, else its first ``<h1>``."""
    declared = _META_CHARSET.search(data[:4096])
    text = decode_bytes(data, declared=declared.group(1).decode("ascii") if declared else None)
    try:
        markdown, title = _convert(_parse(text))
    except RecursionError as error:  # the tree is walked recursively
        raise Unreadable("HTML nested too deeply to convert") from error
    return Converted(markdown, "html", None, title, exact=False)


@dataclass(frozen=True, slots=True)
class _Drop:
    """What rendering leaves out: elements named in ``tags``, and (``chrome``) the ones
    that mark themselves as site navigation."""

    tags: frozenset[str]
    chrome: bool = True

    def __call__(self, element: _Element) -> bool:
        return element.tag in self.tags or (self.chrome and _is_navigation(element))


def _convert(tree: _Element) -> tuple[str, str | None]:
    """The Markdown of the page's content, and its title."""
    root = _content_root(tree)
    tags = _NEVER_TEXT | (_CHROME if root.tag in {"body", "#document"} else _CONTENT_CHROME)
    drop = _Drop(tags)
    _promote_anchored_terms(root, drop)
    # Some pages wrap everything in chrome (ASP.NET puts the whole body in a <form>):
    # stripping boilerplate must never empty a page that has text.
    markdown = _render(root, drop) or _render(root, _Drop(_NEVER_TEXT, chrome=False))
    # An inline <svg> has <title>s of its own: icon labels, not the page's title.
    title = _find(tree, "title", skip=_Drop(frozenset({"svg"}), chrome=False))
    title = title or _find(root, "h1", skip=drop)
    title_text = " ".join(_raw_text(title).split()) if title else ""
    return markdown, title_text or None


def _promote_anchored_terms(root: _Element, drop: _Drop) -> None:
    """A definition term with an ``id`` is a place the page links to by name: an API
    reference's signature (Sphinx's ``<dt class="sig" id="json.dumps">``), a glossary
    term. It becomes a heading one level below the section it is in (and below the term
    whose description holds it: a class's methods under the class), so a passage about
    it is cited by it, not only by the section around it."""
    level = 1
    promoted: set[int] = set()  # the lists holding a promoted term, by id()
    for element in _iter(root, drop):
        if element.tag in _HEADINGS:
            level = int(element.tag[1])
        elif element.tag == "dt" and element.attrs.get("id") and element.parent is not None:
            outer = element.parent.parent
            depth = 0
            while outer is not None:
                depth += id(outer) in promoted
                outer = outer.parent
            element.tag = f"h{min(level + 1 + depth, 6)}"
            promoted.add(id(element.parent))


def _is_navigation(element: _Element) -> bool:
    """Whether the element marks itself as site navigation (module docstring).

    Classes and ids count on blocks only: navigation is a region of the page, while an
    inline ``<a class="toc-backref">`` is a heading's own text (Python's FAQ pages)."""
    attrs = element.attrs
    if attrs.get("role", "").strip().lower() in _NAVIGATION_ROLES:
        return True
    if element.tag not in _BLOCKS:
        return False
    if not _NAVIGATION_WORDS.isdisjoint(re.split(r"[\s_-]+", attrs.get("class", "").lower())):
        return True
    if attrs.get("id", "").strip().lower() in _NAVIGATION_WORDS:
        return not any(el.tag in _HEADINGS for el in _iter(element))
    return _is_link_bar(element)


def _is_link_bar(block: _Element) -> bool:
    """A block whose own text is links, one to the previous, next or parent page, and
    labels (``Next: <a rel="next">…</a>, Up: …``)."""
    links: list[_Element] = []
    labels: list[str] = []
    pending = [block]
    while pending:
        for child in pending.pop().children:
            if isinstance(child, str):
                labels.append(child)
            elif child.tag == "a":
                links.append(child)
            elif child.tag not in _BLOCKS:
                pending.append(child)
    rels = {rel for link in links for rel in link.attrs.get("rel", "").lower().split()}
    if _NAVIGATION_RELS.isdisjoint(rels):
        return False
    return len("".join("".join(labels).split())) <= _LINK_BAR_LABEL_CHARS


class _TreeBuilder(HTMLParser):
    """Builds an ``_Element`` tree, tolerating the omitted and stray end tags of real pages."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = _Element("#document", {})
        self._open = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._close_implied(tag)
        element = _Element(tag, {name: value or "" for name, value in attrs}, parent=self._open[-1])
        self._open[-1].children.append(element)
        if tag not in _VOID:
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self._open) - 1, 0, -1):
            if self._open[depth].tag == tag:
                del self._open[depth:]
                return  # an end tag with no open element is ignored, as browsers do

    def handle_data(self, data: str) -> None:
        self._open[-1].children.append(data)

    def _close_implied(self, tag: str) -> None:
        rule = _IMPLIED_END.get(tag) or (_PARAGRAPH_END if tag in _BLOCKS else None)
        if rule is None:
            return
        targets, limits = rule
        outermost = None
        for depth in range(len(self._open) - 1, 0, -1):
            if self._open[depth].tag in limits:
                break
            if self._open[depth].tag in targets:
                outermost = depth
        if outermost is not None:
            del self._open[outermost:]


def _parse(text: str) -> _Element:
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    return builder.root


def _content_root(tree: _Element) -> _Element:
    """``<main>`` (or role=main), else the only ``<article>``, else ``<body>``, else everything."""
    elements = list(_iter(tree, skip=_Drop(_NEVER_TEXT | _CHROME, chrome=False)))
    mains = [el for el in elements if el.tag == "main" or el.attrs.get("role") == "main"]
    articles = [el for el in elements if el.tag == "article"]
    if mains:
        return mains[0]
    if len(articles) == 1:
        return articles[0]
    return _find(tree, "body") or tree


def _children(element: _Element) -> list[_Element]:
    return [child for child in element.children if isinstance(child, _Element)]


def _iter(element: _Element, skip: _Skip = lambda _: False) -> Iterator[_Element]:
    """Every element below ``element`` in document order, not entering ``skip`` ones."""
    for child in _children(element):
        if not skip(child):
            yield child
            yield from _iter(child, skip)


def _find(element: _Element, tag: str, skip: _Skip = lambda _: False) -> _Element | None:
    """The first element named ``tag`` below ``element``, not looking inside ``skip`` ones."""
    return next((el for el in _iter(element, skip) if el.tag == tag), None)


def _render(root: _Element, drop: _Drop) -> str:
    """The Markdown of ``root``; a rule left at either end separated dropped chrome."""
    blocks = _blocks(root, drop)
    while blocks and blocks[0] == "---":
        del blocks[0]
    while blocks and blocks[-1] == "---":
        del blocks[-1]
    return "\n\n".join(blocks)


def _blocks(element: _Element, drop: _Drop) -> list[str]:
    """Markdown blocks of ``element``'s children: inline runs become paragraphs."""
    blocks: list[str] = []
    inline: list[str] = []
    for child in element.children:
        if isinstance(child, str):
            inline.append(child)
        elif drop(child):
            continue
        elif child.tag in _BLOCKS:
            _flush(inline, blocks)
            blocks.extend(_block(child, drop))
        else:
            inline.append(_inline(child, drop))
    _flush(inline, blocks)
    return blocks


def _flush(inline: list[str], blocks: list[str]) -> None:
    if text := _squash("".join(inline)):
        blocks.append(text)
    inline.clear()


def _block(element: _Element, drop: _Drop) -> list[str]:
    tag = element.tag
    if tag in _HEADINGS:
        text = _squash(_inline(element, drop)).replace("\n", " ")
        return [f"{'#' * int(tag[1])} {text}"] if text else []
    if tag in {"ul", "ol"}:
        return [items] if (items := _list(element, drop)) else []
    if tag == "pre":
        return [_fence(listing, element) for listing in _listings(element)]
    if tag == "table":
        if _is_layout(element, drop):
            return _blocks(element, drop)
        rows = [[" ".join(_blocks(cell, drop)) for cell in row] for row in _rows(element)]
        if any(len(cell) > MAX_TABLE_CELL_CHARS for row in rows for cell in row):
            return _blocks(element, drop)  # a cell nobody reads on one line: an index page
        return [markdown_table(rows)] if rows else []
    if tag == "blockquote":
        quoted = "\n\n".join(_blocks(element, drop)).split("\n")
        return ["\n".join(f"> {line}".rstrip() for line in quoted)] if quoted != [""] else []
    if tag == "hr":
        return ["---"]
    return _blocks(element, drop)


def _inline(element: _Element, drop: _Drop) -> str:
    """Inline Markdown for an element met inside running text."""
    if element.tag == "br":
        return _BREAK
    inner = "".join(
        child if isinstance(child, str) else _inline(child, drop)
        for child in element.children
        if isinstance(child, str) or not drop(child)
    )
    if element.tag == "a":
        return _link(inner, element.attrs.get("href", ""))
    if element.tag == "code":
        return _code_span(inner)
    if element.tag in {"strong", "b"}:
        return _emphasis(inner, "**")
    if element.tag in {"em", "i"}:
        return _emphasis(inner, "*")
    return inner


# What a heading's permalink shows (Sphinx's and MkDocs' ``<a class="headerlink">¶</a>``,
# Docusaurus' ``hash-link``): in the text it made every heading of CPython's docs end in
# "¶", in the heading path and the graph's terms as well (outsider run).
_PERMALINK_GLYPHS = frozenset("¶§#🔗⚓\u200b")


def _link(inner: str, href: str) -> str:
    """``[text](href)``; in-page and script links keep only their text, and an in-page
    link that is only a permalink glyph is dropped."""
    text = _squash(inner).replace("\n", " ")
    if href.startswith("#") and text and set(text.replace(" ", "")) <= _PERMALINK_GLYPHS:
        return ""
    if not text or not href or href.startswith(("#", "javascript:")):
        return inner
    return f"[{text}]({href.strip().replace(' ', '%20')})"


def _code_span(inner: str) -> str:
    code = " ".join(inner.split())
    if not code:
        return inner
    return f"`` {code} ``" if "`" in code else f"`{code}`"


def _emphasis(inner: str, mark: str) -> str:
    """Wrap the text in ``mark`` with its edge spaces outside (``** x **`` is not bold)."""
    core = inner.strip()
    if not core:
        return inner
    lead = " " if inner[0].isspace() else ""
    trail = " " if inner[-1].isspace() else ""
    return f"{lead}{mark}{core}{mark}{trail}"


def _list(element: _Element, drop: _Drop) -> str:
    """A Markdown list; nested lists come out indented under their item's text."""
    ordered = element.tag == "ol"
    start = element.attrs.get("start", "1")
    number = int(start) if start.isdigit() else 1
    items: list[str] = []
    for child in _children(element):
        if drop(child):
            continue
        if child.tag == "li":
            marker = f"{number}. " if ordered else "- "
            number += 1
            blocks = _blocks(child, drop)
        else:  # a list nested straight in a list (invalid, but common) continues the last item
            marker = "  "
            blocks = _blocks(_Element("li", {}, [child]), drop)
        if blocks:
            items.append(_indent("\n".join(blocks), marker))
    return "\n".join(items)


def _indent(text: str, marker: str) -> str:
    """Prefix the first line with ``marker`` and indent the rest to its width."""
    pad = " " * len(marker)
    head, *rest = text.split("\n")
    return "\n".join([marker + head, *(pad + line if line else "" for line in rest)])


def _listings(pre: _Element) -> list[_Element]:
    """The code listings of a ``<pre>``: each of its ``<code>`` children when it holds
    several and no other text (but a form control's), else the ``<pre>`` itself.

    Node.js' docs pair an ESM and a CommonJS listing so, with no line break between them,
    beside a flavour toggle and a copy button. A ``<pre>`` with text between its
    ``<code>``s is one listing with code spans in it (texinfo's ``<code>define</code>
    <var>name</var> <code>(</code>`` … syntax lines)."""
    codes = [child for child in _children(pre) if child.tag == "code"]
    if len(codes) < 2:
        return [pre]
    text = [child for child in pre.children if isinstance(child, str)]
    text += [_raw_text(el) for el in _children(pre) if el.tag not in _CONTROLS | {"code"}]
    return [pre] if "".join(text).strip() else codes


def _fence(listing: _Element, pre: _Element) -> str:
    """A fenced code block of ``listing`` (``pre`` or one of its ``<code>`` children), long
    enough not to be closed by backticks in the code."""
    code = _raw_text(listing).strip("\n")
    language = _language(listing, pre)
    fence = "```"
    while fence in code:
        fence += "`"
    return f"{fence}{language}\n{code}\n{fence}"


def _language(listing: _Element, pre: _Element) -> str:
    """The language a class word names (``_LANGUAGE_CLASS``): on the listing or inside it,
    else on its ``<pre>``, else on the elements around the ``<pre>``; "" when none does."""
    wrappers: list[_Element] = []
    parent = pre.parent
    while parent is not None and len(wrappers) < _LANGUAGE_WRAPPERS:
        wrappers.append(parent)
        parent = parent.parent
    inner = [listing, *_iter(listing), *([pre] if listing is not pre else [])]
    for elements, pattern in [(inner, _LANGUAGE_CLASS), (wrappers, _WRAPPER_LANGUAGE_CLASS)]:
        for element in elements:
            for word in element.attrs.get("class", "").split():
                match = pattern.fullmatch(word)
                if match and match.group(1).lower() not in _NO_LANGUAGE:
                    return match.group(1)
    return ""


def _is_layout(table: _Element, drop: _Drop) -> bool:
    """Whether the table lays out the page rather than holding data (``_LAYOUT_CONTENT``):
    it is a single cell, a box around content, or one of its cells holds a heading, a code
    block or another table, which the one-line cells of a Markdown table would flatten."""
    cells = [cell for row in _rows(table) for cell in row]
    if len(cells) == 1:
        return True
    return any(el.tag in _LAYOUT_CONTENT for cell in cells for el in _iter(cell, drop))


def _rows(table: _Element) -> list[list[_Element]]:
    """Cells of the table's own rows (not of tables nested in its cells)."""
    rows: list[_Element] = []
    for child in _children(table):
        if child.tag in {"thead", "tbody", "tfoot"}:
            rows.extend(row for row in _children(child) if row.tag == "tr")
        elif child.tag == "tr":
            rows.append(child)
    cells = [[cell for cell in _children(row) if cell.tag in {"td", "th"}] for row in rows]
    return [row for row in cells if row]


def _raw_text(element: _Element) -> str:
    """All text below ``element`` with its whitespace kept; ``<br>`` becomes a newline.
    Controls and what is never text are left out (a copy button inside a ``<pre>``)."""
    return "".join(
        child
        if isinstance(child, str)
        else "\n"
        if child.tag == "br"
        else ""
        if child.tag in _UNSAID
        else _raw_text(child)
        for child in element.children
    )


def _squash(text: str) -> str:
    """Collapse whitespace as a browser does, keeping the line breaks ``<br>`` asked for."""
    lines = (" ".join(part.split()) for part in text.split(_BREAK))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
