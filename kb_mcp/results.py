"""The values the ``Library`` returns: frozen, typed, rendered only at the adapters."""

from __future__ import annotations

from dataclasses import dataclass


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
    source: str
    documents: tuple[DocumentEntry, ...]
    total: int
    offset: int


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
