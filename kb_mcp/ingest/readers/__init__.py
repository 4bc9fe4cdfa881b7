"""Readers: one per format, each turning file bytes into the Markdown we store.

``READERS`` is the one dispatch table. Keys are lower-case suffixes (``".pdf"``)
or exact names of files that have no suffix (``"Makefile"``); the supported-format
lists in error messages and ``supported_suffixes`` are generated from it, so
they cannot drift from what is actually dispatched.

Any other file is read as plain text when its content is text (issue 20 item 10: an
extension-less ``README``, ``PKG-INFO``, ``*.mako`` templates were left out for their
names): ``is_readable`` sniffs its first bytes (``decode.looks_like_text``), and the
plain-text reader refuses it as binary if the rest says otherwise. ``BINARY_SUFFIXES``
are never opened for that: formats that are never text, and machine text nobody reads
(SVG drawings, source maps).

Readers raise ``Unreadable`` with the bare reason ("no text layer …"), since
bytes have no name; ``read_path`` prefixes "cannot read <name>: ". A missing
optional extra raises ``Unavailable`` with the pip command as its hint, and is
passed through unchanged because it is about the install, not the file.

Every reader's text goes through ``normalize.normalize_text`` here (``convert_bytes``),
the one place a file becomes text: split letters joined, U+FFFD gone, no line moved.
A file that fails is recorded with the ``environment`` it failed in, and read again by
the next sync that runs in another one (``ingest/sync``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import sys
from functools import lru_cache, partial
from pathlib import Path

from kb_mcp import __version__
from kb_mcp.errors import Unreadable
from kb_mcp.ingest.decode import SNIFF_BYTES, looks_like_text
from kb_mcp.ingest.normalize import normalize_text
from kb_mcp.ingest.readers import docx, html, pdf, text
from kb_mcp.ingest.readers.base import Converted, Reader, markdown_table

MAX_BYTES = 50 * 1024 * 1024

# Suffixes (lower case) with no reader that are never read as text: images, audio and
# video, archives and packages, compiled code, fonts, binary office files and databases,
# plus text no person writes (SVG drawings, source maps).
BINARY_SUFFIXES = frozenset(
    {
        *(".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".icns", ".webp", ".tif"),
        *(".tiff", ".psd", ".heic", ".avif", ".svg", ".svgz", ".eps", ".xcf"),
        *(".mp3", ".mp4", ".m4a", ".m4v", ".wav", ".flac", ".ogg", ".opus", ".avi"),
        *(".mov", ".mkv", ".webm", ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z"),
        *(".rar", ".tar", ".jar", ".war", ".whl", ".egg", ".deb", ".rpm", ".dmg", ".iso"),
        *(".pyc", ".pyo", ".pyd", ".o", ".obj", ".a", ".lib", ".so", ".dylib", ".dll"),
        *(".exe", ".class", ".wasm", ".ttf", ".otf", ".woff", ".woff2", ".eot", ".doc"),
        *(".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp", ".epub", ".db"),
        *(".sqlite", ".sqlite3", ".mdb", ".npy", ".npz", ".pkl", ".pickle", ".parquet"),
        *(".onnx", ".pt", ".bin", ".map"),
    }
)  # fmt: skip


READERS: dict[str, Reader] = {
    **dict.fromkeys(text.MARKDOWN_SUFFIXES, text.read_markdown),
    **dict.fromkeys(text.PLAIN_SUFFIXES, text.read_plain),
    **dict.fromkeys(text.RST_SUFFIXES, text.read_rst),
    **dict.fromkeys(text.ASCIIDOC_SUFFIXES, text.read_asciidoc),
    **dict.fromkeys(text.DATA_SUFFIXES, text.read_data),
    **{key: partial(text.read_code, language=lang) for key, lang in text.CODE_LANGUAGES.items()},
    **dict.fromkeys(html.SUFFIXES, html.read_html),
    ".pdf": pdf.read_pdf,
    ".docx": docx.read_docx,
}


_READER, _BINARY, _CONTENT = "reader", "binary", "content"


@lru_cache(maxsize=1 << 16)
def _by_name(name: str) -> str:
    """What a file's name says: it has a reader, it is binary, or its content decides.

    Cached by name: a walk asks it of every file, twice (the format and whether the
    name decides), and a re-sync of the same names again."""
    if name in READERS:
        return _READER
    dot = name.rfind(".")
    suffix = name[dot:].lower() if 0 < dot < len(name) - 1 else ""
    if suffix in READERS:
        return _READER
    return _BINARY if suffix in BINARY_SUFFIXES else _CONTENT


def supported_suffixes() -> frozenset[str]:
    """Every file suffix with a reader (lower case, with the dot)."""
    return frozenset(key for key in READERS if key.startswith("."))


def format_key(path: Path) -> str:
    """The ``READERS`` key of ``path``: its name if listed (``Makefile``), else its suffix."""
    return path.name if path.name in READERS else path.suffix.lower()


def is_supported(path: Path) -> bool:
    """True when ``path`` has a reader, by exact name (``Makefile``) or by suffix in any case."""
    return _by_name(path.name) is _READER


def may_be_text(path: Path) -> bool:
    """True when ``path``'s name leaves reading it to its content: it has a reader, or
    its suffix is not one of ``BINARY_SUFFIXES``. Decided without touching the disk (the
    file watcher asks it of paths that may be gone)."""
    return _by_name(path.name) is not _BINARY


def is_readable(path: Path) -> bool:
    """True when ``path`` has a reader by name, or ``may_be_text`` and its first bytes are
    text. Opens only a file without a reader for its name; one that cannot be opened, or
    is empty (``py.typed``, ``REQUESTED``), is not readable (the walk counts it
    ``unsupported``)."""
    verdict = _by_name(path.name)
    if verdict is not _CONTENT:
        return verdict is _READER
    try:
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError:
        return False
    return bool(head.strip()) and looks_like_text(head)  # an empty marker says nothing


def read_path(path: Path, *, max_bytes: int = MAX_BYTES) -> Converted:
    """Read and convert one file; ``Unreadable`` messages start "cannot read <name>: ".

    The format is checked before the file is opened, so an unsupported file is never read.
    """
    key = format_key(path)
    try:
        _reader_for(key)
        return convert_bytes(read_capped(path, max_bytes), key)
    except Unreadable as error:
        raise Unreadable(f"cannot read {path.name}: {error.message}", hint=error.hint) from error


def read_capped(path: Path, max_bytes: int = MAX_BYTES) -> bytes:
    """Read a whole file of at most ``max_bytes``; a larger one raises ``Unreadable`` naming both.

    Only ``max_bytes + 1`` bytes are ever read, so a huge or growing file costs nothing.
    Messages are bare reasons, as for ``convert_bytes``.
    """
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
            size = max(os.fstat(file.fileno()).st_size, len(data))
    except OSError as error:
        raise Unreadable(error.strerror or str(error)) from error
    if len(data) > max_bytes:
        raise Unreadable(
            f"file is {_mib(size)}, over the {_mib(max_bytes)} size cap",
            hint="split the file, or raise the size cap",
        )
    return data


def convert_bytes(data: bytes, suffix: str, reader: Reader | None = None) -> Converted:
    """Convert bytes of the format named by ``suffix`` (``".pdf"``, ``"pdf"`` or ``"Makefile"``),
    with ``reader`` instead of the table's when given (a PDF in ``pdf_mode = text``);
    the text and title normalised (``normalize_text``)."""
    converted = (reader or _reader_for(suffix))(data)
    return dataclasses.replace(
        converted,
        markdown=normalize_text(converted.markdown),
        title=normalize_text(converted.title) if converted.title else converted.title,
    )


# The libraries readers import: what ``environment`` watches.
READER_LIBRARIES = ("pypdfium2", "pymupdf", "pymupdf4llm", "docx", "charset_normalizer")


def environment(*settings: str) -> str:
    """A short key for what reads files in this process: kb-mcp's and Python's versions,
    the reader ``settings`` given (``pdf_mode``), and for each reader library the file it
    would be imported from, with that file's size and mtime (or its absence).

    A file that failed keeps the key it failed under; a sync whose key differs reads it
    again, though the file did not change (issue 20 item 8: a PDF that failed for a
    missing reader stayed failed after the reader was installed). Installing, upgrading
    (pip writes the module's files anew) or removing a reader, or choosing another,
    changes it. The files are looked up, not imported, and not read (a distribution's
    version would be: 6-10 ms a sync, against under 1 ms); computed per sync, never
    cached, so a running server sees an install made after it started.
    """
    parts = [f"kb-mcp {__version__}", f"python {sys.version.split()[0]}", *settings]
    for module in READER_LIBRARIES:
        parts.append(f"{module} {_module_file(module)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _module_file(module: str) -> str:
    """Where ``module`` would be imported from, its size and mtime; "absent" if nowhere."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # ValueError: a module left without a spec
        spec = None
    if spec is None or spec.origin is None:
        return "absent"
    try:
        stat = os.stat(spec.origin)
    except OSError:
        return f"{spec.origin} unreadable"
    return f"{spec.origin} {stat.st_size} {stat.st_mtime_ns}"


def _reader_for(suffix: str) -> Reader:
    """Look the format up in ``READERS``; any other but ``BINARY_SUFFIXES`` is read as
    plain text (which refuses binary content). The error lists every supported format."""
    key = suffix if suffix in READERS else "." + suffix.lower().lstrip(".")
    if (reader := READERS.get(key)) is not None:
        return reader
    if key not in BINARY_SUFFIXES:
        return text.read_plain
    supported = ", ".join(sorted(READERS, key=str.lower))
    raise Unreadable(
        f"unsupported format '{suffix}'; supported: {supported}, and any other file "
        "whose content is text"
    )


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


__all__ = [
    "BINARY_SUFFIXES",
    "MAX_BYTES",
    "READERS",
    "Converted",
    "Reader",
    "convert_bytes",
    "environment",
    "format_key",
    "is_readable",
    "is_supported",
    "markdown_table",
    "may_be_text",
    "read_capped",
    "read_path",
    "supported_suffixes",
]
