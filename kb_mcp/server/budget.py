"""The size budget of one tool response, and the cuts that keep every response inside it.

A minified 1.37 MB ``.js`` passage once made a single search answer 790 KB. Ingest now
caps passages, but this is the outer guarantee at the edge, whatever the library holds:
no tool result — its text content and its structured content together — exceeds
``RESPONSE_BYTES``, and every cut says so and says how to get the rest:

- search: a passage over its share is cut (redacted first, so a cut never splits a secret
  out of its pattern); its ``cite`` still names the whole range for ``read``;
- read: whole lines up to the budget, then ``start_line=…`` to continue;
- grep and list: whole matches / entries up to the budget, then how to narrow or page on;
- anything else (a huge title, thousands of sources): ``fit_response`` cuts the longest
  strings evenly until the response fits.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from kb_mcp.grep import GrepResult
from kb_mcp.library.results import ReadResult, SourceListing
from kb_mcp.redact import redact_output
from kb_mcp.search.engine import SearchResult

# 256 KB for text + structured content, so about 128 KB (~32k tokens) for each copy: more
# than agent clients accept in one result anyway (Claude Code's default limit is 25,000
# tokens), which would otherwise cut it blindly with no word on how to get the rest.
RESPONSE_BYTES = 256 * 1024
COPY_BYTES = RESPONSE_BYTES // 2
ROOM_BYTES = 8 * 1024  # for the metadata beside the text in one copy
PASSAGE_CHARS = 16_000  # one search passage, at most (several chunks' worth)
MIN_PASSAGE_CHARS = 500

Bounded = tuple[Any, str | None]  # the (possibly cut) result, and what was cut


def json_bytes(value: Any) -> int:
    """The size of ``value`` on the wire, as UTF-8 JSON."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def bound_search(result: SearchResult) -> Bounded:
    """Each passage cut to its share of the budget, with a marker naming its full cite."""
    if not result.hits:
        return result, None
    share = (COPY_BYTES - ROOM_BYTES) // len(result.hits) - 600  # 600: the hit's other fields
    cap = max(MIN_PASSAGE_CHARS, min(PASSAGE_CHARS, share // 2))  # // 2: escapes, multibyte
    hits, cut = [], 0
    for hit in result.hits:
        if len(hit.text) > cap:
            text = cut_text(redact_output(hit.text).text, cap)
            text += (
                f"\n… [truncated: this passage has {len(hit.text):,} characters, "
                f"{cap:,} shown; read {hit.cite} for all of it]"
            )
            hit, cut = dataclasses.replace(hit, text=text), cut + 1
        hits.append(hit)
    if not cut:
        return result, None
    note = f"{cut} passage(s) cut to {cap:,} characters; read a hit's cite for the whole passage"
    return dataclasses.replace(result, hits=tuple(hits)), note


def bound_read(result: ReadResult) -> Bounded:
    """Whole lines up to the budget; the note says which ``start_line`` continues."""
    limit = COPY_BYTES - ROOM_BYTES
    if json_bytes(result.text) <= limit:
        return result, None
    lines = result.text.split("\n")
    kept, used = 0, 0
    for line in lines:
        used += json_bytes(line)  # its quotes stand for the escaped newline
        if used > limit:
            break
        kept += 1
    if kept == 0:  # one line longer than the whole budget: cut inside it
        text = cut_text(redact_output(lines[0]).text, limit // 4)
        note = (
            f"line {result.start_line} alone is over the {RESPONSE_BYTES // 1024} KB response "
            f"limit and was cut at {limit // 4:,} characters; use grep to find text in it"
        )
        end = result.start_line
    else:
        text = "\n".join(lines[:kept])
        end = result.start_line + kept - 1
        note = (
            f"lines {result.start_line}-{end} of {result.start_line}-{result.end_line} shown "
            f"(the {RESPONSE_BYTES // 1024} KB response limit); read doc={result.doc} "
            f"start_line={end + 1} end_line={result.end_line} for the rest"
        )
    text += f"\n… [truncated: {note}]"
    return dataclasses.replace(result, text=text, end_line=end), note


def bound_grep(result: GrepResult) -> Bounded:
    """Whole matches up to the budget; the note says to narrow the search."""
    kept = _fitting(result.matches, lambda m: json_bytes(dataclasses.asdict(m)) * 2)
    if kept == len(result.matches):
        return result, None
    note = (
        f"{kept} of {len(result.matches)} matching lines shown (the {RESPONSE_BYTES // 1024} KB "
        "response limit); narrow the pattern, path_glob or source"
    )
    return dataclasses.replace(result, matches=result.matches[:kept], truncated=True), note


def bound_listing(result: SourceListing) -> Bounded:
    """Whole entries up to the budget; the note gives the ``offset`` of the next page."""
    kept = _fitting(result.documents, lambda d: json_bytes(dataclasses.asdict(d)) * 2)
    if kept == len(result.documents):
        return result, None
    note = (
        f"{kept} of {len(result.documents)} entries of this page shown (the "
        f"{RESPONSE_BYTES // 1024} KB response limit); continue with "
        f"offset={result.offset + kept}"
    )
    return dataclasses.replace(result, documents=result.documents[:kept]), note


def no_bound(result: Any) -> Bounded:
    return result, None


def _fitting(items: tuple[Any, ...], size: Any) -> int:
    """How many of ``items``, from the first, fit the budget (text and data copies)."""
    used, kept = 0, 0
    for item in items:
        used += size(item)
        if used > RESPONSE_BYTES - 2 * ROOM_BYTES:
            break
        kept += 1
    return kept


def cut_text(text: str, chars: int) -> str:
    """``text`` cut to at most ``chars``, at a line end when one is in the second half."""
    if len(text) <= chars:
        return text
    head = text[:chars]
    newline = head.rfind("\n")
    return head[:newline] if newline >= chars // 2 else head


def fit_response(text: str, data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The last guarantee: cut the longest strings evenly until the response fits."""
    if json_bytes(text) + json_bytes(data) <= RESPONSE_BYTES:
        return text, data
    marker = f"… [truncated: over the {RESPONSE_BYTES // 1024} KB response limit]"
    text = _cut_utf8(text, COPY_BYTES - ROOM_BYTES) + "\n" + marker
    cap = max(_longest(data), 1)
    while cap > 16 and json_bytes(data) > COPY_BYTES:
        cap //= 2
        data = _cut_strings(data, cap, marker)
    if json_bytes(data) > COPY_BYTES:  # too many small values: say so instead
        data = {"truncated": marker}
    return text, data


def _cut_utf8(text: str, max_bytes: int) -> str:
    """``text`` within ``max_bytes`` as escaped JSON (a conservative 2 bytes per byte)."""
    encoded = text.encode()
    if len(encoded) * 2 <= max_bytes:
        return text
    return encoded[: max_bytes // 2].decode("utf-8", errors="ignore")


def _longest(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max((_longest(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((_longest(v) for v in value), default=0)
    return 0


def _cut_strings(value: Any, cap: int, marker: str) -> Any:
    if isinstance(value, str):
        return value if len(value) <= cap else value[:cap] + marker
    if isinstance(value, dict):
        return {k: _cut_strings(v, cap, marker) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_strings(v, cap, marker) for v in value]
    return value
