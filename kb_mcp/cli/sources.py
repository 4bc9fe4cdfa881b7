"""``kb-mcp add`` / ``remove`` / ``sync``: folder sources and single-file uploads."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kb_mcp.cli.progress import ProgressBar

if TYPE_CHECKING:
    from kb_mcp.ingest.sync import SyncReport
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
        print(f"  failed: {path}: {reason}")


def _sync_and_report(library: Library, source: str | None) -> int:
    """Sync with a progress bar on stderr, print one summary per source; how many."""
    bar = ProgressBar(f"sync {source}" if source else "sync")
    try:
        reports = library.sync(source, progress=bar)
    finally:
        bar.close()
    for report in reports:
        _print_report(report)
    return len(reports)


def cmd_add(args: argparse.Namespace, library: Library) -> int:
    """Register a folder as a source (after showing what it would cost), or import one file."""
    from kb_mcp import render
    from kb_mcp.errors import Refused

    path = Path(args.path).expanduser()
    if path.is_file():
        result = library.import_file(path)
        print(render.add_text(result))
        return 0
    estimate = library.estimate_folder(path, args.ignore)
    print(
        f"{path.resolve()}: {estimate.files} files, {estimate.bytes / 1e6:.1f} MB, "
        f"about {estimate.chunks} chunks"
        + (f"; {estimate.over_cap} more files over the cap" if estimate.over_cap else "")
    )
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(estimate.skipped.items()) if v)
    if skipped:
        print(f"skipped: {skipped}")
    if not args.yes and not _confirm("Add this folder and index it now?"):
        raise Refused("not added: confirm with --yes (or answer y at the prompt)")
    source = library.add_folder(path, args.name, args.ignore)
    print(f"added source {source.name!r} → {source.root}")
    _sync_and_report(library, source.name)
    return 0


def cmd_remove(args: argparse.Namespace, library: Library) -> int:
    """Remove a folder source and the documents only it held (the folder is not touched)."""
    removed = library.remove_source(args.source)
    print(f"removed source {args.source!r} ({removed} paths unindexed)")
    return 0


def cmd_sync(args: argparse.Namespace, library: Library) -> int:
    """Sync folder sources with their files (all, or the one named)."""
    if not _sync_and_report(library, args.source):
        print("no folder sources; add one with `kb-mcp add PATH`")
    return 0
