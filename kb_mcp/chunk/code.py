"""Source code → chunks cut at top-level definitions, so a citation lands on a function.

- Python is cut where a top-level ``def`` / ``async def`` / ``class`` starts (its first
  decorator), found by a scan of strings, comments, brackets and continuation lines (not
  ``ast``: see ``_python_starts``). Top-level statements between definitions form
  segments of their own. Source whose strings or brackets do not close falls back to the
  line heuristic below; the scan does not check the grammar, so Python 2 is cut as
  Python 3 is.
- Other known languages use a line heuristic, kept simple on purpose: a definition starts
  at a non-indented line that opens with optional modifiers (``export``, ``pub``,
  ``public``, ``static``, ``async`` …) and a definition keyword (``function``, ``class``,
  ``fn``, ``func``, ``impl``, ``struct``, ``interface``, ``type``, ``enum``, ``def`` …), or
  that binds a function (``const f = (`` / ``= async`` / ``=>``). C and C++ add a
  signature rule: ``name(`` on a non-indented line not ending in ``;``, taking along a
  return-type line above it (``static int`` / ``helper(int x)``). A definition ends where
  the next one starts.
- Comment, decorator and attribute lines directly above a definition belong to it.
- Everything before the first definition (imports, module docstring) is the preamble and
  never shares a chunk with a definition. Source with no definitions, or in an unknown
  language, is all preamble: it is packed by blank-line-separated blocks.
- Consecutive definitions that fit are packed together up to ``budget``. A definition over
  budget is split at blank lines inside it, then between lines, with overlap between its
  pieces; each piece has ``heading_path == (name,)``, e.g. ``("def load_settings",)``.
  Only a line over the hard cap (``pack.chunk_cap``: minified or generated code) is cut
  inside itself, its pieces sharing that line's span. A chunk holding several definitions
  has ``heading_path == ()``.
- Text and line spans are exact, as in ``chunk.markdown``.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass

from kb_mcp.chunk.base import Chunk
from kb_mcp.chunk.pack import (
    DEFAULT_BUDGET_CHARS,
    DEFAULT_OVERLAP_CHARS,
    LineIndex,
    Unit,
    cap_spans,
    index_lines,
    pack_units,
)

_SUFFIX_LANGUAGE = {
    **dict.fromkeys((".py", ".pyi", ".pyw"), "python"),
    **dict.fromkeys((".js", ".mjs", ".cjs", ".jsx"), "javascript"),
    **dict.fromkeys((".ts", ".mts", ".cts", ".tsx"), "typescript"),
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    **dict.fromkeys((".kt", ".kts"), "kotlin"),
    ".swift": "swift",
    **dict.fromkeys((".c", ".h"), "c"),
    **dict.fromkeys((".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx"), "cpp"),
    ".cs": "csharp",
    ".php": "php",
    ".rb": "ruby",
    **dict.fromkeys((".scala", ".sc"), "scala"),
    ".lua": "lua",
    **dict.fromkeys((".sh", ".bash", ".zsh"), "shell"),
    ".sql": "sql",
}
# Languages whose definitions the line heuristic finds; the rest are packed by blocks.
_HEURISTIC_LANGUAGES = frozenset(_SUFFIX_LANGUAGE.values()) - {"sql"}
_SIGNATURE_LANGUAGES = frozenset({"c", "cpp"})

_MODIFIERS = (
    r"(?:(?:export|default|pub(?:\([\w ]+\))?|public|private|protected|internal|static|final"
    r"|abstract|sealed|open|override|async|unsafe|extern(?: \"C\")?|inline|virtual|data"
    r"|partial|declare|local|case|const(?= fn))\s+)*"
)
_DEFINITION = re.compile(
    _MODIFIERS + r"(?P<kw>function\*?|class|interface|type|enum|struct|union|trait|impl|fn|fun"
    r"|func|def|module|object|namespace|record|protocol|extension|mod)(?![\w$])\s*(?:<[^>]*>\s*)?"
    r"(?:\([^)]*\)\s*)?(?P<name>[A-Za-z_$][\w$:.]*)"
)
_BINDING = re.compile(
    _MODIFIERS + r"(?P<kw>const|let|var)\s+(?P<name>[A-Za-z_$][\w$]*)\s*(?::[^=]*)?="
    r"\s*(?:async\b\s*)?(?:function\b|\(|[A-Za-z_$][\w$]*\s*=>)"
)
_SIGNATURE = re.compile(
    r"(?!(?:return|if|else|for|while|switch|do|case|goto|typedef|using)\b)"
    r"(?:[A-Za-z_][\w \t*&:<>,~]*?\b)?(?P<name>~?[A-Za-z_][\w:~]*)\s*\((?!.*;\s*$)"
)
# A line holding only a return type, as GNU and PostgreSQL style put above the function name.
_RETURN_TYPE = re.compile(r"[A-Za-z_][\w \t*&:<>,]*$")
_PYTHON_DEFINITION = re.compile(r"(?P<kw>async\s+def|def|class)\s+(?P<name>\w+)")
# Lines that belong to the definition below them: comments, decorators, annotations,
# attributes (#[…], [Attr]) and C++ template headers.
_ATTACHED = ("//", "/*", "*", "#", "@", "[", "--", "template")
_ATTACHED_PYTHON = ("#", "@")


@dataclass(frozen=True, slots=True)
class _Segment:
    first: int  # 0-based line indices, inclusive
    last: int
    label: str | None  # "def name" for a definition, None for other top-level code


def language_for_suffix(suffix: str) -> str | None:
    """The language name ``split_code`` understands for a file suffix, or None if not code."""
    return _SUFFIX_LANGUAGE.get(suffix.lower())


def split_code(
    text: str,
    language: str | None,
    *,
    budget: int = DEFAULT_BUDGET_CHARS,
    overlap: int = DEFAULT_OVERLAP_CHARS,
) -> list[Chunk]:
    """Chunks of source ``text`` in file order; ``[]`` for a blank file.

    ``language`` is a name from ``language_for_suffix``; any other value (or None) packs
    blank-line blocks. The defaults are the Markdown ones so that chunk sizes stay comparable
    across a mixed corpus.
    """
    if budget < 1 or overlap < 0:
        raise ValueError(f"budget must be ≥ 1 and overlap ≥ 0, got {budget} and {overlap}")
    index = index_lines(text)
    preamble, segments = _segments(index, _definition_starts(text, index, language))
    spans = [((), *span) for span in _pack_blocks(text, index, preamble, budget, overlap)]
    run: list[_Segment] = []  # consecutive segments within budget, packed together
    for segment in segments:
        if index.end(segment.last) - index.starts[segment.first] <= budget:
            run.append(segment)
            continue
        spans.extend(_pack_run(text, index, run, budget))
        run = []
        path = (segment.label,) if segment.label else ()
        spans.extend((path, *span) for span in _pack_blocks(text, index, segment, budget, overlap))
    spans.extend(_pack_run(text, index, run, budget))
    return [
        Chunk(n, path, index.line_of(start), index.line_of(end - 1), text[start:end])
        for n, (path, start, end) in enumerate(cap_spans(text, index, spans, budget))
    ]


def _definition_starts(
    text: str, index: LineIndex, language: str | None
) -> list[tuple[int, str | None]]:
    """``(line index, label)`` where each top-level definition (or other statement) starts."""
    parsed = _python_starts(text, index) if language == "python" else None
    if parsed is not None or language not in _HEURISTIC_LANGUAGES:
        return parsed or []
    attached = _ATTACHED_PYTHON if language == "python" else _ATTACHED
    starts: list[tuple[int, str | None]] = []
    for i, line in enumerate(index.lines):
        label = _heuristic_label(line, language) if line[:1].strip() else None
        if label is None:
            continue
        floor = starts[-1][0] + 1 if starts else 0
        typed = language in _SIGNATURE_LANGUAGES and i > floor
        first = i - 1 if typed and _RETURN_TYPE.match(index.lines[i - 1]) else i
        starts.append((_attach_leading(index.lines, first, floor, attached), label))
    return starts


def _heuristic_label(line: str, language: str) -> str | None:
    """``"kw name"`` if the non-indented ``line`` opens a definition, else None."""
    if language == "python":
        match = _PYTHON_DEFINITION.match(line)
    else:
        match = _DEFINITION.match(line) or _BINDING.match(line)
    if match:
        return f"{' '.join(match['kw'].split())} {match['name']}"
    if language in _SIGNATURE_LANGUAGES and (signature := _SIGNATURE.match(line)):
        return signature["name"]
    return None


# One token of Python source that decides where a statement may start: a string (whole,
# triple-quoted or not), a string left open, a comment, a backslash continuation, a
# bracket, or a line break (``line``: before a first column that is not blank and not a
# comment). Led by one class of those characters, each told apart behind it, so ``re``
# skips everything else in C (alternatives led by groups of their own made it try every
# position: 5.1 s for the 62 MB of Python in the 10k real folder, not 2.7 s).
_SINGLE = r"[^'\\\r\n]*(?:\\(?:\r\n|[\s\S])[^'\\\r\n]*)*'"
_TRIPLE = r"''[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*'''"
_PYTHON_TOKEN = re.compile(
    r"[\"'#\\\r\n()\[\]{}]"
    rf"(?:(?<=')(?:{_TRIPLE}|{_SINGLE})"
    rf"|(?<=\")(?:{_TRIPLE.replace(chr(39), chr(34))}|{_SINGLE.replace(chr(39), chr(34))})"
    r"|(?P<unclosed>(?<=['\"]))"
    r"|(?<=#)[^\r\n]*"
    r"|(?<=\\)(?:\r\n|\r|\n)?"
    r"|(?P<open>(?<=[(\[{]))|(?P<close>(?<=[)\]}]))"
    r"|(?:(?<=\r)\n)?(?:(?P<line>(?:[ \t]*\f)*)(?=[^\s#]))?"
    r")"
)
# The first line's statement, if it starts one (a form feed sets the column back to 0).
_FIRST_STATEMENT = re.compile(r"(?:[ \t]*\f)*(?=[^\s#])")
# Clauses that go on with the statement above them, at its column.
_CLAUSE = re.compile(r"(?:else|elif|except|finally)(?!\w)")


def _logical_lines(text: str) -> list[tuple[int, int]] | None:
    """``(line start, first character)`` of each top-level logical line, lines ending at
    ``\\r\\n``, ``\\r`` or ``\\n`` as Python's tokenizer ends them; None when a string or
    a bracket is left open (or closed unopened), or the source holds a NUL.

    A logical line starts on a line whose first column is not blank, not a comment, not
    inside a string or a bracket, and not after a backslash continuation."""
    if "\0" in text:
        return None
    first = _FIRST_STATEMENT.match(text)
    lines = [(0, first.end())] if first else []
    depth = 0
    for token in _PYTHON_TOKEN.finditer(text):
        kind = token.lastgroup
        if kind is None:
            continue
        if kind == "open":
            depth += 1
        elif kind == "close":
            depth -= 1
            if depth < 0:
                return None
        elif kind == "line":
            if depth == 0:
                lines.append((token.start("line"), token.end()))
        else:  # a quote no string closes
            return None
    return None if depth else lines


def _python_starts(text: str, index: LineIndex) -> list[tuple[int, str | None]] | None:
    """Top-level statement starts, from a scan of strings, comments, brackets and line
    continuations (``_logical_lines``); None when the scan finds the source unbalanced.

    Not ``ast``: parsing the whole module was 85% of chunking's CPU over a folder of
    Python (14.8 of 17.5 s for 7,878 files), and the cut needs only where each top-level
    statement starts and whether it defines something. A decorated definition starts at
    its first decorator; ``else`` / ``elif`` / ``except`` / ``finally`` go on with the
    statement above. Offsets map to citation lines, which end at ``\\n`` only.
    """
    lines = _logical_lines(text)
    if lines is None:
        return None
    starts: list[tuple[int, str | None]] = []
    decorated: int | None = None  # where the decorators of the definition below begin
    for line_start, at in lines:
        if _CLAUSE.match(text, at):
            continue
        if text.startswith("@", at):
            decorated = line_start if decorated is None else decorated
            continue
        start = line_start if decorated is None else decorated
        decorated = None
        definition = _PYTHON_DEFINITION.match(text, at)
        label = f"{' '.join(definition['kw'].split())} {definition['name']}" if definition else None
        if label is None and (not starts or starts[-1][1] is None):
            continue  # preamble, or more of the same run of top-level code
        first = index.line_of(start) - 1
        floor = starts[-1][0] + 1 if starts else 0
        if label is not None:
            first = _attach_leading(index.lines, first, floor, _ATTACHED_PYTHON)
        starts.append((first, label))
    return starts


def _attach_leading(lines: list[str], i: int, floor: int, attached: tuple[str, ...]) -> int:
    """Move a definition's start up over the comment / decorator lines directly above it."""
    while i > floor and lines[i - 1].strip() and lines[i - 1].lstrip().startswith(attached):
        i -= 1
    return i


def _segments(
    index: LineIndex, starts: list[tuple[int, str | None]]
) -> tuple[_Segment | None, list[_Segment]]:
    """The preamble (None if blank), then one segment per start; no trailing blank lines."""
    bounds = [(0, None), *starts]
    ends = [*(first for first, _ in starts), len(index.lines)]
    segments: list[_Segment | None] = []
    for (first, label), following in zip(bounds, ends, strict=True):
        last = following - 1
        while last >= first and not index.lines[last].strip():
            last -= 1
        segments.append(_Segment(first, last, label) if last >= first else None)
    return segments[0], [s for s in segments[1:] if s is not None]


def _pack_run(
    text: str, index: LineIndex, run: list[_Segment], budget: int
) -> list[tuple[tuple[str, ...], int, int]]:
    """Whole segments packed up to ``budget`` (no overlap: each is complete on its own)."""
    units = [Unit(index.starts[s.first], index.end(s.last)) for s in run]
    unit_starts = [u.start for u in units]
    spans: list[tuple[tuple[str, ...], int, int]] = []
    for start, end in pack_units(text, units, budget, overlap=0):
        inside = run[bisect_left(unit_starts, start) : bisect_left(unit_starts, end)]
        label = inside[0].label if len(inside) == 1 else None
        spans.append(((label,) if label else (), start, end))
    return spans


def _pack_blocks(
    text: str, index: LineIndex, segment: _Segment | None, budget: int, overlap: int
) -> list[tuple[int, int]]:
    """One segment packed by blank-line-separated blocks; a block over budget, by lines."""
    if segment is None:
        return []
    units: list[Unit] = []
    for first, last in _nonblank_runs(index.lines, segment.first, segment.last):
        start, end = index.starts[first], index.end(last)
        if end - start <= budget:
            units.append(Unit(start, end))
        else:
            units.extend(Unit(index.starts[k], index.end(k)) for k in range(first, last + 1))
    return pack_units(text, units, budget, overlap)


def _nonblank_runs(lines: list[str], first: int, last: int) -> list[tuple[int, int]]:
    """``(first, last)`` line indices of each run of non-blank lines in ``first..last``."""
    runs: list[tuple[int, int]] = []
    start = None
    for i in range(first, last + 1):
        if lines[i].strip():
            start = i if start is None else start
        elif start is not None:
            runs.append((start, i - 1))
            start = None
    if start is not None:
        runs.append((start, last))
    return runs
