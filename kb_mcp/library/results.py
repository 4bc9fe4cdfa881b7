"""The values the library's services return: frozen, typed, rendered only at the adapters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy-free at import: keyword-only processes never load it
    from kb_mcp.embed.base import Embedder, EmbeddingSignature
    from kb_mcp.index.vectors import VectorIndex
    from kb_mcp.ingest.skipped import SkippedGroup


@dataclass(frozen=True, slots=True)
class AddResult:
    doc: str
    outcome: str
    title: str
    chunks: int
    redactions: int
    redacted_kinds: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReadResult:
    doc: str
    title: str
    path: str | None
    source: str | None
    kind: str
    tags: tuple[str, ...]
    date: str | None
    created_at: str
    updated_at: str
    start_line: int
    end_line: int
    total_lines: int
    text: str
    stale: bool = False
    # Document relations both ways (issue 9): "corrected by <cite>", "corrects <cite>" …,
    # then the references this document makes that match no document or several.
    relations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceInfo:
    name: str
    kind: str
    root: str | None
    documents: int
    chunks: int
    failed: int
    sync_state: str
    synced_at: str | None
    error: str | None
    # Vector coverage of the signature in use: chunks embedded / still pending (None
    # when there are no vectors: ``--embedder none``, or nothing embedded yet).
    embedded: int | None = None
    embed_pending: int | None = None
    # What the last sync left out, counted per skip reason (``list SOURCE`` names them).
    skipped: dict[str, int] = field(default_factory=dict)
    # The machine a folder source belongs to, on a library machines share (PostgreSQL):
    # only it syncs the folder. None on a SQLite library (one machine's) and for other kinds.
    host: str | None = None


@dataclass(frozen=True, slots=True)
class NearDuplicate:
    """Two documents that are almost the same text (reported, never merged)."""

    a: str
    b: str
    similarity: float


@dataclass(frozen=True, slots=True)
class Overview:
    home: str
    sources: tuple[SourceInfo, ...]
    documents: int
    chunks: int
    modes: tuple[str, ...]
    health: dict[str, object]
    near_duplicates: tuple[NearDuplicate, ...] = ()
    # A shared library's store (its URL without secrets); None: the SQLite file in ``home``.
    store: str | None = None


@dataclass(frozen=True, slots=True)
class DocumentEntry:
    """One path of a source listing; ``note`` says what the reader ignored in the file."""

    doc: str
    title: str
    path: str
    date: str | None
    updated_at: str
    note: str | None = None


@dataclass(frozen=True, slots=True)
class SourceListing:
    """One page of a source's entries, with what its last sync could not index
    (``failed``: the first of ``failed_total``) and left out (``skipped``)."""

    source: str
    documents: tuple[DocumentEntry, ...]
    total: int
    offset: int
    failed: tuple[FailedFile, ...] = ()
    failed_total: int = 0
    skipped: tuple[SkippedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class LeftOut:
    """Every file of a folder source that is not indexed: the files that failed, with
    the reader's reason, and (``skipped``, from a walk made now) every path left out,
    per reason. What ``kb-mcp list SOURCE --failed`` / ``--skipped`` prints."""

    source: str
    failed: tuple[FailedFile, ...]
    skipped: tuple[SkippedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class ReindexReport:
    rebuilt: bool
    documents: int
    chunks: int
    failed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Check:
    """One ``doctor`` finding: what was checked, whether it is fine, and what was seen."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class DoctorReport:
    checks: tuple[Check, ...]
    settings: dict[str, object]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


@dataclass(frozen=True, slots=True)
class VectorState:
    """Which vectors a search may use right now, and how to embed its query.

    ``usable`` when a signature has vectors and its embedder can run: embed the query
    with ``embedder.embed([q], kind="query")[0]`` and call
    ``index.search(conn, signature_id, vector, limit, source_id)``. Otherwise ``reason``
    says why, in words fit for a ``fallback`` reason. During a model change the state
    names the old, more complete signature until the new one has caught up; vectors of
    two signatures are never mixed.
    """

    signature_id: int | None
    signature: EmbeddingSignature | None
    embedder: Embedder | None
    index: VectorIndex | None
    embedded: int
    pending: int
    reason: str | None = None
    # A run (a server's, a ``kb-mcp embed``) is embedding the configured model's
    # passages right now, in this process or another (``index/embed_runs.py``).
    building: bool = False

    @property
    def usable(self) -> bool:
        return self.signature_id is not None and self.embedder is not None and self.embedded > 0


@dataclass(frozen=True, slots=True)
class VectorBacklog:
    """The passages still without a vector of the configured embedder, and how long they
    will take: what ``kb-mcp add`` / ``sync`` say when they return before the vectors.

    ``per_second`` is this library's own recorded rate (``rate_from`` "recorded"), or one
    measured just now on ``timed`` passages ("measured"), or None when neither exists.
    ``building``: a run (a server's, a ``kb-mcp embed``) is embedding them right now.
    """

    model: str
    embedded: int
    pending: int
    per_second: float | None = None
    rate_from: str | None = None
    timed: int = 0
    building: bool = False
    error: str | None = None

    @property
    def seconds_left(self) -> float | None:
        return self.pending / self.per_second if self.per_second else None


@dataclass(frozen=True, slots=True)
class Neighbour:
    """An entity linked to another: by co-mention (``label`` '') or a typed relation."""

    key: str
    name: str
    kind: str
    label: str
    weight: float


@dataclass(frozen=True, slots=True)
class EntityLink:
    """A link between two entities by key: co-mention (``label`` '') or a typed relation."""

    a: str
    b: str
    label: str
    weight: float


@dataclass(frozen=True, slots=True)
class EntityView:
    """One entity for a person (``kb-mcp entities``): what it is, where, and next to what."""

    key: str
    name: str
    kind: str
    aliases: tuple[str, ...]
    mentions: int
    cites: tuple[str, ...]  # its heaviest mentions, as cite strings `read` accepts
    neighbours: tuple[Neighbour, ...]
    # Document key → what it is to others ("withdrawn on <date> by <cite>" …), for the
    # documents ``cites`` point into that have relations: a mention in a withdrawn
    # notice must not read as current.
    relations: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Links between two of ``neighbours`` (their keys), so the neighbourhood picture shows
    # which neighbours belong together, not only a star around the entity.
    links: tuple[EntityLink, ...] = ()


# --- what a person's views show (the web view, issue 12) ----------------------------------


@dataclass(frozen=True, slots=True)
class FailedFile:
    """A folder file the last sync could not index, and why."""

    source: str
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One line of the audit log: tool, duration, outcome (never arguments or text)."""

    ts: str
    tool: str
    duration_ms: float
    outcome: str


@dataclass(frozen=True, slots=True)
class ToolCalls:
    """One tool's calls in the part of the audit log that was read."""

    tool: str
    calls: int
    errors: int
    median_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class AuditLog:
    """The newest calls, and per tool over the last ``window`` calls."""

    recent: tuple[AuditEntry, ...]
    tools: tuple[ToolCalls, ...]
    window: int


@dataclass(frozen=True, slots=True)
class RelationLink:
    """A document relation seen from one document, with the other document's key so a
    view can link it; ``evidence`` is the cite of the lines that stated it (None: an open
    reference that names no document, or several)."""

    text: str
    other: str | None
    evidence: str | None
    other_title: str | None = None


@dataclass(frozen=True, slots=True)
class DocumentView:
    """A whole document for a person: what ``read`` returns, plus its frontmatter, its
    relations as links and the entities it mentions (name, kind, weight)."""

    read: ReadResult
    frontmatter: dict[str, str]
    relations: tuple[RelationLink, ...]
    entities: tuple[tuple[str, str, float], ...]
    cited: tuple[int, int] | None = None  # the line range a cite string named
    body_line: int = 1  # first line after the frontmatter (what is rendered as Markdown)
