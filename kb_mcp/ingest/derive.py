"""What a document's indexes need from it, computed without the database.

Trigger: the one writer thread (``ingest/pipeline``) used to compute, inside its write
transaction, everything it stored: the FTS index copies (``textprep.index_copy``), each
chunk's entities (``graph/extract``) and the document's stated relations
(``relations/detect``). They are pure functions of the document alone, and on the bench
corpus (1,250 files, 12.9 MB) they were about half of the writer's time, while the reader
processes waited on it (issue 10). Outcome: ``derive`` runs where the file was read (a
reader worker process, in parallel), its ``Derived`` travels back with the chunks, and
the writer only writes. A caller without one (an agent document, a rewrite in place)
gets the same values computed in place: one function, so both paths store the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kb_mcp.chunk import Chunk
from kb_mcp.graph.extract import Extraction, extract
from kb_mcp.index.fts import index_row
from kb_mcp.relations.detect import Detected, detect_relations
from kb_mcp.store.documents import NewDocument


@dataclass(frozen=True, slots=True)
class Derived:
    """Per chunk (in chunk order): its FTS ``(head, body)`` index copies and its
    entities; per document: the relations it states."""

    fts_rows: tuple[tuple[str, str], ...] | None
    extractions: tuple[Extraction, ...] | None
    relations: tuple[Detected, ...]


def derive(doc: NewDocument, chunks: Sequence[Chunk], *, eager: bool = True) -> Derived:
    """The index rows of ``doc`` (already redacted) split into ``chunks``.

    ``eager=False`` (a large file) leaves ``fts_rows`` and ``extractions`` None: the
    writer makes them chunk by chunk as it inserts them (``fts_rows_of``,
    ``extractions_of``). A 50 MB log's entities alone held 80 MB at once (issue 10).
    """
    return Derived(
        fts_rows=tuple(fts_rows_of(doc, chunks)) if eager else None,
        extractions=tuple(extractions_of(doc, chunks)) if eager else None,
        relations=tuple(
            detect_relations(doc.title, doc.text, doc.kind, doc.doc_date, doc.supersedes)
        ),
    )


def fts_rows_of(doc: NewDocument, chunks: Sequence[Chunk]) -> Iterator[tuple[str, str]]:
    """Each chunk's FTS ``(head, body)`` index copies, in chunk order, one at a time."""
    language = doc.language if doc.kind == "code" else None
    for c in chunks:
        yield index_row(doc.title, c.heading_path, c.text, language)


def extractions_of(doc: NewDocument, chunks: Sequence[Chunk]) -> Iterator[Extraction]:
    """Each chunk's entities (``graph/extract``), in chunk order, one at a time."""
    code = doc.kind == "code"
    for c in chunks:
        yield extract(c.text, c.heading_path, code=code)
