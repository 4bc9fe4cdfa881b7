"""The reranker port: a question and its candidate passages in, one score each out.

A reranker reads the question and each passage together (a cross-encoder, a chat model),
which the fused legs never do: they score the question and a passage apart. It is asked
only about the first passages of the ranked order (``head.RERANK_PASSAGES``), and only its
order counts: scores are compared within one call, never across calls or rerankers.

Importing this module imports neither numpy nor a model runtime: the search engine
imports the port for its types, and keyword-only search stays lean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kb_mcp.errors import Unavailable

if TYPE_CHECKING:  # embed.base imports numpy
    from kb_mcp.embed.base import Availability

# The choices of the ``reranker`` setting (``settings.RERANKERS``, a test keeps them equal).
RERANKERS = ("none", "onnx", "ollama")


@dataclass(frozen=True, slots=True)
class Passage:
    """One candidate as the reranker reads it: the document's key, its title and
    section (``index.columns.head_text``), and the passage the search would show."""

    key: str
    title: str
    text: str


class RerankerUnavailable(Unavailable):
    """The reranker cannot score now (not loaded, unreachable, an answer it cannot use);
    the search keeps the ranked order and says why."""

    code = "reranker_unavailable"


@runtime_checkable
class Reranker(Protocol):
    """One relevance model behind one method."""

    @property
    def name(self) -> str:
        """What a result and ``doctor`` call it: ``onnx <folder>``, ``ollama <model>``."""
        ...

    def availability(self) -> Availability:
        """Cheap check (no model call where it can be avoided): can ``scores`` work now?"""
        ...

    def scores(self, question: str, passages: Sequence[Passage]) -> list[float]:
        """One score per passage, in their order; higher is more relevant to ``question``.

        Raises ``RerankerUnavailable`` (or ``InvalidInput`` for a model that cannot be a
        reranker) with the reason; never a partial answer.
        """
        ...
