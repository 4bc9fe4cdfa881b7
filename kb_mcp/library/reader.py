"""Reading a document: resolve what the caller named, notice a changed file, cut lines.

``read`` accepts a document id, a cite string, an agent document's uri or a folder file's
path. Uris and paths are stored redacted (``store/paths``), and a name is looked up in its
redacted form only: a path holding a secret resolves the same whichever value is guessed
in it, so ``read`` never confirms a guess. A folder file that changed since it was
indexed is re-indexed before it is read (``stale=True`` says so); one deleted since is
unindexed and reported as not found. What is returned is cut from the whole document
redacted, never redacted after the cut.
"""

from __future__ import annotations

from pathlib import Path

from rapidfuzz import process

from kb_mcp.cite import parse_cite
from kb_mcp.errors import InvalidInput, KbError, NotFound
from kb_mcp.ingest import readers, sync
from kb_mcp.ingest.pipeline import remove_location
from kb_mcp.ingest.walk import walk_folder
from kb_mcp.library.results import ReadResult
from kb_mcp.redact import redact
from kb_mcp.relations.change import Change, describe
from kb_mcp.store import documents as rows
from kb_mcp.store import relations as relation_rows
from kb_mcp.store.db import Database
from kb_mcp.store.paths import REDACTION_MARKER, shown_path

SUGGESTION_POOL = 40_000  # names compared for "did you mean"; bounded for huge libraries


def read_document(
    db: Database, doc: str, start_line: int | None = None, end_line: int | None = None
) -> ReadResult:
    """A document, or a line range of it (1-based, inclusive), with its metadata."""
    citation = parse_cite(doc)
    if citation is not None:
        doc = citation.doc
        start_line = start_line or citation.start_line
        end_line = end_line or citation.end_line
    elif "://" in doc and "#" in doc:  # a page URL: ``#L3-L9`` cites its lines; another
        doc, fragment = doc.split("#", 1)  # fragment names a place in the page, no more
        lines = parse_cite(f"x#{fragment}")
        if lines is not None:
            start_line = start_line or lines.start_line
            end_line = end_line or lines.end_line
    found, stale = refresh_if_stale(db, resolve_document(db, doc.strip()))
    # The whole document is redacted before lines are cut (issue 7 item 2): a range inside
    # a key block has no BEGIN line for output redaction to see. Stored text is redacted
    # already; this also covers text stored under older rules. Line counts are kept.
    lines = redact(found.text).text.split("\n")
    start, end = line_range(len(lines), start_line, end_line, found.doc_key)
    location = rows.first_location(db.conn, found.id)
    return ReadResult(
        doc=found.doc_key,
        title=found.title,
        path=found.uri or (location[2] if location else None),
        source=location[0] if location else None,
        kind=found.kind,
        tags=found.tags,
        date=found.doc_date,
        created_at=found.created_at,
        updated_at=found.updated_at,
        start_line=start,
        end_line=end,
        total_lines=len(lines),
        text="\n".join(lines[start - 1 : end]),
        stale=stale,
        relations=document_relations(db, found.id, found.doc_key),
    )


def document_relations(db: Database, document_id: int, doc_key: str) -> tuple[str, ...]:
    """What ``read`` says of a document's relations: resolved ones both ways, with the
    cite of their evidence, then its own references left open (pending, ambiguous)."""
    shown = []
    for view in relation_rows.views_for(db.conn, [doc_key]):
        incoming = view.to_key == doc_key  # a document that withdrew itself: incoming
        other = view.from_key if incoming else view.to_key
        lines = f"#L{view.start_line}-L{view.end_line}"
        cite = f"{view.stated_by_key}{lines}"
        change = Change(view.kind, incoming, other, other, view.effective)
        shown.append(f"{describe(change)} (evidence: {cite}, from {view.detected})")
    for row in relation_rows.open_references(db.conn, document_id):
        shown.append(f"{row.kind} {row.reference!r}: {row.state} (L{row.start_line})")
    return tuple(shown)


def resolve_document(db: Database, doc: str) -> rows.DocumentRow:
    """The document ``doc`` names (id, uri or path), or ``NotFound`` with suggestions."""
    if not doc:
        raise InvalidInput("doc is empty; pass a document id, a cite string or a path")
    found = rows.get_document(db.conn, doc)
    if found is not None:
        return found
    by_path = rows.find_documents_by_path(db.conn, shown_path(doc))
    if len(by_path) > 1:
        raise _ambiguous(db, doc, by_path)
    if by_path:
        return by_path[0]
    # Suggested from the name as it would be stored: names are compared redacted to redacted.
    raise NotFound(f"no document {doc!r} in this library", hint=_suggest(db, shown_path(doc)))


def _ambiguous(db: Database, path: str, found: list[rows.DocumentRow]) -> InvalidInput:
    """Two folders each with a different ``README.md``: reading "the" one by path used
    to return the older silently (a new user got attrs' README when asking for rich's).
    The caller is told every candidate, by id and source, to pick one."""
    named = []
    for row in found:
        location = rows.first_location(db.conn, row.id)
        named.append(f"{row.doc_key} ({location[0] if location else 'agent'})")
    return InvalidInput(
        f"{len(found)} documents have the path {path!r}: {', '.join(named)}",
        hint="read one by its document id",
    )


def _suggest(db: Database, doc: str) -> str:
    names = rows.document_names(db.conn, SUGGESTION_POOL)
    close = [m[0] for m in process.extract(doc, names, limit=3, score_cutoff=60)]
    if close:
        return "did you mean: " + ", ".join(close)
    return "use `search` or `list` to find document ids"


def refresh_if_stale(db: Database, found: rows.DocumentRow) -> tuple[rows.DocumentRow, bool]:
    """Re-index a folder file that changed since it was indexed; say that it did.

    A file deleted since the last sync is unindexed on the spot; when no other copy
    of the document remains, reading it is ``NotFound`` rather than stale text.
    """
    for source_id, root, path, key in rows.location_of(db.conn, found.id, "folder"):
        recorded = rows.get_location(db.conn, source_id, key)
        raw = db.paths.raw_if_shown(path, key)
        if raw is None:
            raw = _find_by_key(db, Path(root), path, key)
        try:
            if raw == _UNKNOWN:
                continue
            if raw is None:
                raise FileNotFoundError(path)
            stat = (Path(root) / raw).stat()
        except FileNotFoundError:
            remove_location(db, source_id, key)
            if rows.get_document_by_id(db.conn, found.id) is None:
                raise NotFound(
                    f"{path} was deleted from its folder since it was indexed",
                    hint="search again: the library no longer holds it",
                ) from None
            continue
        except OSError:
            continue
        if recorded and (recorded.size, recorded.mtime_ns) == (stat.st_size, stat.st_mtime_ns):
            continue
        file = sync.FoundFile(Path(root) / raw, raw, stat.st_size, stat.st_mtime_ns)
        sync.sync_file(db, source_id, Path(root).resolve(), file, recorded)
        refreshed = rows.location_document_id(db.conn, source_id, key)
        current = rows.get_document_by_id(db.conn, refreshed) if refreshed else None
        return (current or found), True
    return found, False


_UNKNOWN = "\0"  # no path holds NUL: the folder could not be walked whole, so the file
# may be there or not
# Files a walk for one redacted path looks at, at most: the default cap of a sync.
FIND_MAX_FILES = 20_000


def _find_by_key(db: Database, root: Path, shown: str, key: str) -> str | None:
    """The raw path of the file whose path has ``key``, found by walking its folder, or
    None when it is not there (``_UNKNOWN`` when the walk could not see everything).

    Only for a path stored redacted: the walk starts in the deepest folder its shown
    path names before the first marker (the text before a marker is the raw text),
    with the sync's own rules, so a file the sync would not read is not found either.
    """
    before = shown.split(REDACTION_MARKER, 1)[0]
    folder = before.rsplit("/", 1)[0] + "/" if "/" in before else ""
    try:
        walk = walk_folder(root / folder, accept=readers.is_supported, max_files=FIND_MAX_FILES)
    except NotFound:  # its folder is gone, so is the file
        return None
    except KbError:
        return _UNKNOWN
    for found in (*walk.files, *walk.beyond_cap):
        rel = folder + (found.rel if isinstance(found, sync.FoundFile) else found)
        if db.paths.key(rel) == key:
            return rel
    return _UNKNOWN if walk.over_cap or walk.unreadable_dirs else None


def line_range(total: int, start: int | None, end: int | None, doc: str) -> tuple[int, int]:
    """The 1-based inclusive range to return, clipped to the document; errors name it."""
    start = 1 if start is None else start
    end = total if end is None else end
    if start > total:
        raise InvalidInput(f"document {doc} has {total} lines; line {start} is past its end")
    if start < 1 or end < start:
        raise InvalidInput(f"bad line range {start}-{end}: lines are 1-based and start ≤ end")
    return start, min(end, total)
