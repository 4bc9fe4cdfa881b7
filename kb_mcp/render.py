"""Results → JSON-ready dicts and readable text. Shared by the MCP and CLI adapters.

Everything that leaves kb-mcp passes through ``to_data``, which runs ``redact_output``
over every string: credentials that slipped into a folder file, or an exfiltration URL
planted in a document, never reach an agent.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from kb_mcp.grep import GrepResult
from kb_mcp.library.results import (
    AddResult,
    DoctorReport,
    EntityView,
    LeftOut,
    Overview,
    ReadResult,
    ReindexReport,
    SourceListing,
)
from kb_mcp.redact import redact_output
from kb_mcp.search.engine import SearchResult

# Strings whose redaction is kept: more than one answer holds (a search of 100 results
# renders about 2,000), so a tool's second rendering of its answer redacts nothing again.
REDACTED_KEPT = 4_096


def to_data(value: Any) -> Any:
    """Dataclasses, tuples and strings → plain JSON values, every string redacted."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_data(v) for v in value]
    if isinstance(value, str):
        return _redacted(value)
    return value


@functools.lru_cache(maxsize=REDACTED_KEPT)
def _redacted(text: str) -> str:
    """``redact_output(text).text``, kept for the strings rendered last.

    Trigger: a tool answers its result twice, as text and as data (``server/calls.py``),
    and each rendering redacted every string: over stdio at 10k files a keyword search
    spent about 30 ms of server CPU rendering against 40 ms searching, most of it
    redaction. Output redaction depends on the text alone, so a kept answer is the same
    answer; the strings repeat within an answer too (leg names, reasons)."""
    return redact_output(text).text


def search_data(result: SearchResult) -> dict[str, Any]:
    data = to_data(result)
    data["results"] = data.pop("hits")
    data.pop("embed_ms")  # a measurement for the bench, not an answer
    return data


def _leg_text(hit: dict[str, Any], leg: str) -> str:
    """``keyword #3 (12.41)``: the leg, the hit's rank in it, and the leg's own score."""
    rank = hit["leg_ranks"].get(leg)
    score = hit["leg_scores"].get(leg)
    return leg + (f" #{rank}" if rank else "") + (f" ({score:g})" if score is not None else "")


def search_text(result: SearchResult) -> str:
    """The head (count, mode, fallback), then each hit: where, cite, score, the legs that
    found it with their scores, what adjusted its score, and the passage."""
    data = search_data(result)
    head = f"{len(data['results'])} result(s) for {data['query']!r} (mode: {data['mode']}"
    head += f", fell back to {data['fallback']})" if data["fallback"] else ")"
    if not data["results"]:
        return f"{head}\n{data['reason'] or 'no results'}"
    blocks = [head + (f"\nnote: {data['reason']}" if data["reason"] else "")]
    for hit in data["results"]:
        section = " › ".join(hit["section"])
        where = hit["path"] or hit["doc"]
        legs = ", ".join(_leg_text(hit, leg) for leg in hit["legs"])
        adjusted = "; ".join(f"{a['reason']} ×{a['factor']:g}" for a in hit["adjustments"])
        blocks.append(
            f"[{hit['rank']}] {hit['title']} — {where}"
            + (f" § {section}" if section else "")
            + f"\ncite: {hit['cite']}  score: {hit['score']:g}  legs: {legs}"
            + (f"\nadjusted: {adjusted}" if adjusted else "")
            + (f"\nrelations: {'; '.join(hit['relations'])}" if hit["relations"] else "")
            + f"\n{hit['text']}"
        )
    return "\n\n".join(blocks)


def entities_text(views: list[EntityView]) -> str:
    """Each entity: name, kind, mention count, aliases, cites of its heaviest mentions
    (with what their document is to others: "withdrawn on … by …"), and its neighbours
    with the relation's weight (co-mentions, or a typed label)."""
    data = to_data(views)
    if not data:
        return "no entity matches"
    blocks = []
    for e in data:
        lines = [f"{e['name']}  ({e['kind']}, {e['mentions']} mention(s), key {e['key']})"]
        if len(e["aliases"]) > 1:
            lines.append("aliases: " + ", ".join(e["aliases"]))
        for cite in e["cites"]:
            relations = e["relations"].get(cite.split("#", 1)[0], ())
            lines.append(f"  {cite}" + (f"  ({'; '.join(relations)})" if relations else ""))
        if e["neighbours"]:
            near = ", ".join(
                f"{n['name']} ({n['label'] or 'co-mentioned'} ×{n['weight']:g})"
                for n in e["neighbours"]
            )
            lines.append(f"neighbours: {near}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def grep_text(result: GrepResult) -> str:
    data = to_data(result)
    lines = [f"{m['path']}:{m['line_number']}: {m['line']}  ({m['doc']})" for m in data["matches"]]
    tail = []
    if data["truncated"]:
        tail.append(f"stopped at {len(lines)} matches (max_matches); narrow the pattern")
    if data["timed_out"]:
        tail.append("stopped at the time limit; results are partial")
    if not lines:
        lines.append(f"no line matches {data['pattern']!r}")
        if not data["documents_scanned"]:  # said, or a glob's typo reads as "not there"
            lines.append("no document was searched: the library is empty, or no path matches")
    return "\n".join(lines + tail)


def read_text(result: ReadResult) -> str:
    data = to_data(result)
    head = (
        f"# {data['title']}\n"
        f"doc: {data['doc']}  path: {data['path']}  lines {data['start_line']}-"
        f"{data['end_line']} of {data['total_lines']}"
    )
    if data["stale"]:
        head += "\nnote: the source file changed since it was indexed; it was re-indexed"
    if data["relations"]:
        head += "\nrelations:\n" + "\n".join(f"- {r}" for r in data["relations"])
    return f"{head}\n\n{data['text']}"


def overview_text(result: Overview) -> str:
    data = to_data(result)
    where = data["home"]
    if data["store"] is not None:  # a shared library: the store first, this home after
        where = f"{data['store']} (shared; home {where})"
    lines = [f"library: {where} — {data['documents']} documents, {data['chunks']} chunks"]
    for s in data["sources"]:
        failed = f", {s['failed']} failed" if s["failed"] else ""
        vectors = ""
        if s["embedded"] is not None:
            vectors = f"; vectors {s['embedded']}/{s['embedded'] + s['embed_pending']}"
        where = (", " + s["root"] if s["root"] else "") + (" on " + s["host"] if s["host"] else "")
        lines.append(
            f"- {s['name']} ({s['kind']}{where}): "
            f"{s['documents']} documents, {s['chunks']} chunks{failed}; sync {s['sync_state']}"
            f"{vectors}"
        )
        if s["sync_state"] == "error" and s["error"]:
            lines.append(f"  error: {s['error']}")
        if s["skipped"]:
            counts = ", ".join(f"{reason} {n}" for reason, n in sorted(s["skipped"].items()))
            lines.append(f"  skipped: {counts} (which and why: `kb-mcp list {s['name']}`)")
    lines.append("modes: " + ", ".join(data["modes"]))
    for pair in data["near_duplicates"]:
        lines.append(f"near-duplicate: {pair['a']} ~ {pair['b']} ({pair['similarity']:.0f}%)")
    lines.append("health: " + ", ".join(f"{k}={v}" for k, v in data["health"].items()))
    return "\n".join(lines)


def listing_text(result: SourceListing) -> str:
    """Entries are paths (a document held at two paths is listed twice), so the head
    counts entries, as ``total`` does."""
    data = to_data(result)
    shown, offset, total = len(data["documents"]), data["offset"], data["total"]
    if shown:
        head = f"entries {offset + 1}-{offset + shown} of {total} (one per path, newest first)"
    else:
        head = f"no entries at offset {offset} ({total} in all)"
    lines = [f"source {data['source']}: {head}"]
    for d in data["documents"]:
        lines.append(f"- {d['doc']}  {d['title']}  ({d['path']}, {d['date'] or d['updated_at']})")
        if d["note"]:
            lines.append(f"  note: {d['note']}")
    source = data["source"]
    if data["failed_total"]:
        lines.append(f"failed (not indexed): {data['failed_total']}")
        lines += [f"  {f['path']}: {f['reason']}" for f in data["failed"]]
        if data["failed_total"] > len(data["failed"]):
            lines.append(f"  … all of them: `kb-mcp list {source} --failed`")
    lines += _skipped_lines(data["skipped"], f"`kb-mcp list {source} --skipped`")
    return "\n".join(lines)


def _skipped_lines(groups: list[dict[str, Any]], see_all: str | None) -> list[str]:
    """Per skip reason: the count, how to read one anyway, the paths named."""
    lines = []
    for group in groups:
        lines.append(f"skipped, {group['reason']}: {group['count']} ({group['how_to_include']})")
        lines += [f"  {path}" for path in group["paths"]]
        if see_all and group["count"] > len(group["paths"]):
            lines.append(f"  … all of them: {see_all}")
    return lines


def left_out_text(result: LeftOut) -> str:
    """``kb-mcp list SOURCE --failed`` / ``--skipped``: every path, per reason."""
    data = to_data(result)
    lines = [f"source {data['source']}: {len(data['failed'])} failed"]
    lines += [f"  {f['path']}: {f['reason']}" for f in data["failed"]]
    return "\n".join(lines + _skipped_lines(data["skipped"], None))


def add_text(result: AddResult) -> str:
    data = to_data(result)
    text = f"{data['outcome']}: {data['doc']} “{data['title']}” ({data['chunks']} chunks)"
    if data["redactions"]:
        text += f"; {data['redactions']} secret(s) redacted ({', '.join(data['redacted_kinds'])})"
    return text


def doctor_text(result: DoctorReport) -> str:
    data = to_data(result)
    lines = [f"{'ok ' if c['ok'] else 'FAIL'} {c['name']}: {c['detail']}" for c in data["checks"]]
    lines.append("settings:")
    lines += [f"  {name} = {value}" for name, value in data["settings"].items()]
    return "\n".join(lines)


def reindex_text(result: ReindexReport) -> str:
    data = to_data(result)
    verb = "rebuilt" if data["rebuilt"] else "reindexed"
    lines = [f"{verb}: {data['documents']} documents, {data['chunks']} chunks"]
    lines += [f"failed: {f}" for f in data["failed"]]
    return "\n".join(lines)
