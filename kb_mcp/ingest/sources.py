"""The folder-source registry: which folders the user named, kept in ``<home>/sources.json``.

A folder enters the library only because the user named it (``kb-mcp add PATH`` or the
``folders`` setting). The registry is a file, not a table, because the database is a
rebuildable index: deleting ``kb.db`` must not forget which folders to index.

A web source (``kb-mcp add URL``, ``kb_mcp/ingest/fetch``) is registered here too: a folder
source whose folder is its mirror, ``<home>/web/<name>/``, with the crawl's bounds
(``web``). Everything that reads a folder reads the mirror the same way.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from kb_mcp.errors import Conflict, InvalidInput, NotFound
from kb_mcp.fsutil import atomic_write
from kb_mcp.home import WEB_DIR

if TYPE_CHECKING:
    from kb_mcp.ingest.fetch.crawl import CrawlSpec

REGISTRY_FILE = "sources.json"
# The kinds of source this registry holds, whose files are on one machine (a folder, a
# web source's mirror): on a shared library only that machine syncs or drops them.
LOCAL_KINDS = frozenset({"folder", "web"})
RESERVED_NAMES = frozenset({"agent", "uploads"})


@dataclass(frozen=True, slots=True)
class FolderSource:
    """A folder the user named. ``gitignore``: whether its walk honours ``.gitignore``
    (and ``.kbignore``) at every level (``ingest/gitignore.py``). A source registered
    before that existed has no stored choice and keeps the root ``.kbignore`` alone, as
    do folders of the ``folders`` setting: honouring ``.gitignore`` unasked would archive
    documents they rely on (issue 20 item 12). ``kb-mcp add DIR --gitignore`` opts in."""

    name: str
    root: str
    ignore: tuple[str, ...] = ()
    configured: bool = False  # from the ``folders`` setting rather than ``kb-mcp add``
    gitignore: bool = False
    web: CrawlSpec | None = None  # a web source: the site's bounds; ``root`` is its mirror

    @property
    def kind(self) -> str:
        """The source's kind in the database: ``web`` or ``folder``."""
        return "folder" if self.web is None else "web"

    @property
    def shown_root(self) -> str:
        """What ``list`` shows as the source's place: the folder, or the site's URL."""
        return self.root if self.web is None else self.web.url


def load_registry(home: Path) -> list[FolderSource]:
    path = home / REGISTRY_FILE
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [
            FolderSource(
                d["name"],
                str(home / WEB_DIR / d["name"]) if "web" in d else d["root"],
                tuple(d.get("ignore", ())),
                gitignore=bool(d.get("gitignore", False)),
                web=_crawl_spec(d["web"]) if "web" in d else None,
            )
            for d in data
        ]
    except (OSError, ValueError, KeyError, TypeError, InvalidInput) as exc:
        raise InvalidInput(
            f"cannot read the source registry {path}: {exc}",
            hint="fix or delete the file, then add the folders again with `kb-mcp add`",
        ) from exc


def save_registry(home: Path, sources: Sequence[FolderSource]) -> None:
    """Write the registry; ``gitignore`` only where it is on, so a file written before it
    existed, and rewritten since, still reads as the user left it."""
    data = [
        {"name": s.name, "root": s.root, "ignore": list(s.ignore)}
        | ({"gitignore": True} if s.gitignore else {})
        | ({"web": _spec_data(s.web)} if s.web is not None else {})
        for s in sources
    ]
    atomic_write(home / REGISTRY_FILE, json.dumps(data, indent=2).encode("utf-8"))


def _spec_data(spec: CrawlSpec) -> dict[str, Any]:
    data = dataclasses.asdict(spec)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


def _crawl_spec(data: dict[str, Any]) -> CrawlSpec:
    from kb_mcp.ingest.fetch.crawl import CrawlSpec

    fields = {f.name for f in dataclasses.fields(CrawlSpec)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in fields}
    spec = CrawlSpec(**values)
    spec.check()
    return spec


def register_web(
    home: Path, spec: CrawlSpec, name: str | None, taken: Collection[str] = ()
) -> FolderSource:
    """Add a web source; the name defaults to the site's host (``docs.example.org``, then
    ``docs.example.org-2``). The same start URL twice is refused."""
    from kb_mcp.ingest.fetch import url as urls

    spec.check()
    start = urls.normalize(spec.url)
    sources = load_registry(home)
    for s in sources:
        if s.web is not None and urls.normalize(s.web.url) == start:
            raise Conflict(f"{start} is already a source, named {s.name!r}")
    names = {s.name for s in sources} | set(taken)
    if name is not None:
        if not name.strip() or "/" in name or name.startswith("."):
            raise InvalidInput(f"--name {name!r} cannot name a web source's folder")
        if name in names or name in RESERVED_NAMES:
            raise Conflict(f"a source named {name!r} exists already; pick another --name")
    parts = urlsplit(start)
    site = (parts.hostname or "site") + (f"-{parts.port}" if parts.port else "")
    chosen = name or _free_name(site, names)
    source = FolderSource(chosen, str(home / WEB_DIR / chosen), (), web=spec)
    save_registry(home, [*sources, source])
    return source


def folder_sources(home: Path, configured: Sequence[str]) -> list[FolderSource]:
    """Registered folders, then configured ones not registered already (named by folder)."""
    sources = load_registry(home)
    roots = {s.root for s in sources}
    names = {s.name for s in sources}
    for folder in configured:
        root = str(Path(folder).expanduser().resolve())
        if root in roots:
            continue
        name = _free_name(Path(root).name or "folder", names)
        sources.append(FolderSource(name, root, (), configured=True))
        roots.add(root)
        names.add(name)
    return sources


def _free_name(base: str, taken: set[str]) -> str:
    name, n = base, 2
    while name in taken or name in RESERVED_NAMES:
        name, n = f"{base}-{n}", n + 1
    return name


def check_registrable(
    sources: Sequence[FolderSource], root: Path, name: str | None, taken: Collection[str] = ()
) -> None:
    """Raise when ``root`` (resolved) is already one of ``sources`` or ``name`` is taken
    (by one of ``sources``, or one of ``taken``: other homes' folders on a shared library).

    ``kb-mcp add`` asks this before it walks the folder for its cost: on a big folder the
    walk took seconds, and the refusal came after it, or after the user had said yes
    (outsider run).
    """
    for s in sources:
        if s.root == str(root):
            raise Conflict(f"{root} is already a source, named {s.name!r}")
    if name is not None and (
        name in {s.name for s in sources} | set(taken) or name in RESERVED_NAMES
    ):
        raise Conflict(f"a source named {name!r} exists already; pick another --name")
    if name is not None and not name.strip():
        raise InvalidInput("--name is empty")


def register_folder(
    home: Path,
    root: Path,
    name: str | None,
    ignore: Sequence[str],
    *,
    gitignore: bool = True,
    taken: Collection[str] = (),
) -> FolderSource:
    """Add a folder to the registry; the name defaults to the folder's own name, or the
    first free one after it (``notes-2``) beside the registry's and ``taken`` names."""
    resolved = root.expanduser().resolve()
    if not resolved.is_dir():
        raise NotFound(f"{root} is not a folder")
    sources = load_registry(home)
    check_registrable(sources, resolved, name, taken)
    taken = {s.name for s in sources} | set(taken)
    source = FolderSource(
        name or _free_name(resolved.name or "folder", taken),
        str(resolved),
        tuple(ignore),
        gitignore=gitignore,
    )
    save_registry(home, [*sources, source])
    return source


def set_gitignore(home: Path, source: FolderSource, gitignore: bool) -> FolderSource:
    """Store whether ``source`` honours ``.gitignore``; a folder of the ``folders`` setting
    is registered under its name to hold the choice. Returns the source as it is now."""
    changed = replace(source, gitignore=gitignore, configured=False)
    sources = load_registry(home)
    kept = [changed if s.name == source.name else s for s in sources]
    save_registry(home, kept if changed in kept else [*sources, changed])
    return changed


def set_bounds(home: Path, name: str, spec: CrawlSpec) -> FolderSource:
    """Store new crawl bounds for the web source ``name`` (its pages are kept: the next
    crawl asks them again and drops what the new bounds leave out)."""
    spec.check()
    sources = load_registry(home)
    changed = [replace(s, web=spec) if s.name == name and s.web else s for s in sources]
    save_registry(home, changed)
    return next(s for s in changed if s.name == name)


def unregister_folder(home: Path, name: str) -> FolderSource:
    sources = load_registry(home)
    kept = [s for s in sources if s.name != name]
    if len(kept) == len(sources):
        raise NotFound(
            f"no registered folder source named {name!r}",
            hint="known: " + (", ".join(s.name for s in sources) or "none"),
        )
    save_registry(home, kept)
    return next(s for s in sources if s.name == name)
