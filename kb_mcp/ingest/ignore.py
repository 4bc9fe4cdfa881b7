"""Ignore rules for folder sources: a documented subset of gitignore.

A folder source honours one ignore file, ``.kbignore`` at the source root, plus the
ignore patterns given when the source was registered. Both use the syntax below,
one pattern per line. Paths are matched relative to the source root, with ``/`` as
the separator, case-sensitively.

Supported:

- ``# comment`` lines and blank lines are skipped; trailing spaces are dropped.
- ``*`` matches any run of characters except ``/``; ``?`` matches one such character.
- ``[abc]``, ``[a-z]`` and ``[!abc]`` match one character from (or not from) a set.
- ``**`` spans folders: ``**/logs`` matches ``logs`` at any depth, ``build/**``
  matches everything inside ``build``, ``a/**/b`` matches ``a/b``, ``a/x/b``, ``a/x/y/b``.
- A trailing ``/`` matches folders only: ``drafts/`` skips a folder, not a file
  called ``drafts``.
- A pattern without a ``/`` matches a name at any depth (``*.log``, ``scratch``).
  A pattern with a ``/`` at the start or in the middle is anchored at the source
  root: ``/todo.md`` and ``docs/old`` match only there.
- ``!pattern`` re-includes what an earlier line excluded; the last matching line
  wins.
- ``\\#`` and ``\\!`` at the start of a pattern stand for a literal ``#`` or ``!``; a
  backslash before any other character makes it literal too.

Not supported, compared with git: ``.gitignore`` files are not read (a folder that
is a git repository keeps its ignored files indexable until you add a ``.kbignore``),
ignore files in subfolders are not read, and, as in git, a file cannot be
re-included when a folder above it is excluded (the walk never enters that folder).

These rules are those of a source registered before ``.gitignore`` was read, kept as
they were: a file that stops being found is archived on the next sync, so honouring
``.gitignore`` implicitly would silently drop documents from every existing source
that happens to be a repository. Sources added since (and any the user opts in with
``kb-mcp add DIR --gitignore``) read ``.gitignore`` and ``.kbignore`` at every level
with git's full semantics instead (``ingest/gitignore.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kb_mcp.errors import InvalidInput

__all__ = ["IgnoreRules"]


@dataclass(frozen=True, slots=True)
class IgnoreRule:
    """One compiled pattern line: ``regex`` matches a whole root-relative path."""

    pattern: str
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    """An ordered list of compiled rules; an empty list ignores nothing."""

    rules: tuple[IgnoreRule, ...] = ()

    @classmethod
    def parse(cls, text: str, *, origin: str = ".kbignore") -> IgnoreRules:
        """Compile the lines of an ignore file, once.

        ``origin`` names the file in error messages. A line that cannot be compiled
        raises ``InvalidInput`` naming that line: dropping it silently would index
        files the user asked to leave out.
        """
        rules = (
            _compile_line(line, f"{origin} line {n}") for n, line in enumerate(text.splitlines(), 1)
        )
        return cls(tuple(rule for rule in rules if rule is not None))

    @classmethod
    def from_globs(cls, globs: Iterable[str]) -> IgnoreRules:
        """Compile ignore patterns given as a list; each one reads like an ignore-file line."""
        rules = (_compile_line(glob, f"ignore pattern {glob!r}") for glob in globs)
        return cls(tuple(rule for rule in rules if rule is not None))

    def followed_by(self, other: IgnoreRules) -> IgnoreRules:
        """These rules, then ``other``'s; on a tie ``other`` wins, as later lines do."""
        return IgnoreRules(self.rules + other.rules)

    def ignores(self, rel_path: str, is_dir: bool) -> bool:
        """Whether ``rel_path`` (posix, relative to the root) is excluded.

        A path is also excluded when a folder above it is, and no ``!`` line can
        re-include it then: the walk never enters an excluded folder.
        """
        parts = rel_path.split("/")
        for depth in range(1, len(parts)):
            if self.ignores_entry("/".join(parts[:depth]), is_dir=True):
                return True
        return self.ignores_entry(rel_path, is_dir)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def ignores_entry(self, rel_path: str, is_dir: bool) -> bool:
        """Whether the rules exclude this entry itself, parents not considered.

        This is the walk's form: it checks each folder before entering it, so by the
        time an entry is seen no folder above it is excluded.
        """
        return self.verdict(rel_path, is_dir) is True

    def verdict(self, rel_path: str, is_dir: bool, *, own_only: bool = False) -> bool | None:
        """True: excluded; False: kept by a ``!`` line; None: no line matches. The last
        matching rule decides, so the rules are scanned from the end. (``own_only`` is
        for ``IgnoreTree``'s signature: every rule here is kb-mcp's own.)"""
        for rule in reversed(self.rules):
            if (is_dir or not rule.dir_only) and rule.regex.match(rel_path):
                return not rule.negated
        return None


def _compile_line(line: str, where: str) -> IgnoreRule | None:
    """One pattern line → a rule, or None for blank and comment lines."""
    text = _strip_trailing_spaces(line.rstrip("\r\n"))
    if not text or text.startswith("#"):
        return None
    negated = text.startswith("!")
    body = text[1:] if negated else text
    dir_only = body.endswith("/") and not body.endswith("\\/")
    body = body.rstrip("/") if dir_only else body
    # Gitignore's anchoring rule: a slash anywhere but at the end ties the pattern
    # to the root; without one, the pattern is a name that may sit at any depth.
    anchored = "/" in body
    body = body.removeprefix("/")
    if not body:
        return None
    prefix = "" if anchored else "(?:.*/)?"
    try:
        regex = re.compile(f"{prefix}{_translate_path(body)}\\Z", re.DOTALL)
    except re.error as err:
        raise InvalidInput(
            f"{where}: cannot use pattern {text!r}: {err}",
            hint="fix or remove that pattern; the supported syntax is a gitignore subset",
        ) from err
    return IgnoreRule(pattern=text, regex=regex, negated=negated, dir_only=dir_only)


def _strip_trailing_spaces(text: str) -> str:
    """Drop trailing spaces, keeping one escaped as ``\\ `` (git does the same)."""
    while text.endswith(" ") and not text.endswith("\\ "):
        text = text[:-1]
    return text


def _translate_path(pattern: str) -> str:
    """Translate a slash-separated pattern to a regex, giving ``**`` segments their meaning."""
    segments = _collapse_globstars(pattern.split("/"))
    last = len(segments) - 1
    out: list[str] = []
    for i, segment in enumerate(segments):
        if segment == "**":
            out.append(_globstar(first=i == 0, last=i == last))
            continue
        if i > 0 and segments[i - 1] != "**":
            out.append("/")
        out.append(_translate_segment(segment))
    return "".join(out)


def _collapse_globstars(segments: list[str]) -> list[str]:
    """``a/**/**/b`` means ``a/**/b``; merging runs keeps the translation simple."""
    out: list[str] = []
    for segment in segments:
        if not (segment == "**" and out and out[-1] == "**"):
            out.append(segment)
    return out


def _globstar(*, first: bool, last: bool) -> str:
    """The regex for a whole ``**`` segment, by where it stands in the pattern."""
    if first and last:
        return ".*"
    if first:
        return "(?:.*/)?"  # leading **/: any folders, or none
    if last:
        return "/.+"  # trailing /**: everything inside, not the folder itself
    return "/(?:.*/)?"  # middle /**/: zero or more folders


def _translate_segment(segment: str) -> str:
    """Translate one path segment: ``*``, ``?``, ``[...]`` and backslash escapes."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "\\" and i + 1 < len(segment):
            out.append(re.escape(segment[i + 1]))
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
            while i + 1 < len(segment) and segment[i + 1] == "*":
                i += 1
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := _class_end(segment, i)) > 0:
            out.append(_translate_class(segment[i + 1 : end]))
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _class_end(segment: str, start: int) -> int:
    """Index of the ``]`` closing the class opened at ``start``, or -1 (then ``[`` is literal).

    A ``]`` right after ``[`` or ``[!`` belongs to the set, as in shell globs.
    """
    i = start + 1
    if i < len(segment) and segment[i] in "!^":
        i += 1
    if i < len(segment) and segment[i] == "]":
        i += 1
    return segment.find("]", i)


def _translate_class(body: str) -> str:
    """``!abc`` / ``a-z`` → a regex set that never matches ``/``."""
    negated = body[:1] in ("!", "^")
    body = body[1:] if negated else body
    members = "".join("-" if char == "-" else re.escape(char) for char in body)
    return f"[^/{members}]" if negated else f"[{members}]"
