"""Pass-through formats: Markdown, plain text, reST, AsciiDoc, data files and source code.

These are stored exactly as decoded, so line N of the stored text is line N of
the file and a citation opens on the right line in an editor. Only the kind,
the language (for code) and the title (for Markdown) are worked out here.
Minified and huge generated files are refused (``readers.generated``).
"""

from __future__ import annotations

import re

from kb_mcp.chunk.asciidoc import document_title, looks_like_asciidoc
from kb_mcp.chunk.markdown import atx_heading
from kb_mcp.ingest.decode import decode_bytes
from kb_mcp.ingest.readers.base import Converted
from kb_mcp.ingest.readers.generated import check_not_generated
from kb_mcp.text.frontmatter import Frontmatter, cap_title, split_frontmatter

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})
PLAIN_SUFFIXES = frozenset({".txt", ".text", ".org"})
RST_SUFFIXES = frozenset({".rst", ".rest"})
ASCIIDOC_SUFFIXES = frozenset({".adoc", ".asciidoc"})
DATA_SUFFIXES = frozenset(
    {".csv", ".tsv", ".json", ".jsonl", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".xml"}
)

# Suffix (or exact file name, for files that have none) → language name.
# Names follow the common Markdown fence names, one name per language.
CODE_LANGUAGES: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".tsx": "typescript",
    ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".kts": "kotlin",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp", ".cs": "csharp",
    ".rb": "ruby", ".php": "php", ".swift": "swift", ".scala": "scala",
    ".sh": "shell", ".bash": "shell", ".zsh": "shell",
    ".sql": "sql", ".lua": "lua", ".r": "r", ".m": "objective-c", ".pl": "perl",
    ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml",
    ".clj": "clojure", ".dart": "dart", ".vue": "vue", ".svelte": "svelte",
    ".css": "css", ".scss": "scss", ".proto": "protobuf", ".graphql": "graphql",
    "Makefile": "make", "makefile": "make", "GNUmakefile": "make", "Dockerfile": "dockerfile",
}  # fmt: skip

_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def read_markdown(data: bytes) -> Converted:
    """Markdown as is, titled by its frontmatter ``title:`` or first ``# `` heading.

    Frontmatter that ``split_frontmatter`` ignores (an alias bomb, broken YAML) leaves the
    file indexed, with the reason in ``notes``.
    """
    text, inlined = strip_data_uris(decode_bytes(data))
    check_not_generated(text)
    front = split_frontmatter(text)
    notes = (front.problem,) if front.problem else ()
    if inlined:
        notes += (f"{inlined} embedded data: URI payload(s) left out of the index",)
    return Converted(text, "markdown", None, _title(front), exact=not inlined, notes=notes)


# An image (or font, or file) pasted into a note as a data: URI. Its payload is machine
# text: kept, one 400 KB line refused the whole note as "minified" (outside run after
# issue 7), and its base64 would match searches at random. Only payloads this long go:
# a short inline icon is harmless.
_DATA_URI = re.compile(r"(data:[\w.+-]+/[\w.+-]+(?:;[\w=.+-]+)*;base64,)[A-Za-z0-9+/=]{256,}")
DATA_URI_MARK = "…"


def strip_data_uris(text: str) -> tuple[str, int]:
    """``text`` with long base64 data: URI payloads cut to a mark; how many were cut.

    Line breaks inside a payload are not matched (a payload is one run), so the line
    count, and every citation, stays as in the file.
    """
    return _DATA_URI.subn(lambda m: m.group(1) + DATA_URI_MARK, text)


def read_plain(data: bytes) -> Converted:
    """Plain text and lightweight markup other than Markdown (org), as is.

    A ``.txt`` file written in reST (Django's documentation, Sphinx's ``_sources/*.rst.txt``)
    is chunked as reST: read as Markdown, its ``~~~~`` section underlines open code fences
    and swallow the sections after them, so their titles never reach the heading path.
    One written in AsciiDoc (git's manual pages) is read as AsciiDoc, for the same reason:
    its ``----`` listing delimiters are Markdown setext underlines.
    """
    return plain_converted(_decode(data))


def plain_converted(text: str) -> Converted:
    """``text`` of a plain-text file as the kind its content is written in."""
    if looks_like_rst(text):
        return Converted(text, "rst", None, None, exact=True)
    if looks_like_asciidoc(text):
        return asciidoc_converted(text)
    return Converted(text, "text", None, None, exact=True)


def read_asciidoc(data: bytes) -> Converted:
    """AsciiDoc as is, titled by its document title; chunked by AsciiDoc sections."""
    return asciidoc_converted(_decode(data))


def asciidoc_converted(text: str) -> Converted:
    """``text`` of an AsciiDoc file, titled by its document title."""
    title = document_title(text)
    return Converted(text, "asciidoc", None, cap_title(title) if title else None, exact=True)


# One repeated docutils adornment character, a section title's underline (or overline).
_RST_ADORNMENT = re.compile(r"([=\-~^\"'`#*+:.])\1+[ \t]*")
# Explicit markup (``.. note::``, ``.. _target:``) and roles (``:doc:`x```): what plain
# text and Markdown do not have. A role starts where a run of name characters does: tried
# at every colon of a long ``:a:a:a…`` run, the name scan was quadratic (40 KB: 15 s).
_RST_MARKUP = re.compile(
    r"^\.\. (?:[\w-]+::|_[^:\n]+:)|(?<![\w:+-]):[a-z][\w:+-]*:`[^`\n]+`", re.MULTILINE
)


def looks_like_rst(text: str) -> bool:
    """True when ``text`` has a reST section title and reST markup (a directive, target or role).

    A title is a line that is not indented, after a blank line (or an overline, or the
    start), with an underline of one adornment character at least as long as it. Both
    are asked for: an underlined title alone is also a Markdown setext heading or a plain
    text banner, and either is chunked the same way as Markdown.
    """
    lines = text.split("\n")
    has_title = any(
        line.strip()
        and not line[0].isspace()
        and (i == 0 or not lines[i - 1].strip() or _RST_ADORNMENT.fullmatch(lines[i - 1]))
        and _RST_ADORNMENT.fullmatch(lines[i + 1])
        and len(lines[i + 1].rstrip()) >= len(line.rstrip())
        for i, line in enumerate(lines[:-1])
    )
    return has_title and _RST_MARKUP.search(text) is not None


def read_rst(data: bytes) -> Converted:
    """reStructuredText as is; kind ``rst`` so it is chunked by reST sections."""
    return Converted(_decode(data), "rst", None, None, exact=True)


def read_data(data: bytes) -> Converted:
    """Data files (CSV, JSON, YAML, …) as their text; structure is not interpreted."""
    return Converted(_decode(data), "data", None, None, exact=True)


def read_code(data: bytes, *, language: str) -> Converted:
    """Source code as is, labelled with its language; code has no title."""
    return Converted(_decode(data), "code", language, None, exact=True)


def _decode(data: bytes) -> str:
    """The file's text; ``Unreadable`` for binary, minified or huge generated files."""
    text = decode_bytes(data)
    check_not_generated(text)
    return text


def markdown_title(text: str) -> str | None:
    """The frontmatter ``title:``, else the first level-1 ATX heading outside code fences."""
    return _title(split_frontmatter(text))


def _title(front: Frontmatter) -> str | None:
    title = front.meta.get("title")
    if title is not None and str(title).strip():
        return cap_title(str(title).strip())
    in_fence = False
    for line in front.body.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = None if in_fence else atx_heading(line)
        if heading and heading[0] == 1 and (text := heading[1].strip()):
            return cap_title(text)
    return None
