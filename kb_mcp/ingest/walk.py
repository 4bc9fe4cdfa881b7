"""Find the files of a folder source: what to read, what to skip and why.

The walk decides from names first and touches the disk as little as it can: folders
are pruned before they are listed, and a file is ``stat``-ed only once every
name-based rule has let it through. Files are opened only where a name cannot decide:
the ignore files, a file named for secrets (its first bytes say whether it is a
document), and a file without a reader for its name (the caller's ``accept`` sniffs
whether it is text).

Rules, in the order they apply to each entry below the root:

1. Sensitive names (``policy``): keys, credentials, ``.env``, credential folders.
   Counted, never read, and a credential folder is never entered. A name refused only
   for a secret word (``gitcredentials.txt``) is read when its content opens a document.
2. Symlinks are followed only when their resolved target stays inside the resolved
   root and is not sensitive there. Each folder is walked once, whichever way it is
   reached, so symlink loops end; real paths are walked before symlinked ones, so a
   file is reported under its real location when it has two.
3. Folders: ``PRUNED_DIRS`` (VCS, dependency, cache and build output), every
   dot-folder, and any folder holding ``pyvenv.cfg``, ``conda-meta`` or
   ``CACHEDIR.TAG`` (a virtualenv or a tagged cache, whatever its name). A ``build``
   folder is judged by what it holds: kept when it holds documentation sources and no
   build output (Mako and SQLAlchemy keep their Sphinx sources in ``doc/build/``).
4. Files: OS and editor junk and dependency lock files, then every dot-file. Dot-files
   are tool configuration rather than notes, and unknown ones may hold secrets the
   deny-list does not name, so none is read (``.kbignore`` included).
5. The ignore files and the source's ignore patterns (``ignore`` for a source that does
   not honour ``.gitignore``, ``gitignore`` for one that does), then the caller's
   ``accept`` predicate (a readable format), then the size limit. A ``!`` line that
   names a pruned, hidden or junk entry re-includes it; nothing re-includes a
   sensitive one.

Kept files are sorted newest first and capped at ``max_files``. The files beyond the
cap and the folders that could not be listed are reported by path, because a sync that
archives "what was not found" must not archive them: they still exist. Skipped entries
are counted by reason, and the first ``examples`` paths of each reason (in path order)
are named, so a user can see which files were left out and why (issue 20 item 9).
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from kb_mcp.errors import InvalidInput, NotFound, Refused, Unreadable
from kb_mcp.ingest.gitignore import GITIGNORE, KBIGNORE, IgnoreTree, read_ignore_file
from kb_mcp.ingest.ignore import IgnoreRules
from kb_mcp.ingest.policy import (
    named_for_secrets,
    sensitive_file_reason,
    sensitive_folder_reason,
    sensitive_name_reason,
    sensitive_reason,
)

__all__ = [
    "IGNORE_FILE",
    "IGNORE_FILES",
    "PRUNED_DIRS",
    "SKIPPED_EXAMPLES",
    "SKIP_HINTS",
    "FoundFile",
    "Rules",
    "SkipReason",
    "WalkResult",
    "load_rules",
    "path_skip_reason",
    "walk_folder",
]

IGNORE_FILE = KBIGNORE
# ``_Walk._content_reason``'s verdicts by (path, size, mtime_ns), shared by the walks of
# one process and cleared whole when full.
_CONTENT_VERDICTS: dict[tuple[str, int, int], SkipReason | None] = {}
_UNSEEN = object()
IGNORE_FILES = frozenset({KBIGNORE, GITIGNORE})
# Paths named per skip reason in a walk's result (and so in a sync's stored summary).
SKIPPED_EXAMPLES = 10
# The rules a walk applies: the root ``.kbignore`` subset, or every level's ignore files.
Rules = IgnoreRules | IgnoreTree
# File names whose name-only verdict is remembered (~150 bytes each): two sources of the
# default 20k-file cap.
NAME_CACHE_SIZE = 1 << 16

# Tool-generated folder names, matched exactly: tools write them in this case, and a
# user's own "Build" or "Coverage" folder is kept. Dot-folders are pruned by rule 3
# anyway; the common ones are listed so the report names them "pruned".
# Not listed, on purpose: "vendor" (Go/PHP dependencies, but also a common business
# folder name for supplier documents; add ``vendor/`` to .kbignore in a repository) and
# "env" (ambiguous; real virtualenvs are caught by their pyvenv.cfg, whatever their name).
PRUNED_DIRS: frozenset[str] = frozenset(
    {
        # version control
        ".git", ".hg", ".svn", ".bzr", "_darcs",
        # dependencies
        "node_modules", "bower_components", "jspm_packages", "site-packages", ".eggs",
        "venv", ".venv", ".tox", ".nox", ".terraform",
        # caches
        "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis",
        ".ipynb_checkpoints", ".cache", ".parcel-cache", ".turbo", ".gradle", ".dart_tool",
        # build output: a rebuild would present every generated file as changed content
        "dist", "build", "target", "_build", ".next", ".nuxt", ".svelte-kit", "cdk.out",
        ".serverless", "coverage", "htmlcov", ".nyc_output",
        # editors and OS
        ".idea", ".vscode", "__MACOSX", "$RECYCLE.BIN", "System Volume Information",
    }
)  # fmt: skip

# Packaging metadata written by setuptools, pip and wheel (RECORD, WHEEL, INSTALLER…);
# an sdist's own PKG-INFO, at its root, is read.
_METADATA_DIRS = (".egg-info", ".dist-info")
# Version-control internals: never documents, and never re-included by a ``!`` line (a
# ``.kbignore`` that ends in ``!*/`` means the folders it excluded, not ``.git``).
_NEVER_LIFTED = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs"})
# A folder holding one of these is a virtualenv, conda env or tagged cache
# (https://bford.info/cachedir/), whatever it is called.
_GENERATED_MARKERS = frozenset({"pyvenv.cfg", "conda-meta", "CACHEDIR.TAG"})

# Build-output names that also name documentation sources: Mako, SQLAlchemy and alembic
# keep their Sphinx sources (conf.py, *.rst) in ``doc/build/``, which was pruned unread
# (issue 20 item 10). Such a folder is listed and kept when it holds documentation
# sources and nothing a build writes.
_JUDGED_BY_CONTENT = frozenset({"build"})
_DOC_SOURCE_NAMES = frozenset({"conf.py", "mkdocs.yml", "index.rst", "index.md"})
_DOC_SOURCE_SUFFIXES = (".rst", ".md", ".markdown", ".adoc", ".asciidoc")
# What a build writes at the top of its output folder: setuptools (lib, lib.*, bdist.*,
# temp.*, scripts-*), Sphinx (.buildinfo, doctrees, html), CMake and Ninja, Gradle and
# Android, and compiled files of any kind.
_BUILD_OUTPUT_NAMES = frozenset(
    {
        "lib", "html", "doctrees", ".buildinfo", "CMakeCache.txt", "CMakeFiles",
        "build.ninja", ".ninja_log", "classes", "intermediates", "outputs", "libs", "tmp",
    }
)  # fmt: skip
_BUILD_OUTPUT_PREFIXES = ("lib.", "bdist.", "temp.", "scripts-")
_BUILD_OUTPUT_SUFFIXES = (".o", ".obj", ".pyc", ".whl", ".so", ".a", ".class", ".jar", ".egg")

# OS / editor junk and Office locks, lower case.
_JUNK_NAMES = frozenset({".ds_store", "thumbs.db", "ehthumbs.db", "desktop.ini", "icon\r"})
_JUNK_PREFIXES = ("~$", ".~lock.", "._", ".#")
_JUNK_SUFFIXES = ("~", ".swp", ".swo", ".swx", ".tmp", ".crdownload", ".part")

# Dependency lock files: large machine-generated resolution output that would be
# re-indexed on every dependency bump. ``*.lock`` covers yarn, poetry, uv, Cargo, ….
_LOCK_NAMES = frozenset(
    {
        "package-lock.json",
        "npm-shrinkwrap.json",
        "pnpm-lock.yaml",
        "bun.lockb",
        "packages.lock.json",
        "gradle.lockfile",
        "go.sum",
    }
)


class SkipReason(StrEnum):
    """Why an entry was not kept; the keys of ``WalkResult.skipped``."""

    SENSITIVE = "sensitive"  # file or folder the policy never reads
    PRUNED = "pruned"  # VCS, dependency, cache or build folder
    HIDDEN = "hidden"  # dot-file or dot-folder
    JUNK = "junk"  # OS / editor junk, Office lock, dependency lock file
    IGNORED = "ignored"  # .kbignore or the source's ignore patterns
    UNSUPPORTED = "unsupported"  # not a supported format, or not a regular file
    TOO_LARGE = "too_large"  # over max_file_bytes
    OUTSIDE_ROOT_SYMLINK = "outside_root_symlink"  # symlink leading out of the root
    BROKEN_SYMLINK = "broken_symlink"  # symlink to nothing, or a loop the OS refuses
    REVISITED_DIR = "revisited_dir"  # folder already walked (symlink loop or second link)
    UNREADABLE_DIR = "unreadable_dir"  # folder that could not be listed
    UNREADABLE_FILE = "unreadable_file"  # file that vanished or could not be stat-ed


_INCLUDE_BY_NEGATION = "add a `!` line naming it to the folder's .kbignore to read it"
# What a skip means and how to read the entry anyway, per reason: shown beside the
# skipped paths by ``list`` and ``doctor``.
SKIP_HINTS: Mapping[str, str] = MappingProxyType(
    {
        SkipReason.SENSITIVE: "never read (keys, credentials, .env): rename a file that "
        "holds no secret",
        SkipReason.PRUNED: f"a build, dependency or cache folder: {_INCLUDE_BY_NEGATION} "
        "(e.g. `!build/`; version-control folders such as .git are never read)",
        SkipReason.HIDDEN: f"a dot-file or dot-folder: {_INCLUDE_BY_NEGATION} (e.g. `!.github/`)",
        SkipReason.JUNK: f"editor or OS junk, or a lock file: {_INCLUDE_BY_NEGATION}",
        SkipReason.IGNORED: "matched by .gitignore, .kbignore or an --ignore pattern: add "
        "`!PATH` to .kbignore, or `kb-mcp add DIR --no-gitignore`",
        SkipReason.UNSUPPORTED: "not text (binary content or a binary format), or not a "
        "regular file: cannot be read",
        SkipReason.TOO_LARGE: "over the size cap: split the file",
        SkipReason.OUTSIDE_ROOT_SYMLINK: "a symlink out of the folder: add its target as "
        "a source of its own",
        SkipReason.BROKEN_SYMLINK: "a symlink to nothing, or a loop",
        SkipReason.REVISITED_DIR: "reached a second time (a symlink loop or second "
        "link): read once",
        SkipReason.UNREADABLE_DIR: "could not be listed: fix its permissions",
        SkipReason.UNREADABLE_FILE: "vanished or could not be read: fix its permissions",
    }
)


@dataclass(frozen=True, slots=True)
class FoundFile:
    """A file the walk kept; ``path`` is as found (not resolved), ``rel`` is posix."""

    path: Path
    rel: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class WalkResult:
    """What a walk found and what it skipped.

    ``skipped`` counts entries by ``SkipReason`` value; a skipped folder counts once and
    its content is never looked at. ``skipped_paths`` names the first of them per reason,
    in path order (a folder's path ends with ``/``). ``over_cap`` files were found but
    fall beyond ``max_files``; ``beyond_cap`` names them (newest first).
    ``unreadable_dirs`` names the folders that could not be listed. A sync must treat
    both as still present.
    """

    files: tuple[FoundFile, ...]
    skipped: Mapping[str, int]
    over_cap: int
    total_bytes: int
    beyond_cap: tuple[str, ...] = ()
    unreadable_dirs: tuple[str, ...] = ()
    skipped_paths: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )


def walk_folder(
    root: Path,
    *,
    accept: Callable[[Path], bool],
    ignore_globs: Sequence[str] = (),
    max_files: int = 20_000,
    max_file_bytes: int = 50 * 1024 * 1024,
    gitignore: bool = False,
    examples: int | None = SKIPPED_EXAMPLES,
    known_format: Callable[[Path], bool] = lambda _path: True,
) -> WalkResult:
    """Walk ``root`` and return the files worth reading, newest first, at most ``max_files``.

    ``accept`` says whether a file can be read (its format, or its content);
    ``known_format`` whether its name alone says so: a file accepted for its content is
    also refused when it starts as a private key (``sensitive_file_reason``), since it
    was opened anyway. Unreadable folders and files are counted, never raised.
    ``gitignore``: honour ``.gitignore`` and ``.kbignore`` at every level
    (``IgnoreTree``) rather than the root ``.kbignore`` alone. ``examples``: how many
    skipped paths to name per reason (None: all). Raises ``NotFound`` /
    ``InvalidInput`` when the root is missing or not a folder, ``Refused`` when the
    root itself is sensitive, and ``InvalidInput`` for a broken ``.kbignore``.
    """
    if max_files < 1 or max_file_bytes < 1:
        raise InvalidInput(
            f"max_files and max_file_bytes must be positive, got {max_files}, {max_file_bytes}"
        )
    root = root.absolute()
    root_stat = _root_stat(root)
    rules = load_rules(root, ignore_globs, gitignore=gitignore)
    walk = _Walk(os.path.realpath(root), accept, rules, max_file_bytes, examples, known_format)
    walk.run(_Folder(root, "", root.name, (root_stat.st_dev, root_stat.st_ino)))
    return _result(walk, max_files)


def _root_stat(root: Path) -> os.stat_result:
    """Stat the root, refusing a sensitive one before anything below it is touched."""
    if reason := sensitive_reason(root) or sensitive_reason(Path(os.path.realpath(root))):
        raise Refused(
            f"refusing to walk {root}: {reason}", hint="kb-mcp never reads credential folders"
        )
    try:
        root_stat = root.stat()
    except FileNotFoundError as err:
        raise NotFound(f"folder {root} does not exist", hint="is the drive mounted?") from err
    except OSError as err:
        raise Unreadable(f"cannot read folder {root}: {err.strerror}") from err
    if not stat.S_ISDIR(root_stat.st_mode):
        raise InvalidInput(f"{root} is not a folder")
    return root_stat


def _load_ignore_file(root: Path) -> IgnoreRules:
    """The rules of ``<root>/.kbignore``; none when there is no such file."""
    candidate = root / IGNORE_FILE
    text = read_ignore_file(candidate, root)
    return IgnoreRules() if text is None else IgnoreRules.parse(text, origin=str(candidate))


def _result(walk: _Walk, max_files: int) -> WalkResult:
    """Sort newest first (path breaks ties, so the cap is deterministic) and cap."""
    ordered = sorted(walk.found, key=lambda f: (-f.mtime_ns, f.rel))
    kept, beyond = ordered[:max_files], ordered[max_files:]
    named = {reason: tuple(sorted(paths)[: walk.examples]) for reason, paths in walk.named.items()}
    return WalkResult(
        files=tuple(kept),
        skipped=MappingProxyType(dict(walk.skipped)),
        over_cap=len(beyond),
        total_bytes=sum(f.size for f in kept),
        beyond_cap=tuple(f.rel for f in beyond),
        unreadable_dirs=tuple(sorted(walk.unreadable_dirs)),
        skipped_paths=MappingProxyType(named),
    )


@dataclass(frozen=True, slots=True)
class _Folder:
    """A folder waiting to be listed: where it is, its rel prefix, its name, its identity.

    ``path`` is kept as a ``Path`` so each file's ``Path`` is built by joining one name
    to it, which costs half of parsing the full path string (measured: 2.7 vs 4.6 µs).
    """

    path: Path
    prefix: str  # rel path plus "/", or "" for the root
    name: str
    key: tuple[int, int]  # (st_dev, st_ino)
    judged_by_content: bool = False  # a ``build`` folder: kept only if it holds sources


@dataclass(slots=True)
class _Walk:
    """The mutable state of one walk; it never leaves ``walk_folder``.

    Folders wait in two stacks: real ones in ``pending``, symlinked ones in
    ``deferred``, which is drained only when ``pending`` is empty. A folder is marked
    visited when it is listed, so the first route to it wins and loops end.
    """

    root_real: str
    accept: Callable[[Path], bool]
    rules: Rules
    max_file_bytes: int
    examples: int | None = SKIPPED_EXAMPLES
    known_format: Callable[[Path], bool] = lambda _path: True
    found: list[FoundFile] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    named: dict[str, list[str]] = field(default_factory=dict)
    unreadable_dirs: list[str] = field(default_factory=list)
    visited: set[tuple[int, int]] = field(default_factory=set)
    pending: list[_Folder] = field(default_factory=list)
    deferred: list[_Folder] = field(default_factory=list)

    def run(self, root: _Folder) -> None:
        """Walk everything below ``root``."""
        self.pending.append(root)
        while self.pending or self.deferred:
            folder = (self.pending or self.deferred).pop()
            if folder.key in self.visited:
                self._skip(SkipReason.REVISITED_DIR, folder.prefix)
                continue
            self.visited.add(folder.key)
            self._list(folder)

    def _skip(self, reason: SkipReason, rel: str) -> None:
        """Count a skipped entry, and name it while it is among the first in path order.

        The names kept are the ``examples`` smallest paths: the list is cut back to them
        whenever it reaches twice that, so a folder of 100k skipped files costs a few
        sorts of twenty names, and the answer does not depend on listing order.
        """
        self.skipped[reason.value] += 1
        if self.examples == 0:
            return
        names = self.named.setdefault(reason.value, [])
        names.append(rel)
        if self.examples is not None and len(names) >= 2 * self.examples:
            names.sort()
            del names[self.examples :]

    def _unreadable_dir(self, rel: str) -> None:
        self._skip(SkipReason.UNREADABLE_DIR, rel + "/")
        self.unreadable_dirs.append(rel)

    def _list(self, folder: _Folder) -> None:
        """Visit the entries of one folder, unless it turns out to be generated."""
        try:
            with os.scandir(folder.path) as it:
                entries = list(it)
        except OSError:
            return self._unreadable_dir(folder.prefix.rstrip("/"))
        names = {e.name for e in entries}
        generated = folder.prefix and not _GENERATED_MARKERS.isdisjoint(names)
        if generated or (folder.judged_by_content and not _holds_doc_sources(names)):
            return self._skip(SkipReason.PRUNED, folder.prefix)
        for entry in entries:
            self._visit(entry, folder)

    def _visit(self, entry: os.DirEntry[str], folder: _Folder) -> None:
        """Route one entry to the folder or file rules, following a symlink if allowed."""
        target: os.stat_result | None = None
        if entry.is_symlink():
            target = self._follow(entry, folder)
            if target is None:
                return
            is_dir, is_file = stat.S_ISDIR(target.st_mode), stat.S_ISREG(target.st_mode)
        else:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = not is_dir and entry.is_file(follow_symlinks=False)
        if is_dir:
            self._visit_dir(entry, folder, target)
        else:
            self._visit_file(entry, folder, is_file, target)

    def _follow(self, entry: os.DirEntry[str], folder: _Folder) -> os.stat_result | None:
        """Stat a symlink's target if it may be followed; else count why and return None.

        Names are checked before the link is resolved, and the resolved path before
        its target is stat-ed, so a link into a credential folder is never followed.
        """
        name, rel = entry.name, folder.prefix + entry.name
        if sensitive_name_reason(name) or sensitive_folder_reason(name, folder.name):
            return self._skip(SkipReason.SENSITIVE, rel)
        if name.startswith("."):
            return self._skip(SkipReason.HIDDEN, rel)
        real = os.path.realpath(entry.path)
        if sensitive_reason(Path(real)):
            return self._skip(SkipReason.SENSITIVE, rel)
        if not _is_within(real, self.root_real):
            return self._skip(SkipReason.OUTSIDE_ROOT_SYMLINK, rel)
        try:
            return os.stat(real)
        except OSError:  # dangling, or a loop the OS gives up on
            return self._skip(SkipReason.BROKEN_SYMLINK, rel)

    def _visit_dir(
        self, entry: os.DirEntry[str], parent: _Folder, target: os.stat_result | None
    ) -> None:
        """Queue a folder unless a rule prunes it; symlinked ones wait for the real tree."""
        name, rel = entry.name, parent.prefix + entry.name
        if reason := dir_skip_reason(name, rel, parent.name, self.rules):
            return self._skip(reason, rel + "/")
        try:
            info = target if target is not None else entry.stat(follow_symlinks=False)
        except OSError:
            return self._unreadable_dir(rel)
        queue = self.pending if target is None else self.deferred
        judged = name in _JUDGED_BY_CONTENT and not _lifted(self.rules, rel, True)
        key = (info.st_dev, info.st_ino)
        queue.append(_Folder(parent.path / name, rel + "/", name, key, judged))

    def _visit_file(
        self,
        entry: os.DirEntry[str],
        parent: _Folder,
        is_file: bool,
        target: os.stat_result | None,
    ) -> None:
        """Keep a file unless a rule skips it; stat it only once the names pass."""
        name, rel = entry.name, parent.prefix + entry.name
        if reason := file_skip_reason(name, rel, self.rules):
            return self._skip(reason, rel)
        path = parent.path / name
        if not is_file:
            return self._skip(SkipReason.UNSUPPORTED, rel)
        known = self.known_format(path)
        by_content = not known or _named_for_secrets(name)
        if not by_content and not self.accept(path):
            return self._skip(SkipReason.UNSUPPORTED, rel)
        try:
            info = target if target is not None else entry.stat(follow_symlinks=False)
        except OSError:
            return self._skip(SkipReason.UNREADABLE_FILE, rel)
        if by_content and (reason := self._content_reason(path, info, known)):
            return self._skip(reason, rel)
        if info.st_size > self.max_file_bytes:
            return self._skip(SkipReason.TOO_LARGE, rel)
        self.found.append(FoundFile(path, rel, info.st_size, info.st_mtime_ns))

    def _content_reason(self, path: Path, info: os.stat_result, known: bool) -> SkipReason | None:
        """Why a file whose name cannot decide is skipped, by its first bytes: a private
        key, or a values file named for secrets (``sensitive_file_reason``); else, for a
        format its name does not give, content that is not text (``accept``).

        Kept per path, size and mtime (``_CONTENT_VERDICTS``): a re-sync, which the
        watcher starts after every save, would otherwise open each such file again.
        """
        key = (str(path), info.st_size, info.st_mtime_ns)
        if (kept := _CONTENT_VERDICTS.get(key, _UNSEEN)) is not _UNSEEN:
            return kept
        reason = None
        if sensitive_file_reason(path):
            reason = SkipReason.SENSITIVE  # a key saved as ``deploy``, a values file
        elif not known and not self.accept(path):
            reason = SkipReason.UNSUPPORTED
        if len(_CONTENT_VERDICTS) >= NAME_CACHE_SIZE:
            _CONTENT_VERDICTS.clear()
        _CONTENT_VERDICTS[key] = reason
        return reason


# ``policy.named_for_secrets``, asked of every file name a walk keeps, cached as the
# other name rules are (``_name_skip_reason``).
_named_for_secrets = lru_cache(maxsize=NAME_CACHE_SIZE)(named_for_secrets)


def _holds_doc_sources(names: set[str]) -> bool:
    """Whether a ``build`` folder holding ``names`` is documentation sources: a Sphinx
    ``conf.py`` (or ``mkdocs.yml``, an index page) or reST / Markdown / AsciiDoc pages,
    and nothing a build writes (``_BUILD_OUTPUT_NAMES``, compiled files)."""
    for name in names:
        if name in _BUILD_OUTPUT_NAMES or name.startswith(_BUILD_OUTPUT_PREFIXES):
            return False
        if name.lower().endswith(_BUILD_OUTPUT_SUFFIXES):
            return False
    return not _DOC_SOURCE_NAMES.isdisjoint(names) or any(
        name.lower().endswith(_DOC_SOURCE_SUFFIXES) for name in names
    )


def dir_skip_reason(name: str, rel: str, parent: str, rules: Rules) -> SkipReason | None:
    """Why the folder ``name`` at ``rel`` (in folder ``parent``) is not walked, or None.

    A ``build`` folder passes here: what it holds decides (``_holds_doc_sources``). A
    pruned or hidden folder a ``!`` line names is walked."""
    if sensitive_folder_reason(name, parent):
        return SkipReason.SENSITIVE
    reason = None
    if (name in PRUNED_DIRS and name not in _JUDGED_BY_CONTENT) or name.endswith(_METADATA_DIRS):
        reason = SkipReason.PRUNED
    elif name.startswith("."):
        reason = SkipReason.HIDDEN
    return _overruled(reason, rules, rel, True, liftable=name not in _NEVER_LIFTED)


def file_skip_reason(name: str, rel: str, rules: Rules) -> SkipReason | None:
    """Why the file ``name`` at ``rel`` is not kept, by its name alone, or None. A
    hidden or junk file a ``!`` line names is kept; a sensitive one never is."""
    reason = _name_skip_reason(name)
    if reason is SkipReason.SENSITIVE:
        return reason
    return _overruled(reason, rules, rel, False, liftable=True)


def _overruled(
    reason: SkipReason | None, rules: Rules, rel: str, is_dir: bool, *, liftable: bool
) -> SkipReason | None:
    """A name rule's ``reason`` as the ignore rules leave it: a ``!`` line of kb-mcp's
    own rules lifts it (when ``liftable``), and an entry no name rule skips is ignored
    when the rules exclude it."""
    if not rules:
        return reason
    if reason is not None:
        return None if liftable and _lifted(rules, rel, is_dir) else reason
    return SkipReason.IGNORED if rules.verdict(rel, is_dir) else None


def _lifted(rules: Rules, rel: str, is_dir: bool) -> bool:
    """Whether a ``!`` line of a ``.kbignore`` or an ``--ignore`` pattern names the entry."""
    return bool(rules) and rules.verdict(rel, is_dir, own_only=True) is False


@lru_cache(maxsize=NAME_CACHE_SIZE)
def _name_skip_reason(name: str) -> SkipReason | None:
    """The rules that depend on a file's name only: sensitive, junk, hidden.

    Cached: a re-sync asks them of the same names again, and they were a third of the
    walk's cost (10k files: 0.4 of 2.0 s under cProfile); the rules are pure functions
    of the name, so a cached verdict is the verdict. A name refused only for a secret
    word passes: its content decides (``named_for_secrets``).
    """
    if sensitive_name_reason(name) and not named_for_secrets(name):
        return SkipReason.SENSITIVE
    if _is_junk(name.lower()):
        return SkipReason.JUNK
    if name.startswith("."):
        return SkipReason.HIDDEN
    return None


def load_rules(root: Path, ignore_globs: Sequence[str] = (), *, gitignore: bool = False) -> Rules:
    """The ignore rules a walk of ``root`` applies: with ``gitignore``, every level's
    ``.gitignore`` and ``.kbignore`` under ``ignore_globs`` (``IgnoreTree``); without it,
    as before issue 20, the root ``.kbignore`` then ``ignore_globs``."""
    if gitignore:
        return IgnoreTree(root, tuple(ignore_globs))
    return _load_ignore_file(root).followed_by(IgnoreRules.from_globs(ignore_globs))


def path_skip_reason(
    root: Path,
    rel: str,
    rules: Rules,
    accept: Callable[[Path], bool],
    *,
    is_dir: bool | None,
) -> SkipReason | None:
    """Why a walk would not keep the entry at ``rel``, judged by names alone, or None.

    The file watcher asks this of every changed path, so an edit under ``node_modules/``,
    a dot-folder or a ``.kbignore`` pattern wakes no sync. ``is_dir`` is None for a path
    that is gone: it is judged as a file, or as a folder when its name has no suffix and
    no reader (a folder called ``v1.2`` moved away waits for the interval sync). A
    ``build`` folder above the path is listed, as the walk lists it, so a build writing
    into its output wakes nothing while an edit of sources kept there does.
    Symlinks, generated-folder markers and sizes stay the walk's to judge.
    """
    parts = rel.split("/")
    parent = root.name
    for i, name in enumerate(parts[:-1]):
        folder = "/".join(parts[: i + 1])
        if reason := dir_skip_reason(name, folder, parent, rules):
            return reason
        if name in _JUDGED_BY_CONTENT and not _listed_doc_sources(root / folder):
            return SkipReason.PRUNED
        parent = name
    name = parts[-1]
    as_dir = dir_skip_reason(name, rel, parent, rules)
    as_file = file_skip_reason(name, rel, rules) or (
        None if accept(Path(name)) else SkipReason.UNSUPPORTED
    )
    if is_dir is None:  # gone: a folder only if its name has no suffix ("notes", not "a.png")
        maybe_dir = "." not in name.lstrip(".") and as_file == SkipReason.UNSUPPORTED
        return as_dir if maybe_dir else as_file
    return as_dir if is_dir else as_file


def _listed_doc_sources(folder: Path) -> bool:
    """``_holds_doc_sources`` of a folder on disk; False when it cannot be listed."""
    try:
        return _holds_doc_sources(set(os.listdir(folder)))
    except OSError:
        return False


def _is_junk(lower: str) -> bool:
    """OS / editor junk, an Office or editor lock, or a dependency lock file."""
    return (
        lower in _JUNK_NAMES
        or lower in _LOCK_NAMES
        or lower.endswith(".lock")
        or lower.startswith(_JUNK_PREFIXES)
        or lower.endswith(_JUNK_SUFFIXES)
        or (len(lower) > 1 and lower[0] == "#" and lower[-1] == "#")  # Emacs autosave
    )


def _is_within(path: str, root: str) -> bool:
    """Whether resolved ``path`` is ``root`` or below it (both already real paths)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
