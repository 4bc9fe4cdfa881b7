"""The ``onnx`` reranker: a cross-encoder in ONNX, from a folder the user names.

The folder (setting ``reranker_model``) holds ``model.onnx`` and its ``tokenizer.json``,
as an export of a sentence-transformers ``CrossEncoder`` (e.g. an ms-marco MiniLM) has
them. Nothing is downloaded: kb-mcp ships no reranker weights, and none on PyPI ships
its own (docs/retrieval.md, "Reranker").

The model reads the question and a passage as one pair, the tokenizer's own pair
encoding (``[CLS] question [SEP] passage [SEP]`` with segment ids 0 / 1 for a BERT-style
one), and answers one logit per pair (``[batch, 1]``) or two classes (``[batch, 2]``:
the positive class's log-odds is the score). It is fed ``input_ids``,
``attention_mask`` and, when the model declares it, ``token_type_ids``; a model that
asks for anything else, or answers another shape, is refused (``InvalidInput``).

Run as the local embedder runs (``embed/local.py``): loaded lazily under a lock, a
failed load remembered; pairs cut to ``max_tokens`` (the passage first, longest first),
sorted by length and padded per batch, so a short passage never pays for a long one's
padding and the mask keeps padding out of the score; few threads that do not spin.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kb_mcp.embed.base import Availability
from kb_mcp.embed.local import padded, session_options, sorted_batches
from kb_mcp.errors import InvalidInput
from kb_mcp.rerank.base import Passage, RerankerUnavailable

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
# Word-pieces per (question, passage) pair, special tokens included. ms-marco
# cross-encoders were trained at 512; a chunk is at most ~2,700 characters, and the cost
# grows with the square of the length: 256 keeps 20 pairs near a second of one core.
MAX_TOKENS = 256
# Characters of a passage given to the tokenizer: bounds its work on a huge passage; at
# ~4 characters a piece the token cut, not this one, decides what the model reads.
MAX_CHARS = 2_048
DEFAULT_BATCH_SIZE = 8  # as the local embedder (embed/local.py measured 4-8 best)
REQUIRED_INPUTS = frozenset({"input_ids", "attention_mask"})
OPTIONAL_INPUTS = frozenset({"token_type_ids"})
SHAPE_HINT = (
    "a cross-encoder takes input_ids, attention_mask (and optionally token_type_ids) and "
    "answers logits of shape [batch, 1] or [batch, 2]; export one with its tokenizer.json"
)


@dataclass(frozen=True, slots=True)
class _Runtime:
    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer
    input_names: frozenset[str]
    output: str


def model_folder(folder: str) -> Path:
    """The folder of ``reranker_model``, or ``InvalidInput`` saying which file is missing."""
    if not folder.strip():
        raise InvalidInput(
            "reranker onnx needs a model folder and reranker_model is empty",
            hint=f"set reranker_model to a folder holding {MODEL_FILE} and {TOKENIZER_FILE}",
        )
    path = Path(folder).expanduser()
    missing = [name for name in (MODEL_FILE, TOKENIZER_FILE) if not (path / name).is_file()]
    if missing:
        raise InvalidInput(
            f"the reranker folder {path} has no {' and no '.join(missing)}",
            hint=f"reranker_model names a folder holding a cross-encoder's {MODEL_FILE} "
            f"and its {TOKENIZER_FILE}",
        )
    return path.resolve()


class OnnxReranker:
    """A cross-encoder on onnxruntime in this process; see the module docstring.

    ``threads``: onnxruntime's intra-op threads (1 leaves a core of two to the rest of the
    server); ``batch_size``: pairs per model run; ``max_tokens``: word-pieces per pair.
    Safe to share between threads: only loading is serialised.
    """

    def __init__(
        self,
        folder: str,
        *,
        threads: int = 1,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_tokens: int = MAX_TOKENS,
    ) -> None:
        if threads < 1 or batch_size < 1 or max_tokens < 4:
            raise InvalidInput(
                f"threads, batch_size and max_tokens must be at least 1, 1 and 4 "
                f"(got {threads}, {batch_size}, {max_tokens})"
            )
        self.folder = model_folder(folder)
        self._threads, self._batch_size, self._max_tokens = threads, batch_size, max_tokens
        self._lock = threading.Lock()
        self._runtime: _Runtime | None = None
        self._failure: InvalidInput | RerankerUnavailable | None = None

    @property
    def name(self) -> str:
        return f"onnx {self.folder.name}"

    def availability(self) -> Availability:
        """The files are there (checked again: the folder may have changed) and no load
        failed; the model itself is read at the first search."""
        if self._failure is not None:
            return Availability(False, self._failure.message)
        if self._runtime is not None:
            return Availability(True)
        try:
            model_folder(str(self.folder))
        except InvalidInput as error:
            return Availability(False, error.message)
        return Availability(True)

    def load(self) -> None:
        """Read the model now (once). The Library calls it before a search's deadline
        starts, so the deadline measures the scoring and not the model's start-up."""
        self._load()

    def scores(self, question: str, passages: Sequence[Passage]) -> list[float]:
        if not passages:
            return []
        runtime = self._load()
        pairs = [(question, f"{p.title}\n{p.text[:MAX_CHARS]}") for p in passages]
        encodings = runtime.tokenizer.encode_batch(pairs)
        ids = [encoding.ids for encoding in encodings]
        segments = [encoding.type_ids for encoding in encodings]
        out = np.empty(len(passages), dtype=np.float32)
        for batch in sorted_batches([len(row) for row in ids], self._batch_size):
            out[batch] = self._run(runtime, [ids[i] for i in batch], [segments[i] for i in batch])
        return [float(score) for score in out]

    def _run(
        self, runtime: _Runtime, rows: list[list[int]], segments: list[list[int]]
    ) -> np.ndarray:
        """One model run over pairs of word-piece ids: padded, scored."""
        input_ids, mask = padded(rows)
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in runtime.input_names:
            feeds["token_type_ids"] = padded(segments)[0]
        try:
            logits = np.asarray(runtime.session.run([runtime.output], feeds)[0])
        except Exception as error:  # onnxruntime raises its own untyped errors
            raise RerankerUnavailable(
                f"the reranker model {self.folder} failed on {len(rows)} passages: {error}",
                hint=SHAPE_HINT,
            ) from error
        if logits.ndim != 2 or logits.shape != (len(rows), logits.shape[1]):
            raise self._refused(f"answered logits of shape {list(logits.shape)}")
        if logits.shape[1] == 1:
            return logits[:, 0]
        if logits.shape[1] == 2:  # the positive class's log-odds orders as its softmax
            return logits[:, 1] - logits[:, 0]
        raise self._refused(f"answered {logits.shape[1]} classes")

    def _refused(self, what: str) -> InvalidInput:
        error = InvalidInput(
            f"{self.folder / MODEL_FILE} is not a cross-encoder: it {what}", hint=SHAPE_HINT
        )
        self._failure = error
        return error

    def _load(self) -> _Runtime:
        """The loaded runtime, loading it once; a failed load is remembered, not retried."""
        runtime, failure = self._runtime, self._failure
        if failure is not None:
            raise failure
        if runtime is not None:
            return runtime
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._runtime is None:
                try:
                    self._runtime = self._open()
                except (InvalidInput, RerankerUnavailable) as error:
                    self._failure = error
                    raise
            return self._runtime

    def _open(self) -> _Runtime:
        # As embed/local._import_runtime: no telemetry id written at import (a user's wins).
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as error:
            raise RerankerUnavailable(
                f"the onnx reranker cannot run: {error}",
                hint="onnxruntime and tokenizers are dependencies of kb-mcp: reinstall it",
            ) from error
        try:
            tokenizer = Tokenizer.from_file(str(self.folder / TOKENIZER_FILE))
            tokenizer.no_padding()  # padded per batch, after the length sort
            tokenizer.enable_truncation(max_length=self._max_tokens, strategy="longest_first")
            ort.disable_telemetry_events()
            session = ort.InferenceSession(
                str(self.folder / MODEL_FILE),
                session_options(ort, self._threads),
                providers=["CPUExecutionProvider"],
            )
        except Exception as error:  # tokenizers and onnxruntime raise untyped errors
            raise InvalidInput(
                f"cannot load the reranker from {self.folder}: {error}", hint=SHAPE_HINT
            ) from error
        return self._checked(session, tokenizer)

    def _checked(self, session: Any, tokenizer: Any) -> _Runtime:
        """The runtime, when the model's inputs and first output are a cross-encoder's."""
        names = frozenset(node.name for node in session.get_inputs())
        if not REQUIRED_INPUTS <= names <= REQUIRED_INPUTS | OPTIONAL_INPUTS:
            raise InvalidInput(
                f"{self.folder / MODEL_FILE} is not a cross-encoder: it takes "
                f"{', '.join(sorted(names))}",
                hint=SHAPE_HINT,
            )
        output = session.get_outputs()[0]
        shape = list(output.shape)
        width = shape[-1] if shape else None
        if len(shape) != 2 or (isinstance(width, int) and width not in (1, 2)):
            raise InvalidInput(
                f"{self.folder / MODEL_FILE} is not a cross-encoder: its output "
                f"{output.name} has shape {shape}",
                hint=SHAPE_HINT,
            )
        return _Runtime(session, tokenizer, names, output.name)
