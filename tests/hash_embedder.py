"""Small, real embedders for tests: deterministic, fast, no model.

``HashEmbedder`` is a genuine ``Embedder``: feature hashing of lowercase word tokens and
character trigrams into ``dims`` signed buckets, normalized. Texts sharing words land
near each other, so neighbour order can be asserted. ``FlakyEmbedder`` wraps one and
fails on demand, as a provider does when it goes away; ``LoggingEmbedder`` appends one
line per embedded text to a file (``os.write`` on an ``O_APPEND`` descriptor, so the
lines survive a ``kill -9`` of the process) and can slow each batch down.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kb_mcp.embed.base import (
    Availability,
    EmbedderUnavailable,
    EmbeddingSignature,
    EmbedKind,
    normalized,
)

_WORD = re.compile(r"\w+")


def _features(text: str) -> list[str]:
    lowered = text.lower()
    words = _WORD.findall(lowered)
    grams = [lowered[i : i + 3] for i in range(max(len(lowered) - 2, 0))]
    return [f"w:{w}" for w in words] * 2 + [f"g:{g}" for g in grams]


class HashEmbedder:
    """Feature hashing into ``dims`` dimensions; provider ``test``."""

    def __init__(self, model: str = "hash-64", dims: int = 64, max_chars: int = 2000) -> None:
        self._signature = EmbeddingSignature("test", model, dims, max_chars, "none")
        self.calls = 0
        self.texts = 0

    @property
    def signature(self) -> EmbeddingSignature:
        return self._signature

    def availability(self) -> Availability:
        return Availability(True)

    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        dims = self._signature.dims
        # The model name seeds the hash: two "models" put the same text in different places.
        salt = self._signature.model.encode("utf-8")
        matrix = np.zeros((len(texts), dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in _features(text):
                digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, key=salt[:64])
                value = int.from_bytes(digest.digest(), "little")
                matrix[row, value % dims] += 1.0 if (value >> 32) & 1 else -1.0
        return normalized(matrix)


class FlakyEmbedder:
    """``inner`` until ``fail_after`` more calls have passed, then unavailable while
    ``failing``; the test flips ``failing`` back to recover."""

    def __init__(self, inner: HashEmbedder, fail_after: int | None = None) -> None:
        self.inner = inner
        self.fail_after = fail_after
        self.failing = False
        self.failures = 0

    @property
    def signature(self) -> EmbeddingSignature:
        return self.inner.signature

    def availability(self) -> Availability:
        return Availability(False, "test provider down") if self.failing else Availability(True)

    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        if self.fail_after is not None:
            if self.fail_after <= 0:
                self.failing, self.fail_after = True, None
            else:
                self.fail_after -= 1
        if self.failing:
            self.failures += 1
            raise EmbedderUnavailable("test provider down (connection refused)")
        return self.inner.embed(texts, kind)


class LoggingEmbedder:
    """``inner``, plus one line per embedded text in ``log`` and a pause per batch; after
    ``hold_after`` batches, the next one waits for good (a run held for its kill -9, on a
    machine of any speed)."""

    def __init__(
        self, inner: HashEmbedder, log: Path, pause_s: float = 0.0, hold_after: int | None = None
    ) -> None:
        self.inner = inner
        self.log = log
        self.pause_s = pause_s
        self.hold_after = hold_after
        self.batches = 0

    @property
    def signature(self) -> EmbeddingSignature:
        return self.inner.signature

    def availability(self) -> Availability:
        return Availability(True)

    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        if self.hold_after is not None and self.batches >= self.hold_after:
            threading.Event().wait()
        self.batches += 1
        time.sleep(self.pause_s)
        matrix = self.inner.embed(texts, kind)
        lines = "".join(hashlib.sha256(t.encode()).hexdigest()[:16] + "\n" for t in texts)
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, lines.encode("ascii"))
        finally:
            os.close(fd)
        return matrix


def hash_factory(default_model: str = "hash-64") -> Callable[[str, str | None], HashEmbedder]:
    """A ``Library(make_embedder=...)`` factory: one ``HashEmbedder`` per model name,
    whatever the provider (the library asks for the configured one, and for the embedder
    of an older signature by its provider ``test`` and model)."""
    built: dict[str, HashEmbedder] = {}

    def make(provider: str, model: str | None) -> HashEmbedder:
        name = model or default_model
        if name not in built:
            built[name] = HashEmbedder(name)
        return built[name]

    return make
