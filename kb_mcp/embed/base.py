"""The embedder port: text in, unit-length float32 vectors out.

Every provider (``local``, ``ollama``) implements ``Embedder``; the rest of kb-mcp sees
only this module. A vector is meaningful only next to vectors of the same
``EmbeddingSignature``: the index keeps one table per signature and never compares
across them, so a model change re-embeds instead of mixing spaces.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from kb_mcp.errors import Unavailable

EmbedKind = Literal["passage", "query"]
PROVIDERS = ("local", "ollama", "none")


@dataclass(frozen=True, slots=True)
class EmbeddingSignature:
    """What makes two vectors comparable: same provider, model, size and text scheme.

    ``max_chars`` is the text budget the provider is given (longer text is cut before
    embedding, so the budget is part of what a vector means); ``prefixes`` names the
    query / passage prefix scheme (``"e5"``: ``query: `` / ``passage: ``; ``"none"``).
    """

    provider: str
    model: str
    dims: int
    max_chars: int
    prefixes: str = "none"

    @property
    def key(self) -> str:
        """A short stable id for table names: the first 12 hex digits of a digest."""
        raw = f"{self.provider}|{self.model}|{self.dims}|{self.max_chars}|{self.prefixes}"
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:12]

    def describe(self) -> str:
        return f"{self.provider}:{self.model} ({self.dims} dims)"


@dataclass(frozen=True, slots=True)
class Availability:
    """Whether the embedder can run now, and if not, why (shown by doctor and list)."""

    ok: bool
    reason: str | None = None


class EmbedderUnavailable(Unavailable):
    """The embedder cannot embed right now (not installed, unreachable, failing)."""

    code = "embedder_unavailable"


@runtime_checkable
class Embedder(Protocol):
    """One embedding model behind one method."""

    @property
    def signature(self) -> EmbeddingSignature: ...

    def availability(self) -> Availability:
        """Cheap check (no model call when it can be avoided): can ``embed`` work now?"""
        ...

    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        """``len(texts)`` × ``signature.dims`` float32, each row of unit length.

        Raises ``EmbedderUnavailable`` (with the provider's reason) when it cannot; never
        returns a partial batch.
        """
        ...


def normalized(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms
