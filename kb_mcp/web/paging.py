"""A document page's numbered lines, one page at a time (issue 20 item 6).

A 12 MB file's page used to be 15 MB of HTML and take 6-7 s. As ``read`` pages a long
document (``server/budget.bound_read``: whole lines up to a budget, then where to go on),
a page here holds whole lines up to ``PAGE_BYTES`` of their HTML, measured on the very
HTML it will show, so the bound holds whatever the lines are made of (long lines, empty
ones, ``<`` that escapes to four bytes). A line longer than a whole page is shown cut at
``CUT_CHARS``, alone on its page. A cited range's page starts a few lines above it.
Previous / next / last page are computed with the same measure, so every line is on some
page and the links reach the last one.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

PAGE_BYTES = 128 * 1024  # the numbered lines' HTML on one page (``read``'s text is ~128 KB too)
CUT_CHARS = PAGE_BYTES // 8  # a line over a whole page: at most 6 bytes a character escaped
CITED_CONTEXT = 5  # lines shown above a cited range, when they fit on its page


def line_html(number: int, text: str) -> str:
    """One numbered line: its anchor (``#L12``) and its text, escaped."""
    return (
        f"<div class='line' id='L{number}'><a class='ln' href='#L{number}'>{number}</a>"
        f"<code>{html.escape(text) or ' '}</code></div>"
    )


def _cost(lines: Sequence[str], number: int) -> int:
    return len(line_html(number, lines[number - 1]).encode())


@dataclass(frozen=True, slots=True)
class Window:
    """Lines ``first``-``last`` of ``total`` (1-based, inclusive), as they are shown."""

    first: int
    last: int
    total: int
    shown: tuple[str, ...]
    cut_chars: int | None  # the one line shown was cut: its full length in characters
    previous: int | None  # where the page before this one starts; None on the first page
    last_page: int  # where the page holding the last line starts

    @property
    def next(self) -> int | None:
        return self.last + 1 if self.last < self.total else None


def page_from(lines: Sequence[str], first: int) -> Window:
    """The page of ``lines`` that starts at line ``first`` (1 ≤ first ≤ len(lines))."""
    total = len(lines)
    used, last = 0, first - 1
    while last < total:
        used += _cost(lines, last + 1)
        if used > PAGE_BYTES:
            break
        last += 1
    cut = None
    if last < first:  # one line over the whole page: cut inside it
        last, cut = first, len(lines[first - 1])
    shown = tuple(lines[first - 1 : last])
    if cut is not None:
        shown = (shown[0][:CUT_CHARS],)
    previous = _start_of_page_ending(lines, first - 1) if first > 1 else None
    return Window(first, last, total, shown, cut, previous, _start_of_page_ending(lines, total))


def page_holding(lines: Sequence[str], cited: tuple[int, int]) -> Window:
    """The page showing ``cited``'s first line, with up to ``CITED_CONTEXT`` lines above
    it; a range past the end gives the last page."""
    start = min(cited[0], len(lines))
    page = page_from(lines, max(1, start - CITED_CONTEXT))
    return page if page.last >= start else page_from(lines, start)


def _start_of_page_ending(lines: Sequence[str], end: int) -> int:
    """The first line of the fullest page that ends at line ``end``."""
    used, first = 0, end + 1
    while first > 1:
        used += _cost(lines, first - 1)
        if used > PAGE_BYTES:
            break
        first -= 1
    return min(first, end)  # a line over a whole page is a page by itself


def numbered_html(window: Window, cited: tuple[int, int] | None) -> str:
    """The window's lines, the cited ones wrapped in ``<div class='cited' id='L12-L40'>``:
    the anchor a cite link scrolls to, on the page that holds the range's start (a range
    going on past it is highlighted on the next page too, without the anchor)."""
    out = ["<div class='lines'>"]
    inside = False
    for number, text in enumerate(window.shown, start=window.first):
        if cited and number == cited[0]:
            out.append(f"<div class='cited' id='L{cited[0]}-L{cited[1]}'>")
            inside = True
        elif cited and number == window.first and cited[0] < number <= cited[1]:
            out.append("<div class='cited'>")  # the range goes on from the page before
            inside = True
        out.append(line_html(number, text))
        if inside and cited and number == cited[1]:
            out.append("</div>")
            inside = False
    if inside:
        out.append("</div>")
    out.append("</div>")
    return "".join(out)
