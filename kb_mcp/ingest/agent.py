"""Agent documents: text an agent already read, kept as Markdown files under ``<home>/docs/``.

Identity is a key hashed from the RAW ``source_uri``: never from the title (two unrelated
documents are both called README) and never from the content (an edit must replace, not
accumulate). The uri is an opaque label: it is never opened, resolved or fetched. Only its
redacted form is stored, but the key is hashed from the raw form, because redaction is
lossy and two uris differing only in a secret-shaped segment must stay two documents.

The file is the truth: its frontmatter keeps the id, title, redacted uri, tags and the
real ``created_at`` / ``updated_at``, so ``reindex --rebuild`` restores them exactly.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from kb_mcp.errors import InvalidInput, Unreadable
from kb_mcp.text.frontmatter import meta_date, meta_list, render_frontmatter, split_frontmatter

AGENT_SOURCE = "agent"
UPLOAD_SOURCE = "uploads"
DOCS_DIR = "docs"
ORIGINALS_DIR = "originals"
MAX_URI_CHARS = 2_048
MAX_TAGS = 32
MAX_TAG_CHARS = 64


@dataclass(frozen=True, slots=True)
class AgentDocument:
    doc_key: str
    title: str
    uri: str
    tags: tuple[str, ...]
    content: str
    created_at: str
    updated_at: str
    doc_date: str | None = None
    supersedes: tuple[str, ...] = ()
    source: str = AGENT_SOURCE  # or UPLOAD_SOURCE for a file the user imported
    kind: str = "markdown"


def doc_key_for_uri(raw_uri: str) -> str:
    """``a-`` + 16 hex digits of SHA-256 over the raw uri bytes."""
    return "a-" + hashlib.sha256(raw_uri.encode("utf-8")).hexdigest()[:16]


def doc_key_for_upload(path: Path) -> str:
    """``u-`` + 16 hex digits over the resolved path: importing it again replaces it."""
    return "u-" + hashlib.sha256(str(path.resolve()).encode("utf-8")).hexdigest()[:16]


def agent_file(home: Path, doc_key: str) -> Path:
    return home / DOCS_DIR / f"{doc_key}.md"


def validate_fields(
    title: str,
    content: str,
    source_uri: str,
    tags: list[str] | tuple[str, ...],
    *,
    max_title_chars: int,
    max_document_bytes: int,
) -> None:
    """Raise ``InvalidInput`` naming the first field that is missing or over its limit."""
    if not title.strip():
        raise InvalidInput("title is empty; give the document a short descriptive title")
    if len(title) > max_title_chars:
        raise InvalidInput(f"title is {len(title)} characters; the limit is {max_title_chars}")
    if not content.strip():
        raise InvalidInput("content is empty; pass the text you read")
    _check_no_nul(content)
    size = len(content.encode("utf-8"))
    if size > max_document_bytes:
        raise InvalidInput(
            f"content is {size:,} bytes; the limit is {max_document_bytes:,}",
            hint="split the text into several documents, each with its own source_uri",
        )
    if not source_uri.strip():
        raise InvalidInput("source_uri is empty; it identifies the document (e.g. its URL)")
    if len(source_uri) > MAX_URI_CHARS:
        raise InvalidInput(
            f"source_uri is {len(source_uri)} characters; the limit is {MAX_URI_CHARS}"
        )
    if len(tags) > MAX_TAGS or any(not t.strip() or len(t) > MAX_TAG_CHARS for t in tags):
        raise InvalidInput(f"tags: at most {MAX_TAGS}, each 1 to {MAX_TAG_CHARS} characters")
    for name, value in (("title", title), ("source_uri", source_uri), *(("tag", t) for t in tags)):
        _check_one_line(name, value)


# Control characters, and the bidi overrides and isolates that make a label display as
# something else ("Trojan Source", CVE-2021-42574). Titles, uris and tags are one-line
# labels shown to people and agents; the content may hold any text.
_HIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _check_no_nul(content: str) -> None:
    """Refuse U+0000 in the content: a NUL means binary data, as it does in a file.

    A folder's file holding NUL bytes is skipped as binary (``ingest/decode``); the same
    text sent by an agent was stored on SQLite and failed inside PostgreSQL, whose text
    type cannot hold NUL. One rule for every store: the caller gets the place to fix."""
    at = content.find("\x00")
    if at >= 0:
        line = content.count("\n", 0, at) + 1
        column = at - (content.rfind("\n", 0, at) + 1) + 1
        raise InvalidInput(
            f"content contains a NUL character (U+0000) at line {line}, column {column}; "
            "documents hold text, and NUL marks binary data",
            hint="send the text itself (decode the bytes first, or drop the NUL characters)",
        )


def _check_one_line(name: str, value: str) -> None:
    found = _HIDDEN.search(value)
    if found is not None:
        raise InvalidInput(
            f"{name} contains the control character U+{ord(found.group()):04X} at position "
            f"{found.start()}; labels must be one line of visible text",
            hint="remove line breaks, NUL and bidi override characters from it",
        )


def render_agent_file(doc: AgentDocument) -> str:
    meta: dict[str, object] = {
        "id": doc.doc_key,
        "title": doc.title,
        "source_uri": doc.uri,
        "tags": list(doc.tags),
        "created_at": doc.created_at,
        "updated_at": doc.updated_at,
    }
    if doc.doc_date:
        meta["date"] = doc.doc_date
    if doc.supersedes:
        meta["supersedes"] = list(doc.supersedes)
    if doc.source != AGENT_SOURCE:
        meta["source"] = doc.source
        meta["kind"] = doc.kind
    return render_frontmatter(meta, doc.content)


def parse_agent_file(path: Path) -> AgentDocument:
    """Read an agent document back from its file (used by ``reindex --rebuild``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(f"cannot read agent document {path}: {exc}") from exc
    front = split_frontmatter(text)
    meta = front.meta
    doc_key = str(meta.get("id") or path.stem)
    created = str(meta.get("created_at") or "")
    return AgentDocument(
        doc_key=doc_key,
        title=str(meta.get("title") or path.stem),
        uri=str(meta.get("source_uri") or doc_key),
        tags=meta_list(meta, "tags"),
        content=front.body,
        created_at=created,
        updated_at=str(meta.get("updated_at") or created),
        doc_date=meta_date(meta, "date", "updated"),
        supersedes=meta_list(meta, "supersedes"),
        source=UPLOAD_SOURCE if meta.get("source") == UPLOAD_SOURCE else AGENT_SOURCE,
        kind=str(meta.get("kind") or "markdown"),
    )
