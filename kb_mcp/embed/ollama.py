"""The ``ollama`` embedder: an Ollama server's ``/api/embed`` through the official client.

Three things make a remote model safe to lean on from a search path:

- **Bounded waits.** The client waits forever by default; here a connect takes at most
  ``connect_timeout_s`` and each request at most ``read_timeout_s`` between bytes. A
  request carries at most 128 texts and about ``batch_chars`` characters, because Ollama
  answers only when the whole request is done, so a request's size is what the read
  timeout has to cover on a slow CPU.
- **A cooldown after failures** (``ollama_http.Cooldown``, shared with the graph's
  extractor): while it lasts, ``embed`` raises at once and ``availability()`` says why
  and until when, so an unreachable host costs microseconds, not N × timeout. It starts
  at ``cooldown_s`` and doubles up to ``max_cooldown_s``; a success resets it.
- **A stable signature.** The vector size is not known until the server answers: the
  first successful request (or a probe of one short text, when ``signature`` is read
  first) fixes it for the life of the embedder, and a later answer of another size is an
  error, never mixed in.

Every failure of the client (``ollama.ResponseError``, ``ConnectionError``, httpx
transport errors, a malformed answer) becomes ``EmbedderUnavailable`` naming the host and
model, with a hint. The host is an explicit argument: the settings layer resolves
``OLLAMA_HOST``; this module reads no environment.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import numpy as np
import ollama

from kb_mcp.embed.base import (
    Availability,
    EmbedderUnavailable,
    EmbeddingSignature,
    EmbedKind,
    normalized,
)
from kb_mcp.errors import InvalidInput
from kb_mcp.ollama_http import Cooldown, client, display_host

PROVIDER = "ollama"
DEFAULT_MODEL = "qwen3-embedding:0.6b"
# The most texts one request carries (issue 8: "requests of at most 128 texts").
MAX_BATCH_TEXTS = 128
# Characters per request, besides the count: an estimate, not a measurement (no Ollama on
# the build machine). ~8k tokens is a few seconds for a 0.6B model on two CPU cores, well
# inside the read timeout even with a cold model load, where 128 × 4k chars could not be.
DEFAULT_BATCH_CHARS = 32_000
# Text budget per input: the largest chunk (chunk_cap(1800) = 2,700 characters) plus its
# title and heading path fits whole; longer text is cut before it is sent.
DEFAULT_MAX_CHARS = 4_096
CONNECT_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 60.0
COOLDOWN_S = 30.0
MAX_COOLDOWN_S = 300.0
PROBE_TEXT = "kb-mcp dimension probe"
# A server's own words are kept in messages, cut to this length (an HTML error page from
# a proxy must not become a paragraph).
MAX_REASON_CHARS = 200


@dataclass(frozen=True, slots=True)
class PrefixScheme:
    """The text a model expects before a query and before a passage, under a stable name.

    The name is recorded in ``EmbeddingSignature.prefixes``: change a prefix, change the
    name, so vectors made with the old text are not compared with the new.
    """

    name: str
    query: str = ""
    passage: str = ""


NO_PREFIXES = PrefixScheme("none")
# Model families (the name without tag or namespace) → the prefixes their model cards ask
# for. Anything else gets none; a caller who knows better passes ``prefixes``.
PREFIX_SCHEMES: dict[str, PrefixScheme] = {
    # Qwen3-Embedding model card: an instruction for queries ("Instruct: <task>\nQuery:"),
    # documents plain.
    "qwen3-embedding": PrefixScheme(
        "qwen3-question",
        query="Instruct: Given a question, retrieve passages that answer it\nQuery: ",
    ),
    # nomic-embed-text model card: task prefixes on both sides.
    "nomic-embed-text": PrefixScheme(
        "nomic-search", query="search_query: ", passage="search_document: "
    ),
    # mxbai-embed-large model card: a retrieval prompt for queries, documents plain.
    "mxbai-embed-large": PrefixScheme(
        "mxbai-retrieval",
        query="Represent this sentence for searching relevant passages: ",
    ),
    # EmbeddingGemma model card: "task: search result | query: " / "title: none | text: ".
    "embeddinggemma": PrefixScheme(
        "gemma-search", query="task: search result | query: ", passage="title: none | text: "
    ),
}


def prefix_scheme(model: str) -> PrefixScheme:
    """The prefixes for ``model`` (``"qwen3-embedding:0.6b"``, ``"ns/nomic-embed-text"``)."""
    family = model.rsplit("/", 1)[-1].split(":", 1)[0].lower()
    return PREFIX_SCHEMES.get(family, NO_PREFIXES)


class OllamaEmbedder:
    """``Embedder`` over an Ollama server (default model ``qwen3-embedding:0.6b``).

    Reading ``signature`` before any embedding sends one probe request to learn the
    vector size and raises ``EmbedderUnavailable`` when that fails; pass ``dims`` (for
    example the size recorded with existing vectors) to skip the probe and have the first
    answer checked against it. ``availability()`` never touches the network: it reports
    the cooldown, not a fresh check. Safe to share between threads; ``close()`` ends the
    connection pool (or use it as a context manager). ``clock`` (monotonic seconds) times
    the cooldown.
    """

    def __init__(
        self,
        host: str,
        model: str = DEFAULT_MODEL,
        *,
        dims: int | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        batch_size: int = MAX_BATCH_TEXTS,
        batch_chars: int = DEFAULT_BATCH_CHARS,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        read_timeout_s: float = READ_TIMEOUT_S,
        cooldown_s: float = COOLDOWN_S,
        max_cooldown_s: float = MAX_COOLDOWN_S,
        prefixes: PrefixScheme | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_arguments(host, model, dims, max_chars, batch_size, batch_chars)
        self.host = display_host(host)
        self.model = model
        self.prefixes = prefixes or prefix_scheme(model)
        self._max_chars = max_chars
        self._batch_size = batch_size
        self._batch_chars = batch_chars
        self._read_timeout_s = read_timeout_s
        self._dims = dims
        self._dims_lock = threading.Lock()
        self._cooldown = Cooldown(cooldown_s, max_cooldown_s, clock)
        self._client = client(host, connect_timeout_s, read_timeout_s)

    @property
    def signature(self) -> EmbeddingSignature:
        if self._dims is None:
            self._request([PROBE_TEXT])
        assert self._dims is not None  # set by the first successful request
        return EmbeddingSignature(
            provider=PROVIDER,
            model=self.model,
            dims=self._dims,
            max_chars=self._max_chars,
            prefixes=self.prefixes.name,
        )

    def availability(self) -> Availability:
        pause = self._cooldown.active()
        return Availability(ok=True) if pause is None else Availability(False, pause.reason())

    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        if kind not in ("passage", "query"):
            raise InvalidInput(f"embedding kind must be 'passage' or 'query', got {kind!r}")
        if not texts:
            return np.zeros((0, self.signature.dims), dtype=np.float32)
        prefix = self.prefixes.query if kind == "query" else self.prefixes.passage
        prepared = [prefix + text[: self._max_chars] for text in texts]
        rows = [self._request(batch) for batch in self._batches(prepared)]
        return normalized(np.concatenate(rows))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OllamaEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _batches(self, texts: list[str]) -> Iterator[list[str]]:
        """Consecutive runs of ``texts`` within the count and character bounds (order kept)."""
        batch: list[str] = []
        chars = 0
        for text in texts:
            if batch and (len(batch) == self._batch_size or chars + len(text) > self._batch_chars):
                yield batch
                batch, chars = [], 0
            batch.append(text)
            chars += len(text)
        if batch:
            yield batch

    def _request(self, batch: list[str]) -> np.ndarray:
        """One ``/api/embed`` call → ``len(batch)`` × dims float32, or EmbedderUnavailable.

        Every failure starts (or lengthens) the cooldown; a success ends it.
        """
        pause = self._cooldown.active()
        if pause is not None:
            raise EmbedderUnavailable(pause.reason(), hint=pause.error.hint)
        try:
            rows = self._call(batch)
        except EmbedderUnavailable as error:
            self._cooldown.fail(error)
            raise
        self._cooldown.succeed()
        return rows

    def _call(self, batch: list[str]) -> np.ndarray:
        try:
            response = self._client.embed(model=self.model, input=batch, truncate=True)
            if len(response.embeddings) != len(batch):
                raise self._malformed(f"{len(response.embeddings)} vectors for {len(batch)} texts")
            rows = np.asarray(response.embeddings, dtype=np.float32)
        except ollama.ResponseError as error:
            raise self._response_error(error) from error
        except ConnectionError as error:
            raise self._unavailable("cannot connect") from error
        except httpx.TimeoutException as error:
            raise self._timeout(error, len(batch)) from error
        except httpx.HTTPError as error:
            failure = _short(f"{type(error).__name__}: {error}")
            raise self._unavailable(f"request failed ({failure})") from error
        except ValueError as error:  # not JSON, not Ollama's shape, ragged rows
            raise self._malformed(str(error)) from error
        self._check_rows(rows)
        return rows

    def _check_rows(self, rows: np.ndarray) -> None:
        """The answer is finite rows of the one size this embedder has (learned once)."""
        if rows.ndim != 2 or rows.shape[1] == 0:
            raise self._malformed(f"vectors of shape {rows.shape}")
        if not np.isfinite(rows).all():
            raise self._malformed("non-finite values in the vectors")
        with self._dims_lock:
            if self._dims is None:
                self._dims = int(rows.shape[1])
            dims = self._dims
        if rows.shape[1] != dims:
            raise EmbedderUnavailable(
                f"model {self.model} at {self.host} returned {rows.shape[1]} dims, expected "
                f"{dims}: the model changed under the same name; its new vectors are not "
                "mixed with the old ones",
                hint="restart kb-mcp to take the new model under its own signature (it "
                f"re-embeds), or `ollama pull` the model that gave {dims} dims",
            )

    def _unavailable(self, what: str) -> EmbedderUnavailable:
        return EmbedderUnavailable(
            f"ollama at {self.host} (model {self.model}): {what}",
            hint=f"is `ollama serve` running? `ollama pull {self.model}`",
        )

    def _response_error(self, error: ollama.ResponseError) -> EmbedderUnavailable:
        reason = _short(str(error.error))
        if error.status_code == 404 and "page not found" in reason:
            return EmbedderUnavailable(
                f"{self.host} has no /api/embed (HTTP 404: {reason})",
                hint="is it an Ollama server (0.3 or newer), without a path after host:port?",
            )
        if error.status_code == 404:
            return EmbedderUnavailable(
                f"model {self.model} not found at ollama {self.host} ({reason})",
                hint=f"`ollama pull {self.model}`, or choose a model with --embed-model",
            )
        return self._unavailable(f"HTTP {error.status_code}: {reason}")

    def _timeout(self, error: httpx.TimeoutException, count: int) -> EmbedderUnavailable:
        if isinstance(error, httpx.ConnectTimeout):
            return self._unavailable("no connection within the connect timeout")
        return EmbedderUnavailable(
            f"ollama at {self.host} (model {self.model}) did not answer a request of "
            f"{count} texts within {self._read_timeout_s:g} s",
            hint="the model may still be loading or the machine is busy; it is retried "
            "after the cooldown (`ollama ps` shows what is loaded)",
        )

    def _malformed(self, what: str) -> EmbedderUnavailable:
        return EmbedderUnavailable(
            f"ollama at {self.host} (model {self.model}) gave an answer that is not "
            f"embeddings: {_short(what)}",
            hint=f"is {self.host} an Ollama server, and {self.model} an embedding model?",
        )


def _check_arguments(
    host: str, model: str, dims: int | None, max_chars: int, batch_size: int, batch_chars: int
) -> None:
    # An empty host would make the client fall back to OLLAMA_HOST behind our back.
    if not host.strip():
        raise InvalidInput("ollama host is empty", hint="e.g. http://localhost:11434")
    if not model.strip():
        raise InvalidInput("ollama model name is empty", hint=f"e.g. {DEFAULT_MODEL}")
    if not 1 <= batch_size <= MAX_BATCH_TEXTS:
        raise InvalidInput(f"batch_size must be 1..{MAX_BATCH_TEXTS}, got {batch_size}")
    if dims is not None and dims < 1:
        raise InvalidInput(f"dims must be ≥ 1, got {dims}")
    if max_chars < 1 or batch_chars < 1:
        raise InvalidInput(f"max_chars and batch_chars must be ≥ 1, got {max_chars}, {batch_chars}")


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_REASON_CHARS else flat[: MAX_REASON_CHARS - 1] + "…"
