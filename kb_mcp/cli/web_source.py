"""``kb-mcp add URL``'s flags and lines: a page or a documentation site as a source
(``kb_mcp/ingest/fetch``). ``cli/sources.py`` runs the command: the bounds are shown
before anything is fetched and confirmed as a folder's cost is (``--yes``), after the
start URL is checked (scheme, credentials, its address after DNS), so a refused URL
registers nothing.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from kb_mcp.cli.terminal import terminal_safe

if TYPE_CHECKING:
    from kb_mcp.ingest.fetch.crawl import CrawlSpec
    from kb_mcp.ingest.fetch.mirror import CrawlOutcome

MIB = 1024 * 1024


def add_web_flags(p: argparse.ArgumentParser) -> None:
    from kb_mcp.ingest.fetch.crawl import CrawlSpec

    d = CrawlSpec("http://x/", "/")
    web = p.add_argument_group("web sources (an http(s) URL)")
    web.add_argument(
        "--prefix",
        help="store only pages whose path starts with this (default: the URL's own path: "
        "https://host/docs/ crawls /docs/…, https://host/page.html is that page alone)",
    )
    web.add_argument(
        "--depth",
        type=int,
        default=d.depth,
        help="links followed from the URL (default %(default)s; 0: the page alone)",
    )
    web.add_argument(
        "--max-pages",
        type=int,
        default=d.max_pages,
        help="pages stored at most (default %(default)s)",
    )
    web.add_argument(
        "--max-mb",
        type=int,
        default=d.max_bytes // MIB,
        help="MiB received per crawl at most (default %(default)s)",
    )
    web.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="only paths (and queries) matching (repeatable)",
    )
    web.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="never paths (and queries) matching (repeatable)",
    )
    web.add_argument(
        "--rate",
        type=float,
        default=d.rate,
        help="requests a second to the site (default %(default)s)",
    )
    web.add_argument(
        "--timeout",
        type=float,
        default=d.timeout,
        help="seconds a request may take (default %(default)s)",
    )
    web.add_argument(
        "--allow-private-network",
        action="store_true",
        help="allow requests to loopback, private and link-local addresses (checked after "
        "DNS and on every redirect; refused by default)",
    )
    web.add_argument(
        "--allow-network",
        action="append",
        default=[],
        metavar="CIDR",
        help="allow this one non-public network only (repeatable), e.g. 10.1.2.0/24",
    )


def spec_of(args: argparse.Namespace) -> CrawlSpec:
    from kb_mcp.errors import InvalidInput
    from kb_mcp.ingest.fetch import url as urls
    from kb_mcp.ingest.fetch.crawl import CrawlSpec

    if args.max_mb < 1:
        raise InvalidInput(f"--max-mb is {args.max_mb}; it must be 1 (MiB) or more")
    start = urls.normalize(args.path)
    networks: tuple[str, ...] | None = None
    if args.allow_private_network:
        networks = ()
    elif args.allow_network:
        networks = tuple(args.allow_network)
    return CrawlSpec(
        start,
        args.prefix or urls.default_prefix(start),
        depth=args.depth,
        max_pages=args.max_pages,
        max_bytes=args.max_mb * MIB,
        include=tuple(args.include),
        exclude=tuple(args.exclude),
        rate=args.rate,
        timeout=args.timeout,
        private_networks=networks,
    )


def describe(spec: CrawlSpec) -> str:
    alone = spec.depth == 0 or (spec.prefix == urlsplit(spec.url).path and spec.prefix[-1] != "/")
    scope = f"{spec.url} alone" if alone else f"{spec.url} — pages under {spec.prefix}"
    globs = "".join(
        f", {word} {', '.join(g)}"
        for word, g in (("only", spec.include), ("not", spec.exclude))
        if g
    )
    network = (
        ""
        if spec.private_networks is None
        else "; private networks allowed: " + (", ".join(spec.private_networks) or "all")
    )
    if alone:
        return f"{scope}{globs}: robots.txt honoured{network}"
    return (
        f"{scope}{globs}: at most {spec.max_pages:,} pages, {spec.max_bytes // MIB:,} MiB, "
        f"{spec.depth} links deep, {spec.rate:g} requests/s; robots.txt honoured{network}"
    )


def print_crawl(name: str, out: CrawlOutcome) -> None:
    """One line for a crawl, then its limit, site error and first failures."""
    print(
        f"{name}: fetched {out.fetched} page{'' if out.fetched == 1 else 's'}, "
        f"{out.not_modified} unchanged, "
        f"{out.removed} removed, {len(out.failed)} failed; {out.requests} requests, "
        f"{out.bytes / MIB:.1f} MiB"
    )
    skipped = ", ".join(f"{reason} {n}" for reason, n in sorted(out.skipped.items()))
    if skipped:
        print(f"  not fetched: {skipped}")
    if out.limit:
        print(f"  stopped early: {out.limit}")
    if out.error:
        print(terminal_safe(f"  site error: {out.error}"))
        print(f"  `kb-mcp sync {name}` tries again; until then search answers from the copy")
    for url, reason in out.failed[:10]:
        print(terminal_safe(f"  failed: {url}: {reason}"))
