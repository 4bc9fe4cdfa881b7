"""``kb-mcp bench retrieval`` and ``kb-mcp bench perf``: measurements through the Library."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kb_mcp.cli.legs import LEGS_HELP, parse_legs
from kb_mcp.cli.progress import Phase, PhaseProgress

GOLDEN = "golden"
GOLDEN2 = "golden2"
# A bench's library is built by one progress callback: the files read, then the passages
# embedded (kb_mcp/bench/retrieval.py, questions.py); "items" covers both.
BENCH_INGEST = Phase("ingesting", "items")


def dataset_path(name: str) -> Path:
    """A dataset folder; ``golden``, ``golden2`` and ``golden3`` are the hand-written sets
    shipped with kb-mcp (a folder of that name is reached as ``./golden``)."""
    from kb_mcp.bench.beir import GOLDEN2_SET, GOLDEN3_SET, GOLDEN_SET

    shipped = {GOLDEN: GOLDEN_SET, GOLDEN2: GOLDEN2_SET, "golden3": GOLDEN3_SET}
    return shipped.get(name) or Path(name).expanduser()


def cmd_bench_retrieval(args: argparse.Namespace) -> int:
    """Score a BEIR-layout collection (or `golden`, `golden2`) through the real search engine."""
    from kb_mcp.bench.retrieval import report_table, run_retrieval_bench, write_json, write_runs
    from kb_mcp.settings import load

    overrides = {
        "embedder": args.embedder,
        "embed_model": args.embed_model,
        "reranker": args.reranker,
        "reranker_model": args.reranker_model,
        "store": args.store,
    }
    if args.no_relations:
        overrides["relations"] = False
    with PhaseProgress(BENCH_INGEST) as bar:
        report = run_retrieval_bench(
            dataset_path(args.dataset),
            args.split,
            mode=args.mode,
            home=Path(args.home).expanduser() if args.home else None,
            progress=bar,
            settings=load(home=args.home, overrides=overrides),
            top_k=args.top_k,
            legs=parse_legs(args.legs),
        )
    print(report_table(report))
    if args.json:
        write_json(report, Path(args.json))
    if args.runs:
        write_runs(report, Path(args.runs), args.top_k)
    return 0


def cmd_bench_questions(args: argparse.Namespace) -> int:
    """Score agent questions over a real folder corpus (file-level hit@1, hit@3, MRR)."""
    from kb_mcp.bench.questions import report_table, run_questions_bench, write_json
    from kb_mcp.settings import load

    overrides = {"embedder": args.embedder, "embed_model": args.embed_model, "store": args.store}
    with PhaseProgress(BENCH_INGEST) as bar:
        report = run_questions_bench(
            Path(args.set).expanduser(),
            Path(args.corpus),
            split=args.split,
            mode=args.mode,
            home=Path(args.home).expanduser() if args.home else None,
            progress=bar,
            settings=load(home=args.home, overrides=overrides),
        )
    print(report_table(report))
    if args.json:
        write_json(report, Path(args.json))
    return 0


def cmd_bench_perf(args: argparse.Namespace) -> int:
    """Ingest, size on disk, peak memory, re-sync and keyword search latency by corpus size,
    beside a naive FTS5 table over the same real text."""
    from kb_mcp.bench.perf import DATA_DIR, DEFAULT_SIZES, perf_table, run_perf_bench

    if args.store:  # `kb-mcp --store URL bench perf`: where its children read the store
        os.environ["KB_MCP_STORE"] = args.store
    # `--sizes ""` (no size) skips the keyword figures: "" must not mean the default.
    given = args.sizes is not None
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()] if given else DEFAULT_SIZES
    data = Path(args.data).expanduser() if args.data else DATA_DIR
    workdir = Path(args.workdir).expanduser() if args.workdir else None
    if sizes:
        rows = run_perf_bench(
            sizes,
            keep=args.keep,
            data=data,
            workdir=workdir,
            only=args.only,
            hybrid=args.hybrid,
            stdio=args.stdio,
        )
        print(perf_table(rows))
    if args.embedder and args.embedder != "none":
        from kb_mcp.bench.embed_perf import embed_perf_table, real_embedder, run_embed_perf

        report = run_embed_perf(
            Path(args.eval_data).expanduser(),
            real_embedder(args.embedder, args.embed_model),
            bulk_chunks=args.vector_chunks,
            add_files=args.add_files,
            add_embedder=(args.embedder, args.embed_model),
            workdir=workdir / "vectors" if workdir is not None else None,
            reuse=Path(args.vectors_from).expanduser() if args.vectors_from else None,
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
        print(embed_perf_table(report))
    return 0


def cmd_bench_startup(args: argparse.Namespace) -> int:
    """Start-up (initialize, first search), no-change re-sync and save-to-search times."""
    from kb_mcp.bench.startup import DEFAULT_EVAL_DATA, run_startup_bench, startup_table

    home = Path(args.home).expanduser() if args.home else Path("kb-mcp-bench-startup/home")
    figures = run_startup_bench(
        home.resolve(),
        Path(args.eval_data or DEFAULT_EVAL_DATA),
        args.files,
        args.runs,
        freshness=not args.no_freshness,
    )
    print(startup_table(figures))
    return 0


def cmd_bench_ingest(args: argparse.Namespace) -> int:
    """A folder synced into a fresh library beside a naive FTS5 table over the same files:
    CPU of the keyword phase (writer and readers) and of the linking phase after it, wall
    time to keyword-searchable, and both ratios to the naive table (issue 22)."""
    from kb_mcp.bench.ingest_cpu import ingest_report
    from kb_mcp.errors import NotFound

    folder = Path(args.folder).expanduser()
    if not folder.is_dir():
        raise NotFound(f"no folder at {folder}", hint="name a folder of files to ingest")
    print(ingest_report(folder, Path(args.profile) if args.profile else None))
    return 0


def cmd_bench_web(args: argparse.Namespace) -> int:
    """Server time of each web page (kb-mcp web) on a large library; exit 1 when the
    library page's median is over 100 ms."""
    from kb_mcp.bench.web import run_bench

    return run_bench(args.chunks, args.workdir, keep=args.keep, json_out=args.json)


def cmd_bench_redaction(args: argparse.Namespace) -> int:
    """What the redaction rules take out of real public text, rule by rule, and every line
    the generic rule changed there (its false positives, to judge by hand)."""
    from kb_mcp.bench.redaction import main

    return main(args.paths, args.mb, args.seed, args.samples, args.json)


def _add_redaction_parser(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser(
        "redaction", help=cmd_bench_redaction.__doc__, description=cmd_bench_redaction.__doc__
    )
    p.add_argument(
        "paths",
        nargs="*",
        help="folders of .py/.rst/.md/.txt files (default: the installed Python packages "
        "and /usr/share/doc)",
    )
    p.add_argument("--mb", type=float, default=20.0, help="megabytes to read (default 20)")
    p.add_argument("--seed", type=int, default=1, help="file order (default 1)")
    p.add_argument("--samples", type=int, default=50, help="generic-rule lines shown (default 50)")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    p.set_defaults(func=cmd_bench_redaction)


def cmd_bench_pdf_readers(args: argparse.Namespace) -> int:
    """PDF readers compared on a folder of PDFs: words shared with the other readers, words
    dropped, CPU a page and peak memory (the evidence for the default reader)."""
    from kb_mcp.bench.pdf_readers import main

    main([str(args.folder), "--pages", str(args.pages), "--readers", args.readers])
    return 0


def _add_pdf_readers_parser(bench_sub: argparse._SubParsersAction) -> None:
    from kb_mcp.bench.pdf_readers import READERS

    p = bench_sub.add_parser(
        "pdf-readers", help=cmd_bench_pdf_readers.__doc__, description=cmd_bench_pdf_readers.__doc__
    )
    p.add_argument("folder", help="a folder of PDF files")
    p.add_argument("--pages", type=int, default=40, help="first N pages of each file (default 40)")
    p.add_argument(
        "--readers",
        default=",".join(READERS),
        help="comma-separated readers, those installed are compared (default: all five)",
    )
    p.set_defaults(func=cmd_bench_pdf_readers)


def cmd_bench_train_ranker(args: argparse.Namespace) -> int:
    """Fit the ranking and abstention model on the public training splits and the
    hand-written development sets, and write its weights (kb_mcp/search/ranker.json)."""
    import json

    from kb_mcp.bench.train_ranker import TRAINING_SETS, WEIGHTS_FILE, train
    from kb_mcp.settings import load

    homes = Path(args.homes).expanduser()
    overrides = {"embedder": args.embedder, "embed_model": args.embed_model}
    output = Path(args.output) if args.output else WEIGHTS_FILE
    with PhaseProgress(BENCH_INGEST) as bar:
        cache = Path(args.examples) if args.examples else None
        sets = TRAINING_SETS
        if args.sets:
            wanted = set(args.sets.split(","))
            sets = tuple(s for s in TRAINING_SETS if s[0] in wanted)
        summary = train(
            homes,
            load(overrides=overrides),
            sets,
            output=output,
            progress=bar,
            cache=cache,
            eval_data=Path(args.eval_data).expanduser(),
            held_out=args.leave_one_out,
        )
    print(json.dumps(summary, indent=1))
    if not args.leave_one_out:
        print(f"weights written to {output}")
    return 0


def _add_train_ranker_parser(bench_sub: argparse._SubParsersAction, embedder_flags) -> None:
    p = bench_sub.add_parser(
        "train-ranker",
        help=cmd_bench_train_ranker.__doc__,
        description=cmd_bench_train_ranker.__doc__,
    )
    p.add_argument(
        "--homes",
        required=True,
        help="folder of one library per training set (built on first use, then reused)",
    )
    p.add_argument("--output", help="where to write the weights (default: the shipped file)")
    p.add_argument("--sets", help="comma-separated training sets (default: all of them)")
    p.add_argument(
        "--leave-one-out",
        action="store_true",
        help="write nothing; score each set with a model fitted on the others",
    )
    p.add_argument(
        "--eval-data",
        default="../shared/eval-data",
        help="folder holding the public sets in BEIR layout (default ../shared/eval-data)",
    )
    p.add_argument(
        "--examples",
        help="a folder keeping each set's collected feature rows: written when a set is "
        "first run, read instead of running its questions again (to try fits quickly)",
    )
    embedder_flags(p)
    p.set_defaults(func=cmd_bench_train_ranker)


def _add_web_parser(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("web", help=cmd_bench_web.__doc__, description=cmd_bench_web.__doc__)
    p.add_argument("--chunks", type=int, default=100_000, help="library size (default 100000)")
    p.add_argument(
        "--workdir",
        help="where to build the library (default: a temp folder); one kept there by an "
        "earlier --keep is reused",
    )
    p.add_argument("--keep", action="store_true", help="keep the built library")
    p.add_argument("--json", metavar="OUT", help="also write each URL's figures as JSON")
    p.set_defaults(func=cmd_bench_web)


def cmd_bench_fetch(args: argparse.Namespace) -> int:
    """A folder of HTML served on loopback, added as a web source and synced again with
    nothing changed: both syncs' time, requests and bytes, and the boilerplate share of
    what was stored (issue 25)."""
    from kb_mcp.bench.web_sync import run_args

    return run_args(args)


def _add_fetch_parser(bench_sub: argparse._SubParsersAction) -> None:
    from kb_mcp.bench.web_sync import add_arguments

    p = bench_sub.add_parser(
        "fetch", help=cmd_bench_fetch.__doc__, description=cmd_bench_fetch.__doc__
    )
    add_arguments(p)
    p.set_defaults(func=cmd_bench_fetch)


def _add_startup_parser(bench_sub: argparse._SubParsersAction, common) -> None:
    p = bench_sub.add_parser(
        "startup", help=cmd_bench_startup.__doc__, description=cmd_bench_startup.__doc__
    )
    common(p, store=False)  # it measures a SQLite library it builds
    p.add_argument("--files", type=int, default=10_000, help="library size (default 10000)")
    p.add_argument("--runs", type=int, default=5, help="runs per figure (default 5)")
    p.add_argument("--eval-data", help="folder holding scifact/ and cosqa/ (BEIR layout)")
    p.add_argument("--no-freshness", action="store_true", help="skip the watcher figures")
    p.set_defaults(func=cmd_bench_startup)


def _add_ingest_parser(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser(
        "ingest", help=cmd_bench_ingest.__doc__, description=cmd_bench_ingest.__doc__
    )
    p.add_argument("folder", help="the folder to ingest (it is only read)")
    p.add_argument("--profile", metavar="DIR", help="also write cProfile dumps of both sides")
    p.set_defaults(func=cmd_bench_ingest)


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
        help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/), 'golden', 'golden2' or 'golden3'",
    )
    p.add_argument("--split", default="test", help="qrels split (golden2: dev or test)")
    p.add_argument("--mode", default="auto", choices=["auto", "keyword", "vector", "hybrid"])
    p.add_argument("--legs", metavar="LEGS", help=LEGS_HELP)
    p.add_argument("--top-k", type=int, default=10, help="k of hit@k (default 10)")
    p.add_argument("--json", metavar="OUT", help="also write the report as JSON to OUT")
    p.add_argument(
        "--runs",
        metavar="OUT",
        help="also write each query's top-k documents and scores to OUT (JSON lines), to "
        "compare two libraries' answers (python -m kb_mcp.bench.store_compare)",
    )
    p.add_argument(
        "--no-relations",
        action="store_true",
        help="rank without document relations (to measure what they bring)",
    )
    embedder_flags(p, rerank_flag=True)
    p.set_defaults(func=cmd_bench_retrieval)
    _add_questions_parser(bench_sub, common, embedder_flags)
    _add_ingest_parser(bench_sub)
    p = bench_sub.add_parser(
        "perf", help=cmd_bench_perf.__doc__, description=cmd_bench_perf.__doc__
    )
    p.add_argument(
        "--sizes",
        help="comma-separated corpus sizes in chunks (default 10000,100000; "
        "300000 is the scale run, about 15 minutes on 2 cores)",
    )
    p.add_argument(
        "--data",
        help="folder of the public sets the corpus and queries come from (scifact/, "
        "nfcorpus-testsplit-preproc/, cmrc2018-ctx/ in BEIR layout; default: "
        "../shared/eval-data beside the repository)",
    )
    p.add_argument("--keep", action="store_true", help="keep the generated corpora")
    p.add_argument(
        "--workdir",
        metavar="DIR",
        help="keep what the bench builds in DIR and reuse it on the next run: each size's "
        "corpus in DIR/<chunks> (for --only), the vector figures' libraries in DIR/vectors "
        "(default: temporary folders, removed)",
    )
    p.add_argument(
        "--only",
        choices=["search"],
        help="time only the searches, over the corpora an earlier run built in --workdir",
    )
    p.add_argument(
        "--hybrid",
        action="store_true",
        help="also time hybrid search (without the question embedding) over stand-in "
        "vectors stored once for every chunk (kept in the home under --workdir)",
    )
    p.add_argument(
        "--stdio",
        action="store_true",
        help="also time keyword search client side over stdio: `kb-mcp serve` against the "
        "naive table behind a pipe",
    )
    _add_embed_perf_flags(p)
    p.set_defaults(func=cmd_bench_perf)
    _add_startup_parser(bench_sub, common)
    _add_web_parser(bench_sub)
    _add_fetch_parser(bench_sub)
    _add_redaction_parser(bench_sub)
    _add_pdf_readers_parser(bench_sub)
    _add_train_ranker_parser(bench_sub, embedder_flags)


def _add_embed_perf_flags(p: argparse.ArgumentParser) -> None:
    """The vector figures of ``bench perf`` (``bench/embed_perf.py``), run only when asked."""
    from kb_mcp.bench.embed_perf import ADD_FILES, BULK_CHUNKS
    from kb_mcp.settings import EMBEDDERS

    p.add_argument(
        "--embedder",
        choices=list(EMBEDDERS),
        help="also measure vectors with this embedder: hybrid search at --vector-chunks, "
        "query embedding, passages/s, `kb-mcp add` to full coverage (default: none, "
        "keyword figures only)",
    )
    p.add_argument(
        "--embed-model", metavar="MODEL", help="embedding model (default: the provider's)"
    )
    p.add_argument(
        "--eval-data",
        default="../shared/eval-data",
        help="folder with scifact/, nfcorpus-testsplit-preproc/ and cosqa/ in BEIR layout "
        "(default ../shared/eval-data): the real text of the vector figures",
    )
    p.add_argument(
        "--vector-chunks",
        type=int,
        default=BULK_CHUNKS,
        help=f"chunks of the large hybrid-search library (default {BULK_CHUNKS})",
    )
    p.add_argument(
        "--add-files",
        type=int,
        default=ADD_FILES,
        help=f"files of the `kb-mcp add` folder (default {ADD_FILES}; 0 skips it)",
    )
    p.add_argument(
        "--vectors-from",
        metavar="KB_DB",
        help="a kb.db whose documents are the SciFact abstracts, embedded by the same model: "
        "its vectors are read (from a copy) instead of embedding 3,000 abstracts for the "
        "large library (default: embed them once, cached in --workdir)",
    )


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
