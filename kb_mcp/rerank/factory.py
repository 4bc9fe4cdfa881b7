"""Which reranker a library uses: the ``reranker`` setting → a ``Reranker`` (or None).

Built at the first search that wants it, never at open: an ``onnx`` folder is checked
then, and its model read at the first scoring. A reranker that cannot be built (an empty
or incomplete ``reranker_model`` folder) becomes an ``UnavailableReranker`` that says
why: searches keep the ranked order with that reason and ``doctor`` shows it; only
``none`` means "no reranker at all".
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kb_mcp.errors import KbError
from kb_mcp.rerank.base import Passage, Reranker
from kb_mcp.settings import Settings

if TYPE_CHECKING:
    from kb_mcp.embed.base import Availability


@dataclass(frozen=True, slots=True)
class UnavailableReranker:
    """A configured reranker that cannot be built here, and why. Never scores."""

    name: str
    error: KbError

    def availability(self) -> Availability:
        from kb_mcp.embed.base import Availability

        return Availability(False, self.error.message)

    def scores(self, question: str, passages: Sequence[Passage]) -> list[float]:
        raise self.error


def build_reranker(settings: Settings) -> Reranker | None:
    """The reranker ``settings`` name (None for ``none``); ``InvalidInput`` when its
    model folder is not one."""
    if settings.reranker == "onnx":
        from kb_mcp.rerank.onnx import OnnxReranker

        return OnnxReranker(settings.reranker_model)
    if settings.reranker == "ollama":
        from kb_mcp.rerank.ollama import OllamaReranker

        return OllamaReranker(settings.ollama_host, settings.reranker_model)
    return None


class ActiveReranker:
    """The library's one reranker, built once at first use (thread-safe)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._built = False
        self._reranker: Reranker | None = None

    def get(self) -> Reranker | None:
        """The reranker (None: ``reranker = none``); one that cannot be built says why."""
        with self._lock:
            if not self._built:
                try:
                    self._reranker = build_reranker(self._settings)
                except KbError as error:
                    self._reranker = UnavailableReranker(self._settings.reranker, error)
                self._built = True
            return self._reranker
