"""A large pass-through file read window by window: decoded, redacted and hashed in pieces.

Trigger: a 50 MB Markdown file holding Chinese and emoji is a 145–200 MB Python string
(4 bytes a character, whatever the rest of it holds), and decoding, redacting and
storing it whole peaked at 700 MB RSS in ``kb-mcp add`` (issue 10, bound 250 MB).
Outcome: a file over ``filework.LARGE_FILE_BYTES`` in a pass-through format (Markdown, plain
text, reST, data, code) and in UTF-8 is decoded in windows of bytes
(``decode.utf8_windows``), redacted window by window (``redact.stream``), and its
redacted text kept as UTF-8 (a quarter of that string, or as much as the file for ASCII),
hashed as it is made; the writer stores those bytes as the document's text and chunks
them one window at a time (``chunk.stream.iter_utf8_chunks``). The text is never one
string: only its opening is (``Large.head``), for what reads a document's opening
(frontmatter, title, stated dates and relations, near-duplicates).

The result is the whole-file path's, byte for byte: the same normalised
(``normalize.normalize_text``: its rules work inside a line, and a window ends at a line
end) and redacted text (tested), so
the same hash, key, chunks and cites. Other files (another encoding, a converted format)
return None and are read whole as before.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from kb_mcp.chunk import Chunk
from kb_mcp.chunk.stream import iter_utf8_chunks
from kb_mcp.ingest.decode import utf8_windows
from kb_mcp.ingest.derive import Derived, derive
from kb_mcp.ingest.normalize import normalize_text
from kb_mcp.ingest.readers.base import Converted
from kb_mcp.ingest.readers.generated import PieceCheck
from kb_mcp.ingest.readers.text import (
    ASCIIDOC_SUFFIXES,
    CODE_LANGUAGES,
    DATA_SUFFIXES,
    MARKDOWN_SUFFIXES,
    PLAIN_SUFFIXES,
    RST_SUFFIXES,
    asciidoc_converted,
    markdown_title,
    plain_converted,
    strip_data_uris,
)
from kb_mcp.redact.stream import redact_pieces
from kb_mcp.store.documents import NewDocument
from kb_mcp.text.frontmatter import split_frontmatter

# Bytes of the file decoded at once: as many as ``redact.stream.WINDOW_CHARS`` characters
# of ASCII, fewer of CJK; see there for the measured cost of the window size.
WINDOW_BYTES = 256 * 1024
# The least of the redacted text kept as the row's ``text`` (a window may be cut short
# above a carried key block): the readers of an opening take 40 lines, 4,000 characters
# (near-duplicates) and the frontmatter.
HEAD_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class Large:
    """A large file's reading: its opening as the reader's ``Converted`` (``markdown`` is
    the redacted head), and the whole redacted text as UTF-8 with its SHA-256."""

    head: Converted
    utf8: bytearray
    digest: str

    def document(self, doc: NewDocument) -> tuple[NewDocument, Iterator[Chunk], Derived]:
        """``doc`` (``sync.prepare_file`` of ``head``) made the whole file's: its key and
        hash are the whole redacted text's, which it stores; the file's chunks, made from
        those bytes one window at a time as the writer takes them; and no index rows
        (they are made as the chunks are stored, ``derive(eager=False)``)."""
        doc = dataclasses.replace(
            doc, doc_key="f-" + self.digest[:16], content_hash=self.digest, utf8=self.utf8
        )
        chunks = iter_utf8_chunks(self.utf8, self.head.kind, self.head.language)
        return doc, chunks, derive(doc, (), eager=False)


def read_large(data: bytes, key: str) -> Large | None:
    """Read ``data`` (a file of format ``key``) window by window; None when it is not a
    pass-through format in UTF-8, so the caller reads it whole. Raises ``Unreadable`` as
    the reader would (binary, minified or generated)."""
    kind, language = _kind(key)
    if kind is None:
        return None
    check, raw_head, inlined = PieceCheck(), [], [0]

    def raw() -> Iterator[str]:
        for piece in utf8_windows(data, WINDOW_BYTES):
            piece = normalize_text(piece)  # as convert_bytes: a window ends at a line end
            if kind == "markdown":
                piece, cut = strip_data_uris(piece)
                inlined[0] += cut
            check.add(piece)
            if not raw_head:
                raw_head.append(piece)
            yield piece

    utf8, digest, head = bytearray(), hashlib.sha256(), ""
    try:
        for piece in redact_pieces(raw()):
            head += piece if len(head) < HEAD_CHARS else ""
            encoded = piece.encode("utf-8")
            utf8 += encoded
            digest.update(encoded)
            del encoded
    except UnicodeDecodeError:
        return None
    check.check()
    return Large(
        _converted(head, raw_head[0] if raw_head else "", kind, language, inlined[0]),
        utf8,
        digest.hexdigest(),
    )


def _kind(key: str) -> tuple[str | None, str | None]:
    """The kind (and language) of a pass-through format; None for any other."""
    suffix = key.lower() if key.startswith(".") else key
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown", None
    if suffix in PLAIN_SUFFIXES:
        return "text", None
    if suffix in RST_SUFFIXES:
        return "rst", None
    if suffix in ASCIIDOC_SUFFIXES:
        return "asciidoc", None
    if suffix in DATA_SUFFIXES:
        return "data", None
    if (language := CODE_LANGUAGES.get(key)) is not None:
        return "code", language
    return None, None


def _converted(
    head: str, raw_head: str, kind: str, language: str | None, inlined: int
) -> Converted:
    """What the whole-file reader returns, learnt from the opening (``readers.text``)."""
    if kind == "text":  # read_plain's tests, on the opening only
        return dataclasses.replace(plain_converted(raw_head), markdown=head)
    if kind == "asciidoc":
        return dataclasses.replace(asciidoc_converted(raw_head), markdown=head)
    if kind != "markdown":
        return Converted(head, kind, language, None, exact=True)
    front = split_frontmatter(raw_head)
    notes = (front.problem,) if front.problem else ()
    if inlined:
        notes += (f"{inlined} embedded data: URI payload(s) left out of the index",)
    return Converted(head, kind, None, markdown_title(raw_head), exact=not inlined, notes=notes)
