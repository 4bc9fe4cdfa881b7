"""``python -m kb_mcp.bench.embed_rate KB_DB``: the local model's passages per CPU-second
on a library's own chunks, against what the CPU allows.

CPU-seconds, not wall: the machines this runs on are shared, and a loaded core makes
wall time say more about the neighbours than about the model. The passages are the
library's chunks as the embedding queue reads them (``vectors.embedding_text``: title and
headings, then the chunk), in the queue's batches, through ``LocalEmbedder.embed``.

The limit: the model's multiply-adds per passage at the measured word-piece counts (six
layers of 384 wide attention and a 1,536 wide feed-forward; the matrix products are all
but a few per cent of the work), divided by the rate one core multiplies float32
matrices at (an onnxruntime ``MatMul`` of the feed-forward's shape, timed here).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import apsw

LAYERS = 6
HIDDEN = 384
FFN = 1_536


def flops_per_passage(tokens: float) -> float:
    """Floating-point operations of one passage of ``tokens`` word-pieces: per layer the
    Q, K, V, output and two feed-forward products (2 × tokens × (4·h² + 2·h·ffn)) and the
    two attention products (2 × 2 × tokens² × h)."""
    dense = 2 * tokens * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN)
    attention = 4 * tokens * tokens * HIDDEN
    return LAYERS * (dense + attention)


def library_texts(kb_db: Path, limit: int, max_chars: int) -> list[str]:
    """The first ``limit`` chunks' embedding texts, in chunk order (the queue's)."""
    from kb_mcp.index.vectors import first_embedding_texts

    conn = apsw.Connection(str(kb_db), flags=apsw.SQLITE_OPEN_READONLY)
    return first_embedding_texts(conn, limit, max_chars)


def matmul_gflops(rows: int = 1_024, seconds: float = 2.0) -> float:
    """One core's float32 GEMM rate: onnxruntime ``MatMul`` (rows × 384) · (384 × 1,536)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from kb_mcp.embed.local import _import_runtime

    ort, _ = _import_runtime()
    weight = numpy_helper.from_array(np.random.rand(HIDDEN, FFN).astype(np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "W"], ["Y"])],
        "gemm",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [rows, HIDDEN])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [rows, FFN])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options)
    feed = {"A": np.random.rand(rows, HIDDEN).astype(np.float32)}
    session.run(None, feed)
    runs, started = 0, time.process_time()
    while time.process_time() - started < seconds:
        session.run(None, feed)
        runs += 1
    return 2 * rows * HIDDEN * FFN * runs / (time.process_time() - started) / 1e9


def main(argv: list[str] | None = None) -> int:
    from kb_mcp.embed.local import MAX_CHARS, LocalEmbedder
    from kb_mcp.embed.queue import DEFAULT_BATCH

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kb_db", type=Path, help="a library's kb.db (read only)")
    parser.add_argument("--passages", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=None, help="texts per model run")
    args = parser.parse_args(argv)

    texts = library_texts(args.kb_db, args.passages, MAX_CHARS)
    embedder = LocalEmbedder(batch_size=args.batch_size) if args.batch_size else LocalEmbedder()
    embedder.embed(texts[:4])  # the model loads outside the timing
    tokenizer = embedder._load().tokenizer
    tokens = [len(e.ids) for e in tokenizer.encode_batch([t[:MAX_CHARS] for t in texts])]
    started = time.process_time()
    for start in range(0, len(texts), DEFAULT_BATCH):
        embedder.embed(texts[start : start + DEFAULT_BATCH])
    cpu = time.process_time() - started
    rate = len(texts) / cpu
    mean_tokens = sum(tokens) / len(tokens)
    flops = sum(flops_per_passage(n) for n in tokens) / len(tokens)
    gemm = matmul_gflops()
    ceiling = gemm * 1e9 / flops
    print(f"passages {len(texts)}, word-pieces per passage {mean_tokens:.1f}")
    print(f"passages per CPU-second {rate:.1f} ({cpu / len(texts) * 1000:.1f} ms each)")
    print(f"GFLOP per passage {flops / 1e9:.2f}; model runs at {rate * flops / 1e9:.1f} GFLOP/s")
    print(f"float32 MatMul on one core {gemm:.1f} GFLOP/s: ceiling {ceiling:.1f} passages/CPU-s")
    print(f"at {rate / ceiling:.0%} of the float32 ceiling")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
