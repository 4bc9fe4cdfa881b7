"""The ``kb-mcp`` command: parse, call one ``Library`` method, print; KbError → exit code.

Start-up is kept lean on purpose: this module imports only the standard library at load
time, so ``kb-mcp serve`` can protect stdout before anything else runs, and heavy parts
(FastMCP, apsw) are imported by the command that needs them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kb_mcp.cli.legs import LEGS_HELP, parse_legs
from kb_mcp.cli.terminal import terminal_safe

if TYPE_CHECKING:  # imported lazily at run time: start-up stays lean
    from kb_mcp.errors import KbError
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings


# The choices of the ``embedder`` setting (``settings.EMBEDDERS``), repeated here so the
# parser is built without importing the settings module; a test keeps the two equal.
EMBEDDER_CHOICES = ("local", "ollama", "none")
GRAPH_EXTRACTOR_CHOICES = ("heuristic", "ollama")  # settings.GRAPH_EXTRACTORS
RERANKER_CHOICES = ("none", "onnx", "ollama")  # settings.RERANKERS
HOME_HELP = "library folder (default: $KB_MCP_HOME or the XDG data dir, ~/.local/share/kb-mcp)"
STORE_HELP = "`sqlite` (kb.db in the home; the default) or a postgresql:// URL (setting store)"
# The options that may come before the subcommand, each with a value.
GLOBAL_OPTIONS = ("--home", "--store")


def _common(parser: argparse.ArgumentParser, *, store: bool = True) -> None:
    """``--home`` and ``--store`` after the subcommand (``store=False``: a command that
    builds a SQLite library of its own). SUPPRESS: when one is not given there, the value
    given before the subcommand (``kb-mcp --home DIR search …``) stands."""
    parser.add_argument("--home", default=argparse.SUPPRESS, help=HOME_HELP)
    if store:
        parser.add_argument("--store", metavar="STORE", default=argparse.SUPPRESS, help=STORE_HELP)


def _bounded(
    parser: argparse.ArgumentParser, flag: str, name: str, help: str, **options: Any
) -> None:
    """Add ``flag`` as an integer bounded by the limit ``name`` (kb_mcp/limits.py); its
    range is shown in the help and an out-of-range value is a usage error."""
    from kb_mcp import limits

    limit = next(lim for lim in limits.LIMITS if lim.name == name)
    shown = f"{help} ({limit.minimum}-{limit.maximum:,})"
    parser.add_argument(flag, type=limit.argparse_type(), help=shown, **options)


def _embedder_flags(
    parser: argparse.ArgumentParser,
    *,
    wait_flag: bool = False,
    graph_flag: bool = True,
    rerank_flag: bool = False,
) -> None:
    """``--embedder`` / ``--embed-model``, ``--graph-extractor`` where the graph's LLM pass
    runs (``graph_flag``: not on ``search``, which extracts nothing), ``--reranker`` /
    ``--reranker-model`` where searches run (``rerank_flag``), and ``--wait`` /
    ``--no-wait`` where embedding may be waited for."""
    parser.add_argument(
        "--embedder",
        choices=EMBEDDER_CHOICES,
        help="embedder for vectors (default: setting embedder, `local`); none = keyword only",
    )
    parser.add_argument(
        "--embed-model", metavar="MODEL", help="embedding model (default: the provider's)"
    )
    if graph_flag:
        parser.add_argument(
            "--graph-extractor",
            choices=GRAPH_EXTRACTOR_CHOICES,
            help="who finds the graph's entities (default: setting graph_extractor, "
            "`heuristic`); ollama adds typed relations from a chat model in the background",
        )
    if rerank_flag:
        parser.add_argument(
            "--reranker",
            choices=RERANKER_CHOICES,
            help="who reorders a search's first results (default: setting reranker, "
            "`none`): onnx = a cross-encoder folder, ollama = a local chat model",
        )
        parser.add_argument(
            "--reranker-model",
            metavar="MODEL",
            help="onnx: the folder with model.onnx and tokenizer.json; ollama: the chat model",
        )
    if wait_flag:
        waiting = parser.add_mutually_exclusive_group()
        waiting.add_argument(
            "--wait",
            dest="wait",
            action="store_true",
            default=False,
            help="return once the new passages have vectors too (and the graph's LLM pass "
            "is done), with progress; by default the command returns once keyword search "
            "works, and `kb-mcp serve` (in the background) or `kb-mcp embed` builds them",
        )
        waiting.add_argument(
            "--no-wait",
            dest="wait",
            action="store_false",
            help="the default, said explicitly (kept for scripts written before --wait)",
        )


def _load_settings(args: argparse.Namespace, **overrides: Any) -> Settings:
    from kb_mcp.settings import load

    overrides.setdefault("embedder", getattr(args, "embedder", None))
    overrides.setdefault("embed_model", getattr(args, "embed_model", None))
    overrides.setdefault("graph_extractor", getattr(args, "graph_extractor", None))
    overrides.setdefault("reranker", getattr(args, "reranker", None))
    overrides.setdefault("reranker_model", getattr(args, "reranker_model", None))
    overrides.setdefault("store", args.store)
    return load(home=args.home, overrides=overrides)


def _open(args: argparse.Namespace, **overrides: Any) -> Library:
    from kb_mcp.embed.active import foreground_embedders
    from kb_mcp.library import Library

    settings = _load_settings(args, **overrides)
    return Library(settings, make_embedder=foreground_embedders(settings))


def _emit(
    args: argparse.Namespace,
    result: Any,
    text: Callable[[Any], str],
    data: Callable[[Any], Any] | None = None,
) -> None:
    from kb_mcp import render

    if getattr(args, "json", False):
        print(json.dumps((data or render.to_data)(result), ensure_ascii=False, indent=2))
    else:
        print(terminal_safe(text(result)))


def cmd_serve(args: argparse.Namespace, wire_fd: int | None = None) -> int:
    """Serve MCP over stdio (this is what an agent's config runs)."""
    from kb_mcp.server import arenas, stdio

    arenas.configure()  # malloc's, before any thread starts: see server/arenas.py
    wire = wire_fd if wire_fd is not None else stdio.protect_stdout()
    settings = _load_settings(args, allow_agent_writes=args.allow_agent_writes or None)
    stdin = stdio.protect_stdin()
    import anyio

    from kb_mcp.server.tools import build_server

    mcp, holder = build_server(settings)
    try:
        anyio.run(stdio.serve_stdio, mcp, wire, stdin)
    finally:
        holder.close()
    return 0


def cmd_add_text(args: argparse.Namespace) -> int:
    """Add a text document (from --file or stdin) under the identity of --uri."""
    from kb_mcp import render
    from kb_mcp.errors import InvalidInput

    if args.file:
        try:
            content = open(args.file, encoding="utf-8").read()  # noqa: SIM115
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"cannot read {args.file}: {exc}") from exc
    else:
        content = sys.stdin.read()
    with _open(args) as library:
        result = library.writing.add_document(
            args.title, content, args.uri, args.tag, by_agent=False
        )
    _emit(args, result, render.add_text)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """Search the library; --json prints the structured result."""
    from kb_mcp import render

    with _open(args) as library:
        legs = parse_legs(args.legs)
        result = library.lookup.search(args.query, args.top_k, args.mode, args.source, legs)
    _emit(args, result, render.search_text, render.search_data)
    return 0


def cmd_entities(args: argparse.Namespace) -> int:
    """Entities matching QUERY (fuzzy), or the most mentioned: kind, mentions, neighbours."""
    from kb_mcp import render

    with _open(args) as library:
        views = library.entities.find(args.query, args.limit)
    _emit(args, views, render.entities_text)
    return 0


def cmd_grep(args: argparse.Namespace) -> int:
    """Find lines by literal text or regex in stored documents."""
    from kb_mcp import render

    with _open(args) as library:
        result = library.lookup.grep(
            args.pattern,
            regex=args.regex,
            ignore_case=args.ignore_case,
            source=args.source,
            path_glob=args.path_glob,
            max_matches=args.max_matches,
        )
    _emit(args, result, render.grep_text)
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    """Read a document or a cited line range."""
    from kb_mcp import render

    with _open(args) as library:
        result = library.lookup.read(args.doc, args.start_line, args.end_line)
    _emit(args, result, render.read_text)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """Show sources, counts and index health; with a source, its entries (one per path)."""
    from kb_mcp import render
    from kb_mcp.errors import InvalidInput
    from kb_mcp.library.catalog import DAMAGED

    with _open(args) as library:
        if (args.failed or args.skipped) and not args.source:
            raise InvalidInput(
                "--failed and --skipped need a source: `kb-mcp list SOURCE --failed`"
            )
        if args.failed or args.skipped:
            _emit(
                args,
                library.folders.left_out(args.source, skipped=args.skipped),
                render.left_out_text,
            )
        elif args.source:
            result = library.catalog.list_source(args.source, args.limit, args.offset)
            _emit(args, result, render.listing_text)
        else:
            overview = library.catalog.overview()
            _emit(args, overview, render.overview_text)
            if str(overview.health.get("database", "")).startswith(DAMAGED):
                return 1  # a script checking `kb-mcp list` sees it (issue 20 item 4)
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    """Sync changed files into the index; --rebuild re-reads every file from scratch."""
    from kb_mcp import render
    from kb_mcp.errors import NoSpace, Unavailable

    try:
        library = _open(args)
    except Unavailable as exc:
        if not args.rebuild or isinstance(exc, NoSpace):  # a full disk damages nothing
            raise
        if _load_settings(args).store.postgres_url is not None:
            raise  # the server, not kb.db (which may be the library moved from there)
        # The index cannot even be opened: set it aside (nothing in it is the truth).
        library = _open_fresh(args, f"could not be opened: {exc.message}")
    if args.rebuild and (problems := library.health.database_problems()):
        # A damaged page would end the rebuild half-way (issue 20 item 4): the same.
        library.close()
        library = _open_fresh(args, f"is damaged: {problems[0]}")
    from kb_mcp.cli.progress import READING_FILES, PhaseProgress

    with library:
        with PhaseProgress(READING_FILES) as progress:
            result = library.writing.reindex(rebuild=args.rebuild, progress=progress)
        _emit(args, result, render.reindex_text)
        from kb_mcp.cli.sources import after_sync

        return after_sync(args, library, quiet=args.json)


def cmd_add(args: argparse.Namespace) -> int:
    """Add a folder as a source (shows the cost first), a web page or docs site (shows its
    bounds first), or import one file as an upload."""
    from kb_mcp.cli.sources import cmd_add as run

    with _open(args) as library:
        return run(args, library)


def cmd_remove(args: argparse.Namespace) -> int:
    """Remove a source and what only it held; a folder itself is never touched, a web
    source's stored pages are deleted."""
    from kb_mcp.cli.sources import cmd_remove as run

    with _open(args) as library:
        return run(args, library)


def cmd_sync(args: argparse.Namespace) -> int:
    """Sync folder sources with their files and fetch web sources again (all of them, or
    the one named); exit 1 when a site could not be fetched (its copy stays)."""
    from kb_mcp.cli.sources import cmd_sync as run

    with _open(args) as library:
        return run(args, library)


def cmd_embed(args: argparse.Namespace) -> int:
    """Build the vectors of passages that have none yet, with progress; Ctrl-C stops
    after the batch in progress and keeps what was done (the next run resumes)."""
    from kb_mcp.cli.embedding import cmd_embed as run

    with _open(args) as library:
        return run(args, library)


def _open_fresh(args: argparse.Namespace, why: str) -> Library:
    """Move a damaged or unreadable kb.db (and its WAL files) aside, kept under a name of
    its own, then open a new one; ``why`` completes "kb.db …" in the message."""
    import time

    home = _load_settings(args).home
    stamp = time.strftime("%Y%m%d-%H%M%S")
    suffix, again = f"broken-{stamp}", 1
    while (home / f"kb.db.{suffix}").exists():  # a second rebuild within the second
        suffix, again = f"broken-{stamp}-{again}", again + 1
    for part in ("", "-wal", "-shm"):
        broken = home / f"kb.db{part}"
        if broken.exists():
            broken.rename(home / f"kb.db{part}.{suffix}")
    print(
        f"kb-mcp: kb.db {why}; moved it aside (kb.db.{suffix}, kept) and rebuilding from the files",
        file=sys.stderr,
    )
    return _open(args)


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check the library's health and the optional extras; exit 1 when something fails."""
    from kb_mcp import render

    with _open(args) as library:
        report = library.health.report()
    _emit(args, report, render.doctor_text)
    return 0 if report.ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    """Build a small library in a temp folder and query it through a real MCP session."""
    from kb_mcp.cli.demo import run_demo

    return run_demo(keep=args.keep)


def cmd_web(args: argparse.Namespace) -> int:
    """Serve a read-only web view of the library (loopback, free port); prints its URL."""
    from kb_mcp.web.serve import run_web

    with _open(args) as library:
        run_web(
            library,
            args.host,
            args.port,
            open_browser=args.open,
            client_timeout=args.client_timeout,
            max_connections=args.max_connections,
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    from kb_mcp import __version__, limits

    parser = argparse.ArgumentParser(
        prog="kb-mcp", description="A local knowledge base for coding agents, over MCP."
    )
    parser.add_argument("--version", action="version", version=f"kb-mcp {__version__}")
    parser.add_argument("--home", default=None, help=HOME_HELP)
    parser.add_argument("--store", metavar="STORE", default=None, help=STORE_HELP)
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an internal error"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, func: Callable[..., int], json_flag: bool = False):
        p = sub.add_parser(name, help=func.__doc__, description=func.__doc__)
        _common(p)
        if json_flag:
            p.add_argument("--json", action="store_true", help="print JSON instead of text")
        p.set_defaults(func=func)
        return p

    p = command("serve", cmd_serve)
    p.add_argument(
        "--allow-agent-writes", action="store_true", help="let agents add documents (add_document)"
    )
    _embedder_flags(p, rerank_flag=True)
    p = command("add-text", cmd_add_text, json_flag=True)
    p.add_argument("--title", required=True)
    p.add_argument("--uri", required=True, help="identity of the document (e.g. its URL)")
    p.add_argument("--file", help="read the text from this file (default: stdin)")
    p.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
    p = command("search", cmd_search, json_flag=True)
    p.add_argument("query")
    _bounded(p, "--top-k", "top_k", "documents to return (default: setting search_top_k)")
    p.add_argument("--mode", default="auto", choices=["auto", "keyword", "vector", "hybrid"])
    p.add_argument("--source")
    p.add_argument("--legs", metavar="LEGS", help=LEGS_HELP)
    _embedder_flags(p, graph_flag=False, rerank_flag=True)  # a search extracts nothing
    p = command("entities", cmd_entities, json_flag=True)
    p.add_argument("query", nargs="?", help="a name to look up (default: the most mentioned)")
    _bounded(p, "--limit", "top_k", "entities to show", default=10)
    p = command("grep", cmd_grep, json_flag=True)
    p.add_argument("pattern")
    p.add_argument("--regex", action="store_true")
    p.add_argument("-i", "--ignore-case", action="store_true")
    p.add_argument("--source")
    p.add_argument("--path-glob")
    _bounded(p, "--max-matches", "max_matches", "stop after this many lines")
    p = command("read", cmd_read, json_flag=True)
    p.add_argument("doc", help="document id, cite string (doc#L3-L9), uri or path")
    _bounded(p, "--start-line", "line", "first line, 1-based")
    _bounded(p, "--end-line", "line", "last line, inclusive")
    p = command("list", cmd_list, json_flag=True)
    p.add_argument("source", nargs="?")
    _bounded(p, "--limit", "limit", "entries per page", default=50)
    _bounded(p, "--offset", "offset", "entries to skip", default=0)
    p.add_argument(
        "--failed", action="store_true", help="every file of SOURCE that failed, and why"
    )
    p.add_argument(
        "--skipped",
        action="store_true",
        help="every path of SOURCE a sync leaves out (walked now), per reason, and how to "
        "read one anyway; with the failed files",
    )
    p = command("reindex", cmd_reindex, json_flag=True)
    p.add_argument("--rebuild", action="store_true", help="drop every derived row first")
    _embedder_flags(p, wait_flag=True)
    command("doctor", cmd_doctor, json_flag=True)
    p = command("add", cmd_add)
    p.add_argument(
        "path",
        help="a folder to keep in sync, a single file to import, or an http(s) URL: a "
        "page or a documentation site, fetched now and by each `kb-mcp sync`",
    )
    p.add_argument("--name", help="source name (default: the folder's name, or the site's host)")
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="GLOB",
        help="gitignore-style pattern to leave out (repeatable)",
    )
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    gitignore = p.add_mutually_exclusive_group()
    gitignore.add_argument(
        "--gitignore",
        dest="gitignore",
        action="store_true",
        default=None,
        help="honour the folder's .gitignore files (the default for a new source; on a "
        "source added before they were read, opts it in)",
    )
    gitignore.add_argument(
        "--no-gitignore",
        dest="gitignore",
        action="store_false",
        help="do not read the folder's .gitignore files (.kbignore still applies)",
    )
    from kb_mcp.cli.web_source import add_web_flags

    add_web_flags(p)
    _embedder_flags(p, wait_flag=True)
    p = command("embed", cmd_embed)
    _embedder_flags(p, graph_flag=False)
    p = command("remove", cmd_remove)
    p.add_argument("source")
    p.add_argument(
        "--force",
        action="store_true",
        help="on a shared library, remove another machine's folder (one gone for good)",
    )
    p = command("sync", cmd_sync)
    p.add_argument("source", nargs="?")
    _embedder_flags(p, wait_flag=True)
    from kb_mcp.cli.bench import add_bench_parser
    from kb_mcp.cli.install import add_install_parser

    add_bench_parser(sub, _common, _embedder_flags)
    add_install_parser(sub, _common, _embedder_flags)
    from kb_mcp.cli.pg import add_pg_parser

    add_pg_parser(sub)
    from kb_mcp.cli.move import add_move_parser

    add_move_parser(sub, _common)
    p = command("web", cmd_web)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port (default: 0, any free one)")
    p.add_argument("--open", action="store_true", help="open the URL in the default browser")
    _bounded(
        p,
        "--client-timeout",
        "web_client_timeout_s",
        "seconds a client may take to send a request, or stall reading an answer, before "
        f"it is disconnected (default: {limits.WEB_CLIENT_TIMEOUT_S.default})",
        metavar="SECONDS",
        default=limits.WEB_CLIENT_TIMEOUT_S.default,
    )
    _bounded(
        p,
        "--max-connections",
        "web_max_connections",
        "open connections at most; one more is answered 503 "
        f"(default: {limits.WEB_MAX_CONNECTIONS.default})",
        metavar="N",
        default=limits.WEB_MAX_CONNECTIONS.default,
    )
    p = command("demo", cmd_demo)
    p.add_argument("--keep", action="store_true", help="keep the demo library folder")
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand, found without building the parser: ``--home DIR`` and ``--store
    STORE`` may precede it."""
    rest = list(argv)
    while rest and rest[0].split("=", 1)[0] in GLOBAL_OPTIONS:
        rest = rest[1:] if "=" in rest[0] else rest[2:]
    return rest[0] if rest else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    wire = None
    if _command_of(argv) == "serve":
        # First thing, before any import can write to fd 1: see server/stdio.py.
        from kb_mcp.server.stdio import protect_stdout

        wire = protect_stdout()
    args = build_parser().parse_args(argv)
    from kb_mcp.errors import KbError

    try:
        if args.func is cmd_serve:
            return cmd_serve(args, wire)
        return args.func(args)
    except KbError as exc:
        return _report(exc)
    except KeyboardInterrupt:
        if args.func in (cmd_add, cmd_sync):  # what was done is kept
            print("kb-mcp: interrupted; `kb-mcp sync` resumes where it stopped", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `kb-mcp read doc | head -1`: the reader left, which is not a bug. Point stdout
        # at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        known = _storage_failure(args, exc)
        if known is not None:  # a damaged database or a full disk (store/failures.py)
            return _report(known)
        # A bug, not bad input: one redacted line for the person (issue 7 item 9 found
        # `kb-mcp sync` printing a traceback); the traceback itself only when asked for.
        if args.debug:
            raise
        print(internal_error_line(exc), file=sys.stderr)
        return INTERNAL_ERROR_EXIT


INTERNAL_ERROR_EXIT = 70  # EX_SOFTWARE in sysexits.h


def _report(exc: KbError) -> int:
    """One error on stderr, redacted like tool errors (a "did you mean" hint may name a
    file whose name holds a token); its exit code."""
    from kb_mcp.redact import redact_output

    print(f"kb-mcp: {terminal_safe(redact_output(exc.render()).text)}", file=sys.stderr)
    return exc.exit_code


def _storage_failure(args: argparse.Namespace, exc: Exception) -> KbError | None:
    """``exc`` as a damaged database or a full disk under the library's home, or None."""
    try:
        from kb_mcp.library import storage_failure

        home = _load_settings(args).home
    except Exception:  # the settings themselves failed: report the original error
        return None
    return storage_failure(exc, home)


def internal_error_line(exc: BaseException) -> str:
    """``kb-mcp: internal error (Type: message)``, redacted and cut to one short line."""
    from kb_mcp.redact import redact_output

    detail = redact_output(f"{type(exc).__name__}: {exc}").text.replace("\n", " ")
    if len(detail) > 300:
        detail = detail[:299] + "…"
    return (
        f"kb-mcp: internal error ({detail}). "
        "Run again with --debug for the traceback, and please report it."
    )


if __name__ == "__main__":
    sys.exit(main())
