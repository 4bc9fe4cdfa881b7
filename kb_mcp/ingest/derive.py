"""What a document's keyword index needs from it, computed without the database.

Trigger: the one writer thread (``ingest/pipeline``) used to compute, inside its write
transaction, the FTS index copies (``textprep.index_copy``) of what it stored. They are a
pure function of the document alone, and on the bench corpus (1,250 files, 12.9 MB) they
and the entities were about half of the writer's time, while the reader processes
waited on it (issue 10). Outcome: ``derive`` runs where the file was read (a reader
worker process, in parallel), its ``Derived`` travels back with the chunks, and the
writer only writes. A caller without one (an agent document, a rewrite in place) gets
the same values computed in place: one function, so both paths store the same.

Entities and stated relations are not derived here: the linking phase after the keyword
phase computes them from the stored rows (``ingest/links``, issue 22).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kb_mcp.chunk import Chunk
from kb_mcp.index.columns import index_row
from kb_mcp.store.documents import NewDocument


@dataclass(frozen=True, slots=True)
class Derived:
    """Per chunk (in chunk order): its FTS ``(head, body)`` index copies."""

    fts_rows: tuple[tuple[str, str], ...] | None


def derive(doc: NewDocument, chunks: Sequence[Chunk], *, eager: bool = True) -> Derived:
    """The index rows of ``doc`` (already redacted) split into ``chunks``.

    ``eager=False`` (a large file) leaves ``fts_rows`` None: the writer makes them chunk
    by chunk as it inserts them (``fts_rows_of``).
    """
    return Derived(fts_rows=tuple(fts_rows_of(doc, chunks)) if eager else None)


def fts_rows_of(doc: NewDocument, chunks: Sequence[Chunk]) -> Iterator[tuple[str, str]]:
    """Each chunk's FTS ``(head, body)`` index copies, in chunk order, one at a time."""
    language = doc.language if doc.kind == "code" else None
    for c in chunks:
        yield index_row(doc.title, c.heading_path, c.text, language)
