"""``kb-mcp add`` / ``remove`` / ``sync``: folder sources and single-file uploads.

``add`` and ``sync`` (and ``reindex``) return as soon as keyword search is ready, and say
how many passages are left to embed and about how long that takes; ``kb-mcp serve``
builds them in the background, or ``kb-mcp embed`` (``cli/embedding.py``). ``--wait``
returns once the new passages have vectors too, with their progress on stderr
(``cli/progress.py``). A failing embedder never fails the command: the files are
indexed, keyword search works, and the line printed says what is pending and why.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kb_mcp.cli.embedding import INTERRUPTED_EXIT, embed_and_report, report_backlog
from kb_mcp.cli.progress import (
    ENRICHING_PASSAGES,
    FETCHING_PAGES,
    LINKING_DOCUMENTS,
    READING_FILES,
    PhaseProgress,
)
from kb_mcp.cli.terminal import terminal_safe

if TYPE_CHECKING:
    from kb_mcp.ingest.sync import Estimate, SyncReport
    from kb_mcp.library import Library


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    return input(f"{question} [y/N] ").strip().lower() in {"y", "yes"}


def _print_report(report: SyncReport) -> None:
    line = (
        f"{report.source}: {report.added} added, {report.updated} updated, "
        f"{report.unchanged} unchanged, {report.removed} removed, {report.failed} failed "
        f"in {report.seconds:.1f} s"
    )
    if report.over_cap:
        line += f"; {report.over_cap} files over the per-source cap were left out"
    print(line)
    for path, reason in report.failures[:20]:
        print(terminal_safe(f"  failed: {path}: {reason}"))
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(report.skipped.items()) if v)
    if skipped:
        print(f"  skipped: {skipped} (which and why: `kb-mcp list {report.source}`)")


def _sync_and_report(library: Library, source: str | None) -> list[SyncReport]:
    """Sync with its progress on stderr, print one summary per source; the reports. Web
    sources are fetched first: the CLI is where a person asks for the network."""
    reading = PhaseProgress(READING_FILES, timed_from_first_report=True)
    with reading as progress, PhaseProgress(FETCHING_PAGES) as fetching:
        reports = library.folders.sync(
            source, progress=progress, link=False, fetch=True, fetch_progress=fetching
        )
    for report in reports:
        if report.crawl is not None:
            from kb_mcp.cli.web_source import print_crawl

            print_crawl(report.source, report.crawl)
        _print_report(report)
    link_and_report(library)
    return reports


def link_and_report(library: Library) -> None:
    """The linking phase (``ingest/links``) after the keyword phase, with its progress on
    stderr: one line saying keyword search already works, one saying what it recorded.
    Ctrl-C stops it; the next sync or the server resumes it. Silent when none waits."""
    pending = library.links.pending()
    if not pending:
        library.links.run()  # nothing to link; the keyword segment's refresh runs there
        return
    print(f"keyword search works now; recording entities and relations of {_documents(pending)}")
    with PhaseProgress(LINKING_DOCUMENTS) as progress:
        report = library.links.run(progress=progress)
    if report is None:  # stopped while another process linked
        return
    left = f"; {report.pending:,} pending" if report.pending else ""
    print(f"entities and relations: {_documents(report.linked)} in {report.seconds:.1f} s{left}")


def _documents(count: int) -> str:
    return f"{count:,} document" + ("" if count == 1 else "s")


def enrich_and_report(library: Library, *, quiet: bool = False) -> None:
    """Run the graph's LLM pass (``graph_extractor = ollama``) with its progress, then
    one line; a failure is a warning on stderr (the heuristic graph is in place and the
    next sync or the server retries). Silent with the heuristic extractor."""
    with PhaseProgress(ENRICHING_PASSAGES) as progress:
        report = library.enrichment.run(progress=progress)
    if report is None or not (report.enriched or report.failed or report.pending):
        return
    line = (
        f"graph: {report.enriched} chunks enriched by {library.settings.graph_model}, "
        f"{report.failed} failed, {report.pending} pending"
    )
    if report.error or report.failed:
        reason = f": {report.error}" if report.error else ""
        print(
            f"{line}{reason}. Failed chunks keep their heuristic entities; they are retried later.",
            file=sys.stderr,
        )
        return
    print(f"{line} in {report.seconds:.1f} s", file=sys.stderr if quiet else sys.stdout)


def after_sync(args: argparse.Namespace, library: Library, *, quiet: bool = False) -> int:
    """With ``--wait``, embed (and run the graph's LLM pass) before returning; by default
    say that keyword search works and what is left (``cli/embedding.py``). The command's
    exit code: ``INTERRUPTED_EXIT`` when Ctrl-C stopped the embedding, else 0."""
    if not args.wait:
        report_backlog(library, quiet=quiet)
        return 0
    _, stopped = embed_and_report(library, quiet=quiet)
    if stopped:  # what was embedded is kept; the graph's pass waits for the next run too
        return INTERRUPTED_EXIT
    enrich_and_report(library, quiet=quiet)
    return 0


# ``http//host``, ``https:/host``: a URL with its "://" mistyped, not a folder to look for.
_MISTYPED_URL = re.compile(r"(?i)^(https?):?/+(?=[^/])")


def cmd_add(args: argparse.Namespace, library: Library) -> int:
    """Register a folder or a web page / site as a source (after showing what it would
    cost or fetch), or import one file."""
    from kb_mcp import render
    from kb_mcp.errors import InvalidInput, Refused

    if "://" in args.path:
        return _add_web(args, library)
    path = Path(args.path).expanduser()
    if _MISTYPED_URL.match(args.path) and not path.exists():
        fixed = _MISTYPED_URL.sub(r"\1://", args.path)
        raise InvalidInput(f"{args.path!r} is neither a URL nor a folder", hint=f"{fixed} ?")
    if path.is_file():
        result = library.writing.import_file(path)  # one file: linked at once, no lines about it
        print(render.add_text(result))
        return after_sync(args, library)
    gitignore = args.gitignore is not False  # a new source honours .gitignore unless told
    if path.is_dir():
        resolved = str(path.resolve())
        existing = next((s for s in library.folders.folder_sources() if s.root == resolved), None)
        if existing is not None and args.gitignore is not None:
            return _set_gitignore(args, library, existing.name, args.gitignore)
        # refused before the walk, not after it (or after a yes)
        library.folders.check_registrable(path, args.name)
    _print_estimate(path, library.folders.estimate_folder(path, args.ignore, gitignore=gitignore))
    if not args.yes and not _confirm("Add this folder and index it now?"):
        raise Refused("not added: confirm with --yes (or answer y at the prompt)")
    source = library.folders.add_folder(path, args.name, args.ignore, gitignore=gitignore)
    print(f"added source {source.name!r} → {source.root}")
    if not source.gitignore:
        print("its .gitignore files are not read (--no-gitignore)")
    _sync_and_report(library, source.name)
    return after_sync(args, library)


def _add_web(args: argparse.Namespace, library: Library) -> int:
    """``kb-mcp add URL``: check the start URL, show the bounds, confirm, register, fetch."""
    from kb_mcp.cli.web_source import describe, spec_of
    from kb_mcp.errors import Conflict, Refused
    from kb_mcp.ingest.fetch.crawl import preflight, settle_start

    spec = spec_of(args)
    preflight(spec)
    settled = settle_start(spec)
    if settled.url != spec.url:
        print(f"{spec.url} redirects to {settled.url}: the crawl starts there")
    spec = settled
    existing = library.folders.web_source_of(spec.url)
    if existing is not None and existing.web == spec:
        raise Conflict(
            f"{spec.url} is already the web source {existing.name!r}, with these bounds",
            hint=f"`kb-mcp sync {existing.name}` fetches it again; `kb-mcp add URL` with "
            "other bounds (--prefix, --include, --max-pages …) changes them",
        )
    print(describe(spec))
    if existing is not None:
        print(f"(new bounds for the web source {existing.name!r}: its pages are kept)")
    if not args.yes and not _confirm("Add this site and fetch it now?"):
        raise Refused("not added: confirm with --yes (or answer y at the prompt)")
    if existing is not None:
        source = library.folders.set_bounds(existing.name, spec)
        _sync_and_report(library, source.name)
        return after_sync(args, library)
    source = library.folders.add_web(spec, args.name)
    print(f"added web source {source.name!r} → {spec.url} (pages kept in {source.root})")
    [report] = _sync_and_report(library, source.name)
    if report.crawl is not None and report.crawl.error:
        return 1  # added, with the error shown: `kb-mcp sync` tries again
    if not report.added:  # nothing matched its bounds: an empty source helps nobody
        library.folders.remove_source(source.name)
        raise Refused(
            f"nothing was stored from {spec.url}, so no source was added",
            hint="see what was not fetched above; widen --prefix / --include, or start "
            "at a page that links to the pages you want",
        )
    return after_sync(args, library)


def _print_estimate(path: Path, estimate: Estimate) -> None:
    print(
        f"{path.resolve()}: {estimate.files} files, {estimate.bytes / 1e6:.1f} MB, "
        f"about {estimate.chunks} chunks"
        + (f"; {estimate.over_cap} more files over the cap" if estimate.over_cap else "")
    )
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(estimate.skipped.items()) if v)
    if skipped:
        print(f"skipped: {skipped}")


def _set_gitignore(args: argparse.Namespace, library: Library, name: str, on: bool) -> int:
    """``kb-mcp add DIR --gitignore`` / ``--no-gitignore`` on a folder that is a source
    already: store the choice, after showing what a sync would then read (files a
    .gitignore now leaves out are removed from the index by that sync)."""
    from kb_mcp.errors import Refused

    folder = next(s for s in library.folders.folder_sources() if s.name == name)
    path = Path(folder.root)
    _print_estimate(path, library.folders.estimate_folder(path, folder.ignore, gitignore=on))
    verb = "honour" if on else "stop reading"
    if not args.yes and not _confirm(f"Make {name!r} {verb} .gitignore and sync it now?"):
        raise Refused("nothing changed: confirm with --yes (or answer y at the prompt)")
    library.folders.set_gitignore(name, on)
    state = "honours .gitignore" if on else "no longer reads .gitignore"
    print(f"source {name!r} {state} from now on")
    _sync_and_report(library, name)
    return after_sync(args, library)


def cmd_remove(args: argparse.Namespace, library: Library) -> int:
    """Remove a source and the documents only it held (a folder is not touched; a web
    source's stored copy of its pages is deleted)."""
    removed = library.folders.remove_source(args.source, force=args.force)
    print(f"removed source {args.source!r} ({removed} paths unindexed)")
    return 0


def cmd_sync(args: argparse.Namespace, library: Library) -> int:
    """Sync folder sources with their files and fetch web sources again (all, or the one
    named); exit 1 when a site could not be fetched (its last copy stays searchable)."""
    reports = _sync_and_report(library, args.source)
    if not reports:
        print("no folder or web sources; add one with `kb-mcp add PATH` or `kb-mcp add URL`")
    if any(r.crawl is not None and r.crawl.error for r in reports):
        after_sync(args, library)
        return 1  # a site could not be fetched (its copy is kept): scripts should know
    return after_sync(args, library)
