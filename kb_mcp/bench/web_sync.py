"""``kb-mcp bench fetch``: a real documentation site added as a web source, then synced
again with nothing changed (issue 25).

The site is a folder of HTML (a Debian package's manual, for instance) served on loopback
by the standard library's HTTP server, which answers ``If-Modified-Since`` with 304 (it
sends Last-Modified, no ETag). Through the library's own path (``Folders.add_web``,
``sync(fetch=True)``, the linking phase), it times:

- the first sync (crawl, read, index, link) and the second one, wall and CPU time of this
  process (the server's thread included: it is the same process), the requests each made
  and the page-body bytes each received;
- the boilerplate share of what was stored: each stored page's Markdown (its frontmatter
  aside) scored against the page's main content as a per-site rule names it
  (``bench/web_extract.py``'s ground truth and scoring): lines, and words, not found in the
  main content; and the content's words recall.
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from kb_mcp.bench.web_extract import Rule, Score, ground_truth
from kb_mcp.text.frontmatter import split_frontmatter


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """``folder`` over HTTP on 127.0.0.1 (a free port); its base URL."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _timed(run):
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def run(folder: Path, rule: Rule, start: str, home: Path, rate: float) -> dict[str, object]:
    from kb_mcp.ingest.fetch.crawl import CrawlSpec
    from kb_mcp.ingest.fetch.mirror import Mirror
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    figures: dict[str, object] = {}
    with serve_folder(folder) as base:
        library = Library(Settings(home=home, embedder="none"))
        try:
            spec = CrawlSpec(base + start, start, rate=rate, private_networks=())
            library.folders.add_web(spec, "site")

            def sync():
                [report] = library.folders.sync("site", fetch=True, link=False)
                library.links.run()
                return report

            for label in ("first", "second"):
                report, wall, cpu = _timed(sync)
                crawl = report.crawl
                figures[label] = {
                    "wall_s": round(wall, 2),
                    "cpu_s": round(cpu, 2),
                    "requests": crawl.requests,
                    "body_bytes": crawl.bytes,
                    "pages_fetched": crawl.fetched,
                    "pages_not_modified": crawl.not_modified,
                    "documents_added": report.added,
                    "documents_updated": report.updated,
                }
            mirror = Mirror(home, "site")
            score = Score()
            for record in mirror.pages.values():
                path = folder / unquote(urlsplit(record.url).path).lstrip("/")
                if path.is_dir():
                    path = path / "index.html"
                stored = mirror.root / record.file
                if not path.is_file() or stored.suffix != ".md":
                    continue
                truth = ground_truth(path.read_bytes(), rule)
                if truth is None or not truth.words:
                    continue
                score.add(truth, split_frontmatter(stored.read_text()).body, 0.0)
            figures["pages_scored"] = score.pages
            figures["boilerplate_lines_pct"] = round(100 * score.chrome_lines / score.lines, 2)
            figures["boilerplate_words_pct"] = round(
                100 * score.chrome_words / score.output_words, 2
            )
            figures["content_recall_pct"] = round(100 * score.words_found / score.words, 2)
        finally:
            library.close()
    first, second = figures["first"], figures["second"]
    figures["second_over_first_wall"] = round(second["wall_s"] / first["wall_s"], 3)  # type: ignore[index]
    figures["second_over_first_cpu"] = round(second["cpu_s"] / first["cpu_s"], 3)  # type: ignore[index]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kb-mcp bench fetch", description=__doc__)
    add_arguments(parser)
    return run_args(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", help="a folder of HTML pages, served as a site")
    parser.add_argument(
        "--rule",
        default="sphinx",
        help="the main-content rule of bench/web_extract.py (sphinx, docbook, nodejs, "
        "xmlsoft, or a selector)",
    )
    parser.add_argument("--start", default="/", help="the path to start at (default /)")
    parser.add_argument(
        "--rate", type=float, default=2.0, help="requests a second (default: the product's)"
    )


def run_args(args: argparse.Namespace) -> int:
    import json

    with tempfile.TemporaryDirectory(prefix="kb-bench-fetch-") as home:
        figures = run(Path(args.folder), Rule.parse(args.rule), args.start, Path(home), args.rate)
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
