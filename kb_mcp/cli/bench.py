"""``kb-mcp bench retrieval`` and ``kb-mcp bench perf``: measurements through the Library."""

from __future__ import annotations

import argparse
from pathlib import Path

from kb_mcp.cli.progress import ProgressBar

GOLDEN = "golden"
GOLDEN2 = "golden2"


def dataset_path(name: str) -> Path:
    """A dataset folder; ``golden`` and ``golden2`` are the hand-written sets shipped
    with kb-mcp (a folder of that name is reached as ``./golden``)."""
    from kb_mcp.bench.beir import GOLDEN2_SET, GOLDEN_SET

    shipped = {GOLDEN: GOLDEN_SET, GOLDEN2: GOLDEN2_SET}
    return shipped.get(name) or Path(name).expanduser()


def cmd_bench_retrieval(args: argparse.Namespace) -> int:
    """Score a BEIR-layout collection (or `golden`, `golden2`) through the real search engine."""
    from kb_mcp.bench.retrieval import report_table, run_retrieval_bench, write_json
    from kb_mcp.settings import load

    overrides = {"embedder": args.embedder, "embed_model": args.embed_model}
    bar = ProgressBar("ingest")
    try:
        report = run_retrieval_bench(
            dataset_path(args.dataset),
            args.split,
            mode=args.mode,
            home=Path(args.home).expanduser() if args.home else None,
            progress=bar,
            settings=load(home=args.home, overrides=overrides),
            top_k=args.top_k,
        )
    finally:
        bar.close()
    print(report_table(report))
    if args.json:
        write_json(report, Path(args.json))
    return 0


def cmd_bench_questions(args: argparse.Namespace) -> int:
    """Score agent questions over a real folder corpus (file-level hit@1, hit@3, MRR)."""
    from kb_mcp.bench.questions import report_table, run_questions_bench, write_json
    from kb_mcp.settings import load

    overrides = {"embedder": args.embedder, "embed_model": args.embed_model}
    bar = ProgressBar("ingest")
    try:
        report = run_questions_bench(
            Path(args.set).expanduser(),
            Path(args.corpus),
            split=args.split,
            mode=args.mode,
            home=Path(args.home).expanduser() if args.home else None,
            progress=bar,
            settings=load(home=args.home, overrides=overrides),
        )
    finally:
        bar.close()
    print(report_table(report))
    if args.json:
        write_json(report, Path(args.json))
    return 0


def cmd_bench_perf(args: argparse.Namespace) -> int:
    """Ingest throughput, size on disk, peak memory, re-sync and search latency by corpus size."""
    from kb_mcp.bench.perf import perf_table, run_perf_bench

    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rows = run_perf_bench(sizes, keep=args.keep)
    print(perf_table(rows))
    return 0


def add_bench_parser(sub: argparse._SubParsersAction, common, embedder_flags) -> None:
    bench = sub.add_parser(
        "bench",
        help="measure retrieval quality or speed",
        description="Measure retrieval quality or speed.",
    )
    bench_sub = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    p = bench_sub.add_parser(
        "retrieval", help=cmd_bench_retrieval.__doc__, description=cmd_bench_retrieval.__doc__
    )
    common(p)
    p.add_argument(
        "--dataset",
        required=True,
        help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/), 'golden' or 'golden2'",
    )
    p.add_argument("--split", default="test", help="qrels split (golden2: dev or test)")
    p.add_argument("--mode", default="auto", choices=["auto", "keyword", "vector", "hybrid"])
    p.add_argument("--top-k", type=int, default=10, help="k of hit@k (default 10)")
    p.add_argument("--json", metavar="OUT", help="also write the report as JSON to OUT")
    embedder_flags(p)
    p.set_defaults(func=cmd_bench_retrieval)
    _add_questions_parser(bench_sub, common, embedder_flags)
    p = bench_sub.add_parser(
        "perf", help=cmd_bench_perf.__doc__, description=cmd_bench_perf.__doc__
    )
    p.add_argument(
        "--sizes",
        default="1000,10000,50000",
        help="comma-separated corpus sizes in files (default 1000,10000,50000)",
    )
    p.add_argument("--keep", action="store_true", help="keep the generated corpora")
    p.set_defaults(func=cmd_bench_perf)


def _add_questions_parser(bench_sub: argparse._SubParsersAction, common, embedder_flags) -> None:
    from kb_mcp.bench.questions import REAL_CORPUS_SET, SPLITS

    p = bench_sub.add_parser(
        "questions", help=cmd_bench_questions.__doc__, description=cmd_bench_questions.__doc__
    )
    common(p)
    p.add_argument(
        "--set",
        default=str(REAL_CORPUS_SET),
        help="question set, JSON lines (default: the shipped real-corpus set)",
    )
    p.add_argument(
        "--corpus",
        required=True,
        help="folder whose top-level folders are the sources the gold paths start with",
    )
    embedder_flags(p)
    p.add_argument("--split", default="all", choices=list(SPLITS))
    p.add_argument("--mode", default="auto", choices=["auto", "keyword", "vector", "hybrid"])
    p.add_argument("--json", metavar="OUT", help="also write the report as JSON to OUT")
    p.set_defaults(func=cmd_bench_questions)
