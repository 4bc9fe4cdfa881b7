"""Which embedder a library uses: the ``embedder`` setting → an ``Embedder`` (or None).

Building an embedder must be cheap (no model load, no network call): the library builds
it lazily, never at open and never before the MCP handshake, and the model loads at its
first ``embed``. A provider that cannot be built here (its module is missing, its
package is not installed) becomes an ``UnavailableEmbedder`` that says why, so keyword
search goes on and ``doctor`` / ``list`` show the reason; only ``none`` means "no
embedder at all".

Provider modules are imported by name, lazily:

- ``local``: ``kb_mcp.embed.local.LocalEmbedder(model: str | None)``, the in-process
  offline model (``None`` = its default model).
- ``ollama``: ``kb_mcp.embed.ollama.OllamaEmbedder(host: str, model: str)``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np

from kb_mcp.embed.base import (
    Availability,
    Embedder,
    EmbedderUnavailable,
    EmbeddingSignature,
    EmbedKind,
)
from kb_mcp.errors import KbError
from kb_mcp.settings import Settings

OLLAMA_DEFAULT_MODEL = "qwen3-embedding:0.6b"
# provider → (module, class) of its implementation; with "none", exactly the choices of
# the ``embedder`` setting (``settings.EMBEDDERS``, a test keeps them equal).
IMPLEMENTATIONS = {
    "local": ("kb_mcp.embed.local", "LocalEmbedder"),
    "ollama": ("kb_mcp.embed.ollama", "OllamaEmbedder"),
}


@dataclass(frozen=True, slots=True)
class UnavailableEmbedder:
    """A configured provider that cannot run at all here, and why. Never embeds."""

    provider: str
    model: str
    reason: str

    @property
    def signature(self) -> EmbeddingSignature:
        raise EmbedderUnavailable(self.reason, hint=self.hint)

    @property
    def hint(self) -> str:
        if self.provider == "local":
            return "use --embedder ollama, or --embedder none for keyword search only"
        return "check the installation, or use --embedder none for keyword search only"

    def availability(self) -> Availability:
        return Availability(False, self.reason)

    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        raise EmbedderUnavailable(self.reason, hint=self.hint)


def default_model(provider: str) -> str | None:
    """The model a provider uses when ``embed_model`` is empty (None: the provider's own)."""
    return OLLAMA_DEFAULT_MODEL if provider == "ollama" else None


def build_embedder(
    provider: str, model: str | None, settings: Settings, *, threads: int = 1
) -> Embedder | None:
    """The embedder of ``provider`` with ``model`` (None / empty: its default); None for
    ``none``. Also rebuilds the embedder of an older signature to embed its queries.
    ``threads``: the local model's intra-op threads (1 in the server, see
    ``embed.active.foreground_embedders``); other providers ignore it."""
    if provider == "none":
        return None
    if provider not in IMPLEMENTATIONS:
        return UnavailableEmbedder(provider, model or "", f"unknown embedder {provider!r}")
    model = model or default_model(provider)
    module_name, class_name = IMPLEMENTATIONS[provider]
    try:
        implementation = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        return UnavailableEmbedder(
            provider, model or "", f"the {provider} embedder is not available here ({exc})"
        )
    try:
        if provider == "ollama":
            return implementation(host=settings.ollama_host, model=model)
        return implementation(model, threads=threads)
    except KbError as exc:  # a bad host or model name: say so, keyword search goes on
        return UnavailableEmbedder(provider, model or "", exc.message)


def make_embedder(settings: Settings) -> Embedder | None:
    """The embedder the settings ask for; None when ``embedder = none``."""
    return build_embedder(settings.embedder, settings.embed_model or None, settings)
