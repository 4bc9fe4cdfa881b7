"""One folder file → ``FileWork``: read, hash, convert, redact, chunk and derive its rows.

No database: this runs in a sync's reader worker processes, in a bounded child process
for a PDF (``read_bounded``), or in the writer for a large file. Reading a file is a
boundary: whatever a reader raises for one file (a ``KbError`` or any other exception),
``read_file`` returns it as that file's ``failure`` with a short redacted reason, and
the sync goes on (``ingest/sync``). The bounds that decide where a file is read
(``LARGE_FILE_BYTES``, ``BOUNDED_*``) live here, beside the reading they bound.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path, PurePosixPath

from kb_mcp.chunk import Chunk, split_document
from kb_mcp.chunk.stream import iter_chunks
from kb_mcp.errors import KbError, Unavailable, Unreadable
from kb_mcp.ingest import readers
from kb_mcp.ingest.derive import Derived, derive
from kb_mcp.ingest.large import read_large
from kb_mcp.ingest.pipeline import redact_text, text_hash
from kb_mcp.ingest.policy import check_readable
from kb_mcp.ingest.walk import FoundFile
from kb_mcp.ingest.workers import run_bounded
from kb_mcp.redact import redact
from kb_mcp.store import documents as rows
from kb_mcp.text.document_dates import path_date, text_date
from kb_mcp.text.frontmatter import cap_title, meta_list, split_frontmatter
from kb_mcp.text.status import classify_status

# Files over this many bytes are read in the writer process, one at a time, and their
# FTS index copies made chunk by chunk as they are inserted
# (``derive(eager=False)``): a worker's result would exist twice (pickled there,
# unpickled in the writer). Peak RSS ≤ 250 MB for a folder of big files is issue 10's
# bound.
LARGE_FILE_BYTES = 4 * 1024 * 1024
# Formats whose converter is heavy third-party code (pymupdf4llm's layout model): read
# last, each in a process of its own under these bounds (``workers.run_bounded``), so
# one slow or huge file fails with its reason instead of holding up the folder. At the
# 0.22-0.35 s a page measured in ``readers/pdf.py`` a 300-page report takes about 100 s,
# within the time bound; the memory bound is twice the 508 MB one user's
# two PDFs took together (issue 10).
BOUNDED_FORMATS = frozenset({".pdf"})
BOUNDED_SECONDS = 180.0
BOUNDED_RSS_BYTES = 1024 * 1024 * 1024
# A failure reason is one short line: it is stored, listed by ``list`` and printed per file.
MAX_REASON_CHARS = 300


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _mtime_date(mtime_ns: int) -> str:
    return datetime.fromtimestamp(mtime_ns / 1e9, UTC).date().isoformat()


def prepare_file(
    rel: str,
    converted: readers.Converted,
    mtime_ns: int,
    now: str,
    *,
    stream: bool = False,
    redacted: bool = False,
) -> tuple[rows.NewDocument, Iterable[Chunk]]:
    """A converted file → the document row and chunks the ingestion path stores.

    The text is redacted first (line count kept), and everything below is derived from
    the redacted text: frontmatter, title, chunks, headings and the hash (see
    ``pipeline``). Title: frontmatter ``title``, else the reader's, else the file name.
    Date: frontmatter ``date`` / ``updated``, else one the text states for itself
    (``text/document_dates.py``: "Posted 12 March 2026", a dated title; not for code), else a
    date in the file name (``2026-01-05-notes.md``), else the file's mtime. Identity: the
    hash of the redacted text, so identical text in two sources is one document.
    ``stream``: the chunks come as a lazy iterator (``chunk.stream.iter_chunks``), made
    window by window as the writer stores them; else a list. ``redacted``: the caller
    redacted ``converted.markdown`` already (a large file: its raw text could then be
    dropped before the rest was made).
    """
    text = converted.markdown if redacted else redact_text(converted.markdown)
    meta = split_frontmatter(text).meta if converted.kind == "markdown" else {}
    raw_title = str(meta.get("title") or converted.title or PurePosixPath(rel).name)
    title = cap_title(redact_text(raw_title).strip())
    if stream:
        chunks: Iterable[Chunk] = iter_chunks(text, converted.kind, converted.language)
    else:
        chunks = split_document(text, converted.kind, converted.language)
    digest = text_hash(text)
    doc = rows.NewDocument(
        doc_key="f-" + digest[:16],
        title=title,
        uri=None,
        kind=converted.kind,
        language=converted.language,
        text=text,
        content_hash=digest,
        doc_date=text_date(text, converted.kind) or path_date(rel) or _mtime_date(mtime_ns),
        tags=tuple(redact_text(tag) for tag in meta_list(meta, "tags")),
        created_at=now,
        updated_at=now,
        supersedes=meta_list(meta, "supersedes"),
        status=classify_status(title, meta),
    )
    return doc, chunks


@dataclass(frozen=True, slots=True)
class FileWork:
    """One file read, hashed and (when its text changed) converted and chunked.

    Computed without the database, so it can run in a worker process; ``failure`` is the
    reason when the file could not be read, ``doc`` is None when its hash is unchanged,
    ``derived`` its index rows (``ingest/derive``: FTS copies, so the writer only
    writes; for a large file none, and ``chunks`` is then
    a lazy iterator the writer consumes once), ``note`` what the reader ignored in a file it indexed
    (``Converted.notes``).
    """

    found: FoundFile
    now: str
    file_hash: str | None = None
    failure: str | None = None
    doc: rows.NewDocument | None = None
    chunks: Iterable[Chunk] = ()
    derived: Derived | None = None
    note: str | None = None
    transient: bool = False  # the failure came from opening or reading the file: ``is_transient``


def is_transient(exc: BaseException) -> bool:
    """Whether a file failed because the OS would not give its bytes (permission denied,
    an I/O error, the file replaced while read): not the file's content, not a reader.

    Such a failure is retried by every sync, not only when the file or the readers
    change: ``chmod`` changes neither the size nor the mtime a sync compares, and the
    retry is cheap, failing again before any conversion.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError):
            return True
        seen = seen.__cause__
    return False


_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")


def failure_reason(exc: BaseException) -> str:
    """Why a file (or a sync) failed, as one short redacted line.

    A ``KbError`` says it in its message. Anything else is a reader's bug or a hostile
    file (HTMLParser's ``AssertionError`` on ``<![ x ]]>``, issue 7 item 9): its type and
    message. Redacted before it is cut, since the message may quote the file.
    """
    if isinstance(exc, KbError):
        text = exc.message
    else:
        # A parser's message quotes a slice of the file ("expected name token at
        # '<![ x ]]>ghp_Ab1Cd2E'"): a cut secret no rule recognises. Quoted spans go.
        text = _QUOTED.sub("'…'", f"{type(exc).__name__}: {exc}")
    text = " ".join(redact(text).text.split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def note_text(notes: tuple[str, ...]) -> str | None:
    """A reader's notes on a file it indexed, as one short redacted line (or None).

    Kept on the file's location (the ``reason`` column, which says why for a failed
    file) and shown by ``list(source=…)``, so "frontmatter ignored: …" is not silent.
    """
    if not notes:
        return None
    text = " ".join(redact("; ".join(notes)).text.split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def read_file(
    root: Path,
    found: FoundFile,
    previous_hash: str | None,
    now: str,
    pdf_mode: str = "layout",
    *,
    stream: bool = True,
) -> FileWork:
    """Read one file (policy re-checked on the resolved path), hash it, convert and chunk it.

    ``pdf_mode`` (setting ``pdf_mode``) ``text`` reads a PDF without layout analysis.
    A file over ``LARGE_FILE_BYTES`` is chunked lazily (``stream``; not when the work
    must be pickled back from another process).
    Never raises for the file's sake: any exception becomes ``FileWork.failure``.
    """
    file_hash = None
    # Trigger: any exception while reading, converting or chunking this one file. Why:
    # readers walk untrusted bytes with third-party parsers, and one file must not stop a
    # folder (it rolled the batch back and left the source syncing for good). Outcome:
    # the file is recorded as failed with the reason; MemoryError and RecursionError
    # included, KeyboardInterrupt and SystemExit not (they are not Exceptions).
    try:
        real = check_readable(found.path, root, root_is_resolved=True)
        data = readers.read_capped(real, readers.MAX_BYTES)
        file_hash = hashlib.sha256(data).hexdigest()
        if file_hash == previous_hash:
            return FileWork(found, now, file_hash)
        large = found.size > LARGE_FILE_BYTES
        key = readers.format_key(found.path)
        if large and stream and (windowed := read_large(data, key)) is not None:
            del data  # decoded, redacted and hashed window by window (ingest/large)
            head, _ = prepare_file(
                found.rel, windowed.head, found.mtime_ns, now, stream=True, redacted=True
            )
            doc, chunks, derived = windowed.document(head)
            note = note_text(windowed.head.notes)
            return FileWork(
                found, now, file_hash, doc=doc, chunks=chunks, derived=derived, note=note
            )
        converted = _convert(data, key, pdf_mode)
        del data  # one copy of a large file less while it is chunked
        notes = converted.notes
        if large:  # the raw text goes as soon as its redacted copy exists
            converted = dataclasses.replace(converted, markdown=redact_text(converted.markdown))
        doc, chunks = prepare_file(
            found.rel, converted, found.mtime_ns, now, stream=large and stream, redacted=large
        )
        del converted
        chunks = chunks if large and stream else tuple(chunks)
        derived = derive(doc, chunks, eager=not large)
    except Exception as exc:
        return FileWork(
            found, now, file_hash, failure=failure_reason(exc), transient=is_transient(exc)
        )
    note = note_text(notes)
    return FileWork(found, now, file_hash, doc=doc, chunks=chunks, derived=derived, note=note)


def _convert(data: bytes, key: str, pdf_mode: str) -> readers.Converted:
    if key == ".pdf" and pdf_mode == "text":
        from kb_mcp.ingest.readers.pdf import read_pdf_text

        return readers.convert_bytes(data, key, read_pdf_text)
    return readers.convert_bytes(data, key)


def is_bounded(found: FoundFile) -> bool:
    """Whether ``found`` is converted in a bounded process of its own (a PDF)."""
    return readers.format_key(found.path) in BOUNDED_FORMATS


def read_bounded(
    root: Path,
    found: FoundFile,
    previous_hash: str | None,
    now: str,
    pdf_mode: str = "layout",
    cancel: threading.Event | None = None,
) -> FileWork:
    """``read_file`` in a child process killed past the time or memory bound (or when
    ``cancel`` is set); a file that overran is a failure with that reason, and the sync
    goes on."""
    work, reason = run_bounded(
        partial(read_file, stream=False),  # the work is pickled back: no lazy chunks
        (root, found, previous_hash, now, pdf_mode),
        seconds=BOUNDED_SECONDS,
        max_rss_bytes=BOUNDED_RSS_BYTES,
        cancel=cancel,
    )
    if work is None:
        return FileWork(found, now, failure=f"cannot read {found.path.name}: {reason}")
    return work


def convert_file_bytes(data: bytes, key: str, pdf_mode: str = "layout") -> readers.Converted:
    """Convert one file's bytes as a sync does: a PDF in a bounded process (the same
    time and memory bounds) as ``pdf_mode`` says; others here.

    For an upload (``kb-mcp add FILE``), which converted PDFs unbounded in the calling
    process, always with the layout model (issue 10). Raises the reader's ``KbError``, or
    ``Unreadable`` naming the bound that stopped the conversion.
    """
    if key not in BOUNDED_FORMATS:
        return readers.convert_bytes(data, key)
    outcome, reason = run_bounded(
        _convert_outcome,
        (data, key, pdf_mode),
        seconds=BOUNDED_SECONDS,
        max_rss_bytes=BOUNDED_RSS_BYTES,
    )
    if outcome is None:
        raise Unreadable(reason or "the conversion process failed")
    converted, error = outcome
    if error is not None:
        name, message, hint = error
        raise (Unavailable if name == "Unavailable" else Unreadable)(message, hint=hint)
    return converted


def _convert_outcome(
    data: bytes, key: str, pdf_mode: str
) -> tuple[readers.Converted | None, tuple[str, str, str | None] | None]:
    """``_convert`` in a bounded child: its result, or its ``KbError`` as plain values
    (class name, message, hint), so the parent can raise it with the reader's reason."""
    try:
        return _convert(data, key, pdf_mode), None
    except KbError as exc:
        return None, (type(exc).__name__, exc.message, exc.hint)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a walk builds its ~10k small objects (or a
    batch its rows, ``read_without_gc``).

    They hold no cycles, but each collection scans every live object (the server holds
    the MCP stack's): on a 10k-file folder the walk took 0.24 s of CPU with it and 0.17 s
    without (``kb_mcp.bench.startup``, no-change re-sync). A caller that disabled the
    collector keeps it disabled.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_without_gc(read: Callable[..., FileWork], *args: object) -> FileWork:
    """``read(*args)`` in a reader worker, with no cyclic collection while it runs.

    A file's chunks, index copies and entities are tens of thousands of small tuples
    that hold no cycles, and the collector scanned them over and over as they were made
    (extraction over /work/research/realcorpus: 2.5 s of CPU with it, 2.1 s without).
    The worker's collector runs again between files, over what was left.
    """
    with gc_paused():
        return read(*args)
