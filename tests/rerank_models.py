"""Tiny cross-encoders for the reranker tests, built here with ``onnx`` and ``tokenizers``.

The model's answer is known by construction: each word-piece has a weight (``WEIGHTS``:
``kiwi`` 1, the padding id 5, every other piece 0) and a pair's logit is the sum of the
weights of the pieces that are in the PASSAGE segment (``token_type_ids`` 1) and not
padding (``attention_mask`` 1). So a passage's score is the number of times it says
``kiwi``, and a loader that gets the pairing, the mask or the batching wrong gets
another number: a pad counted adds 5, a question scored as a passage adds its kiwis,
segment ids left at 0 score everything 0.

The tokenizer is a word-level one over ``VOCAB`` (lower-cased, split on whitespace and
punctuation) with BERT's pair template: ``[CLS] question [SEP] passage [SEP]``, the
passage and its ``[SEP]`` in segment 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "kiwi",
    "plum",
    "fig",
    "tree",
    "fruit",
    "which",
    "grows",
    "notes",
]
PAD_WEIGHT = 5.0
WEIGHTS = {"[PAD]": PAD_WEIGHT, "kiwi": 1.0}


def tokenizer_json(path: Path) -> None:
    ids = {word: i for i, word in enumerate(VOCAB)}
    tokenizer = Tokenizer(models.WordLevel(vocab=ids, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    tokenizer.save(str(path))


def _ids_input(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])


def cross_encoder(
    folder: Path,
    *,
    classes: int = 1,
    segments: bool = True,
    extra_input: str | None = None,
    tokenizer: bool = True,
) -> Path:
    """Write ``model.onnx`` (and ``tokenizer.json``) into ``folder``; returns ``folder``.

    ``classes``: 1 answers ``[batch, 1]``; 2 answers ``[batch, 2]`` whose positive class
    is the score (the negative is its opposite); 3 is not a cross-encoder's shape.
    ``segments``: without it the model takes no ``token_type_ids`` and counts the
    question's pieces too. ``extra_input`` adds an input no cross-encoder has.
    """
    folder.mkdir(parents=True, exist_ok=True)
    weights = np.zeros(len(VOCAB), dtype=np.float32)
    for word, weight in WEIGHTS.items():
        weights[VOCAB.index(word)] = weight
    inputs = [_ids_input("input_ids"), _ids_input("attention_mask")]
    nodes = [
        helper.make_node("Gather", ["weights", "input_ids"], ["piece"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["piece", "mask"], ["kept"]),
    ]
    counted = "kept"
    if segments:
        inputs.append(_ids_input("token_type_ids"))
        nodes += [
            helper.make_node("Cast", ["token_type_ids"], ["segment"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["kept", "segment"], ["in_passage"]),
        ]
        counted = "in_passage"
    if extra_input is not None:
        inputs.append(_ids_input(extra_input))
    nodes.append(helper.make_node("ReduceSum", [counted, "axes"], ["logit"], keepdims=1))
    if classes == 1:
        nodes.append(helper.make_node("Identity", ["logit"], ["logits"]))
    else:
        nodes.append(helper.make_node("Neg", ["logit"], ["negative"]))
        nodes.append(
            helper.make_node("Concat", ["negative", *["logit"] * (classes - 1)], ["logits"], axis=1)
        )
    graph = helper.make_graph(
        nodes,
        "tiny-cross-encoder",
        inputs,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        initializer=[
            numpy_helper.from_array(weights, "weights"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what every onnxruntime of the last years reads
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    if tokenizer:
        tokenizer_json(folder / "tokenizer.json")
    return folder
