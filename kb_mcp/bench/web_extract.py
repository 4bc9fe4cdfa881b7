"""Which HTML → Markdown extractor keeps a docs page's content and drops its chrome (issue 25).

``python -m kb_mcp.bench.web_extract --site NAME=PATH:RULE …`` reads the ``.html`` files
under PATH (sorted, every k-th so at most ``--pages`` of them, 60 by default), converts
each with every candidate extractor that is installed, and prints one Markdown table row
per site and extractor. RULE says which element holds a page's main content (the ground
truth, bench-only): a preset name (``PRESETS``) or a rule in the small selector language
of ``Rule``. Pages the rule finds nothing in are left out (the ``pages`` column counts the
ones measured).

Measured per page, summed over the site's pages (so a long page weighs more):

- boilerplate: of the output's lines that hold a word (outside fences: link targets,
  list and quote markers removed; fence lines themselves skipped), the share whose word
  sequence does not occur, contiguous, in the main content's word sequence. Words are
  runs of letters and digits, case-folded, so Markdown punctuation and escapes are
  ignored. A one-word chrome line ("Next") that the content also says counts as content:
  the figure is a floor. Lines differ in length (one kb-mcp line is a paragraph, one
  trafilatura line a source line), and one Markdown table line can hold a layout table's
  menu and its page, so "boilerplate words" also counts the output's words outside every
  run of 4 or more that occurs in the content (``_uncovered``), over all its words.
- recall: the main content's words (as a multiset) found in the output.
- code: each ``<pre>`` of the main content (each ``<code>`` child when a ``<pre>`` holds
  several, as Node.js' ESM / CommonJS pairs do) whose lines, trailing spaces removed,
  appear in order and contiguous inside one fenced block of the output (fence
  indentation removed as CommonMark does), and again with blank lines ignored on both
  sides (some extractors drop them); "lang" is, of those kept whose source names a
  language (``language-*``, ``lang-*``, Sphinx's ``highlight-*`` on the ``<pre>``, its
  ``<code>`` or two ancestors), the share whose fence carries an info string.
- headings: h1–h6 of the main content whose words equal those of an output ATX heading
  (``#`` … ``######``), each output heading used once; the level is not compared.
- CPU ms: ``time.process_time`` around the extractor's call on the page's bytes (decoding
  included), median over the pages; each extractor first converts one page untimed.

Candidates: ``kb-mcp`` (``readers.convert_bytes(data, ".html")``, stdlib only);
trafilatura (Apache-2.0) with its default, ``favor_recall`` and ``favor_precision``
settings, and its main-content HTML rendered by kb-mcp's reader; readability-lxml
(Apache-2.0) rendered by markdownify (MIT) or by kb-mcp's reader. None of the others is a
dependency; to compare, install them in a scratch virtualenv that sees kb-mcp's::

    python -m venv /tmp/extract-venv
    /tmp/extract-venv/bin/pip install trafilatura readability-lxml markdownify
    python -c "import site; print(site.getsitepackages()[0])" \
        > /tmp/extract-venv/lib/python3.11/site-packages/kb-mcp-venv.pth
    PYTHONPATH=. /tmp/extract-venv/bin/python -m kb_mcp.bench.web_extract --site …

Ground truth is read with lxml (kb-mcp's ``docx`` extra and every other candidate use it).
``--dump DIR`` writes each output for reading by eye, ``--chrome N`` prints the commonest
lines counted as boilerplate.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# Main-content rules of the sites measured for issue 25 (``Rule`` has the syntax).
PRESETS = {
    # Sphinx (basic, classic, alabaster, pydoctheme): the body div marks itself role=main.
    "sphinx": "div[role=main], div.body",
    # DocBook XSL: the page between its navigation header and footer tables (Valgrind's
    # customisation names them table.nav; stock DocBook, div.navheader / div.navfooter).
    "docbook": "body -table.nav -div.navheader -div.navfooter",
    # Node.js API docs (tools/doc): the API text beside the table of contents column.
    "nodejs": "#apicontent",
    # The xmlsoft.org layout of libxml2 / libxslt's pages and API reference: a table whose
    # top-aligned cell without a width holds the page (the menu's cell has width=200), below
    # its Prev / Up / Home / Next table; the DocBook manual pages and tutorials shipped
    # beside them have no chrome.
    "xmlsoft": "td[valign=top][bgcolor=#8b7765]:not([width]) -table.navigation, body",
}

_RUN = 4  # words in a row that make an output line's stretch content (``_uncovered``)
_BLOCK_TAGS = frozenset(
    """address article aside blockquote body br caption center dd details div dl dt
    fieldset figcaption figure footer form h1 h2 h3 h4 h5 h6 header hr html li main nav ol
    p pre section summary table tbody td tfoot th thead tr ul""".split()
)
_NEVER_TEXT = frozenset(
    {"script", "style", "noscript", "template", "head", "title", "button", "select"}
)
_HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_WORD = re.compile(r"[^\W_]+")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})([^`]*)$")
_ATX = re.compile(r"^\s*#{1,6}(?:\s+(.*?))?\s*$")
# [text](target "title"), the text holding at most one level of brackets ([[source]](…)).
_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_MARKERS = re.compile(r"^\s*(?:(?:[-*+]|\d+[.)]|>)\s+)*")
_LANGUAGE_CLASS = re.compile(r"\b(?:language|lang|highlight)-(?!default\b|none\b)[\w+#.-]+")
_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([\w.:-]+)", re.IGNORECASE)
_XML_CHARSET = re.compile(rb"<\?xml[^>]+encoding=[\"']([\w.:-]+)")


# --- the ground truth: a small selector language over lxml --------------------------------


_COMPOUND = re.compile(r"([\w-]+|\*)?((?:#[\w-]+|\.[\w-]+|\[[^\]]+\]|:not\([^)]*\))*)$")
_PART = re.compile(r"#([\w-]+)|\.([\w-]+)|\[([\w-]+)(?:=([^\]]*))?\]|:not\(([^)]*)\)")


@dataclass(frozen=True, slots=True)
class Simple:
    """One compound selector: ``tag#id.class[attr][attr=value]:not(compound)``."""

    tag: str | None
    parts: tuple[tuple[str, str, str | None], ...]  # (kind, name, value)

    @classmethod
    def parse(cls, text: str) -> Simple:
        match = _COMPOUND.match(text.strip())
        if not match or not text.strip():
            raise ValueError(f"unsupported selector {text!r}")
        tag = match.group(1) if match.group(1) not in {None, "*"} else None
        parts: list[tuple[str, str, str | None]] = []
        for ident, cls_name, attr, value, negated in _PART.findall(match.group(2)):
            if ident:
                parts.append(("attr", "id", ident))
            elif cls_name:
                parts.append(("class", cls_name, None))
            elif attr:
                parts.append(("attr", attr, value.strip("\"'") if value else None))
            else:
                parts.append(("not", negated, None))
        return cls(tag, tuple(parts))

    def matches(self, element) -> bool:
        if not isinstance(element.tag, str) or (self.tag and element.tag != self.tag):
            return False
        for kind, name, value in self.parts:
            if kind == "class":
                if name not in element.get("class", "").split():
                    return False
            elif kind == "attr":
                actual = element.get(name)
                if actual is None or (value is not None and actual.lower() != value.lower()):
                    return False
            elif Simple.parse(name).matches(element):
                return False
        return True


@dataclass(frozen=True, slots=True)
class Rule:
    """Which element holds a page's content: ``ALT[, ALT…]``, each ``SELECTOR [-EXCLUDED…]``.

    The first alternative with a match wins, and its first element in document order;
    elements below it matching an excluded selector are left out. Selectors are compound
    only (no descendant combinator): ``div[role=main]``, ``#apicontent``,
    ``body -table.nav``, ``td[valign=top]:not([width])``.
    """

    alternatives: tuple[tuple[Simple, tuple[Simple, ...]], ...]

    @classmethod
    def parse(cls, text: str) -> Rule:
        text = PRESETS.get(text, text)
        alternatives = []
        for alternative in text.split(","):
            selector, *excluded = alternative.split()
            if any(not word.startswith("-") for word in excluded):
                raise ValueError(f"expected -SELECTOR after {selector!r} in {text!r}")
            alternatives.append(
                (Simple.parse(selector), tuple(Simple.parse(word[1:]) for word in excluded))
            )
        return cls(tuple(alternatives))

    def find(self, tree) -> tuple[object, tuple[Simple, ...]] | None:
        for selector, excluded in self.alternatives:
            for element in tree.iter():
                if selector.matches(element):
                    return element, excluded
        return None


@dataclass(slots=True)
class Truth:
    """What the main content holds: its words, code blocks and headings."""

    words: list[str]
    code: list[tuple[list[str], bool]]  # (lines, whether the source names a language)
    headings: list[tuple[str, ...]]


def ground_truth(data: bytes, rule: Rule) -> Truth | None:
    """The main content of one page by ``rule``, or None when the rule finds nothing."""
    import lxml.html

    declared = _CHARSET.search(data[:4096]) or _XML_CHARSET.search(data[:200])
    encoding = declared.group(1).decode("ascii") if declared else "utf-8"
    parser = lxml.html.HTMLParser(encoding=encoding, remove_comments=True)
    tree = lxml.html.document_fromstring(data, parser=parser)
    found = rule.find(tree)
    if found is None:
        return None
    root, excluded = found
    skip: set = set()
    for element in root.iter():
        if isinstance(element.tag, str) and (
            element.tag in _NEVER_TEXT or any(s.matches(element) for s in excluded)
        ):
            skip.update(element.iter())
    chunks: list[str] = []
    _content_text(root, skip, chunks)
    code = []
    for pre in root.iter("pre"):
        if pre in skip:
            continue
        codes = [child for child in pre if child.tag == "code"]
        for block in codes if len(codes) >= 2 else [pre]:
            if lines := _code_lines(_pre_text(block)):
                code.append((lines, _names_language(block)))
    headings = [
        words
        for heading in root.iter(*_HEADING_TAGS)
        if heading not in skip and (words := tuple(words_of("".join(heading.itertext()))))
    ]
    return Truth(words_of("".join(chunks)), code, headings)


def _content_text(element, skip: set, chunks: list[str]) -> None:
    """Text below ``element`` as a browser lays it out: blocks apart, inline runs joined."""
    block = element.tag in _BLOCK_TAGS
    if block:
        chunks.append("\n")
    if element.text:
        chunks.append(element.text)
    for child in element:
        if child not in skip:
            _content_text(child, skip, chunks)
        if child.tail:
            chunks.append(child.tail)
    if block:
        chunks.append("\n")


def _pre_text(element) -> str:
    """The text of a code block as shown: its whitespace kept, ``<br>`` a line break."""
    chunks = ["\n" if element.tag == "br" else element.text or ""]
    for child in element:
        if child.tag not in _NEVER_TEXT:  # a copy button is not the code's
            chunks.append(_pre_text(child))
        chunks.append(child.tail or "")
    return "".join(chunks)


def _names_language(block) -> bool:
    classes = [block.get("class", "")]
    for element in [*block.iterdescendants("code"), *list(block.iterancestors())[:2]]:
        classes.append(element.get("class", ""))
    return bool(_LANGUAGE_CLASS.search(" ".join(classes)))


def _code_lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[0]:
        del lines[0]
    while lines and not lines[-1]:
        del lines[-1]
    return lines


def words_of(text: str) -> list[str]:
    return [word.casefold() for word in _WORD.findall(text)]


# --- the output: Markdown read back ---------------------------------------------------------


@dataclass(slots=True)
class Output:
    """An extractor's Markdown: its word-bearing lines, fenced blocks and headings."""

    lines: list[list[str]] = field(default_factory=list)
    fences: list[tuple[list[str], str]] = field(default_factory=list)  # (lines, info)
    headings: list[tuple[str, ...]] = field(default_factory=list)
    words: list[str] = field(default_factory=list)


def read_markdown(markdown: str) -> Output:
    out = Output()
    fence: tuple[str, str, int] | None = None  # (marker, info, indentation)
    body: list[str] = []
    for line in markdown.split("\n"):
        if fence is not None:
            marker, info, indent = fence
            stripped = line.strip()
            if stripped and set(stripped) == {marker[0]} and len(stripped) >= len(marker):
                out.fences.append((_code_lines("\n".join(body)), info))
                fence, body = None, []
                continue
            body.append(_dedent(line, indent).rstrip())
            if words := words_of(line):
                out.lines.append(words)
            continue
        if opening := _FENCE.match(line):
            info = opening.group(3).strip()
            fence = (opening.group(2), info, len(opening.group(1)))
            continue
        text = _LINK.sub(r"\1", line)
        if heading := _ATX.match(text):
            out.headings.append(tuple(words_of(heading.group(1) or "")))
        if words := words_of(_MARKERS.sub("", text)):
            out.lines.append(words)
    if fence is not None:  # an unclosed fence runs to the end, as CommonMark says
        out.fences.append((_code_lines("\n".join(body)), fence[1]))
    out.words = [word for line in out.lines for word in line]
    return out


def _dedent(line: str, indent: int) -> str:
    """Remove up to ``indent`` leading spaces (a fence's own indentation, CommonMark 4.5)."""
    width = len(line) - len(line.lstrip(" "))
    return line[min(width, indent) :]


# --- scoring ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Score:
    pages: int = 0
    empty: int = 0
    lines: int = 0
    chrome_lines: int = 0
    output_words: int = 0
    chrome_words: int = 0
    words: int = 0
    words_found: int = 0
    code: int = 0
    code_kept: int = 0
    code_kept_loose: int = 0  # kept once blank lines are ignored on both sides
    code_lang: int = 0  # kept blocks whose source names a language
    code_lang_kept: int = 0
    headings: int = 0
    headings_kept: int = 0
    cpu_ms: list[float] = field(default_factory=list)
    chrome_examples: Counter[str] = field(default_factory=Counter)

    def add(self, truth: Truth, markdown: str, cpu_ms: float) -> None:
        out = read_markdown(markdown)
        self.pages += 1
        self.empty += not out.lines
        self.cpu_ms.append(cpu_ms)
        content = " " + " ".join(truth.words) + " "
        for line in out.lines:
            self.lines += 1
            self.output_words += len(line)
            if _occurs(line, content):
                continue
            self.chrome_lines += 1
            self.chrome_words += _uncovered(line, content)
            self.chrome_examples[" ".join(line)[:70]] += 1
        have = Counter(out.words)
        self.words += len(truth.words)
        self.words_found += sum(min(n, have[w]) for w, n in Counter(truth.words).items())
        for lines, named in truth.code:
            self.code += 1
            info = _kept_in(lines, out.fences)
            self.code_kept_loose += (
                info is not None
                or _kept_in(_solid(lines), [(_solid(body), i) for body, i in out.fences])
                is not None
            )
            if info is not None:
                self.code_kept += 1
                self.code_lang += named
                self.code_lang_kept += named and bool(info)
        unused = Counter(out.headings)
        for heading in truth.headings:
            self.headings += 1
            if unused[heading] > 0:
                unused[heading] -= 1
                self.headings_kept += 1


def _occurs(words: list[str], content: str) -> bool:
    """Whether ``words`` occur contiguously in ``content`` (words joined, spaces around)."""
    return " " + " ".join(words) + " " in content


def _uncovered(line: list[str], content: str) -> int:
    """Words of ``line`` outside every run of ``_RUN`` or more of its words that occurs in
    ``content``, taken greedily from the left: a Markdown table that holds a layout
    table's menu and page in one line counts its menu's words, not the whole line."""
    uncovered = start = 0
    while start < len(line):
        end = start + 1
        while end <= len(line) and _occurs(line[start:end], content):
            end += 1
        if end - 1 - start >= _RUN:
            start = end - 1
        else:
            uncovered += 1
            start += 1
    return uncovered


def _solid(lines: list[str]) -> list[str]:
    return [line for line in lines if line.strip()]


def _kept_in(lines: list[str], fences: list[tuple[list[str], str]]) -> str | None:
    """The info string of the first fence holding ``lines`` contiguously, else None."""
    size = len(lines)
    for body, info in fences:
        for start in range(len(body) - size + 1):
            if body[start : start + size] == lines:
                return info
    return None


# --- the candidates ---------------------------------------------------------------------------


def _kb_mcp(data: bytes) -> str:
    from kb_mcp.ingest.readers import convert_bytes

    return convert_bytes(data, ".html").markdown


_ROLE_MAIN = re.compile(rb"""\srole\s*=\s*["']?main["']?""", re.IGNORECASE)
_MAIN_TAG = re.compile(rb"<(/?)(?:main|article)\b", re.IGNORECASE)


def _kb_mcp_unmarked(data: bytes) -> str:
    """kb-mcp's reader on the page with its ``<main>``, ``<article>`` and ``role=main``
    turned into plain ``<div>``s (an ablation): what its structural chrome rules alone
    leave of a site that marks nothing."""
    return _kb_mcp(_MAIN_TAG.sub(rb"<\1div", _ROLE_MAIN.sub(b"", data)))


def _trafilatura(**options: bool) -> Callable[[bytes], str]:
    def extract(data: bytes) -> str:
        import trafilatura

        return (
            trafilatura.extract(
                data,
                output_format="markdown",
                include_tables=True,
                include_formatting=True,
                include_links=False,
                with_metadata=False,
                **options,
            )
            or ""
        )

    return extract


def _trafilatura_kb_mcp(data: bytes) -> str:
    """trafilatura chooses the main content (its HTML output), kb-mcp's reader renders it."""
    import trafilatura

    html = trafilatura.extract(
        data,
        output_format="html",
        include_tables=True,
        include_formatting=True,
        include_links=True,
        with_metadata=False,
    )
    return _kb_mcp(html.encode()) if html else ""


def _readability(render: str) -> Callable[[bytes], str]:
    def extract(data: bytes) -> str:
        from readability import Document

        html = Document(data).summary(html_partial=True)
        if render == "kb-mcp":
            return _kb_mcp(html.encode())
        from markdownify import markdownify

        return markdownify(html, heading_style="ATX")

    return extract


EXTRACTORS: dict[str, tuple[str, Callable[[bytes], str]]] = {
    # name: (module it needs, function)
    "kb-mcp": ("kb_mcp", _kb_mcp),
    "kb-mcp-unmarked": ("kb_mcp", _kb_mcp_unmarked),
    "trafilatura": ("trafilatura", _trafilatura()),
    "trafilatura-recall": ("trafilatura", _trafilatura(favor_recall=True)),
    "trafilatura-precision": ("trafilatura", _trafilatura(favor_precision=True)),
    "trafilatura-html+kb-mcp": ("trafilatura", _trafilatura_kb_mcp),
    "readability+markdownify": ("markdownify", _readability("markdownify")),
    "readability+kb-mcp": ("readability", _readability("kb-mcp")),
}


def available(names: list[str]) -> list[str]:
    import importlib.util

    return [name for name in names if importlib.util.find_spec(EXTRACTORS[name][0])]


# --- the run ----------------------------------------------------------------------------------


def sample(folder: Path, limit: int) -> list[Path]:
    """Every k-th ``.html`` / ``.htm`` file under ``folder`` in sorted order, at most ``limit``."""
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in {".html", ".htm"})
    step = max(1, math.ceil(len(files) / limit))
    return files[::step]


def run_site(
    folder: Path, rule: Rule, names: list[str], limit: int, dump: Path | None, site: str
) -> tuple[dict[str, Score], int]:
    """Score every extractor on the site's sample; also the pages the rule found nothing in."""
    scores = {name: Score() for name in names}
    missed = 0
    warmed: set[str] = set()
    for path in sample(folder, limit):
        data = path.read_bytes()
        truth = ground_truth(data, rule)
        if truth is None or not truth.words:
            missed += 1
            continue
        for name in names:
            extract = EXTRACTORS[name][1]
            if name not in warmed:
                extract(data)
                warmed.add(name)
            started = time.process_time()
            markdown = extract(data)
            cpu_ms = (time.process_time() - started) * 1000
            scores[name].add(truth, markdown, cpu_ms)
            if dump is not None:
                target = dump / site / name / (str(path.relative_to(folder)) + ".md")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(markdown, encoding="utf-8")
    return scores, missed


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}" if whole else "–"


def table(rows: list[tuple[str, str, Score]]) -> str:
    lines = [
        "| site | extractor | pages | empty | boilerplate lines % | boilerplate words % | "
        "recall % | code whole | code, blank lines aside | code lang % | headings | "
        "CPU ms/page (median) |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for site, name, s in rows:
        code = f"{s.code_kept}/{s.code} ({_share(s.code_kept, s.code)} %)"
        loose = f"{_share(s.code_kept_loose, s.code)} %"
        heads = f"{s.headings_kept}/{s.headings} ({_share(s.headings_kept, s.headings)} %)"
        cpu = f"{statistics.median(s.cpu_ms):.1f}" if s.cpu_ms else "–"
        lines.append(
            f"| {site} | {name} | {s.pages} | {s.empty} | {_share(s.chrome_lines, s.lines)} | "
            f"{_share(s.chrome_words, s.output_words)} | "
            f"{_share(s.words_found, s.words)} | {code} | {loose} | "
            f"{_share(s.code_lang_kept, s.code_lang)} | {heads} | {cpu} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kb_mcp.bench.web_extract", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--site",
        action="append",
        required=True,
        metavar="NAME=PATH:RULE",
        help=f"a folder of HTML pages and its main-content rule or preset ({', '.join(PRESETS)})",
    )
    parser.add_argument("--pages", type=int, default=60, help="pages sampled a site (60)")
    parser.add_argument(
        "--extractors", default=",".join(EXTRACTORS), help="comma-separated (all installed)"
    )
    parser.add_argument("--dump", type=Path, help="write every output under this folder")
    parser.add_argument(
        "--chrome", type=int, default=0, help="print the N commonest boilerplate lines"
    )
    args = parser.parse_args(argv)
    wanted = [name.strip() for name in args.extractors.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in EXTRACTORS]
    if unknown:
        parser.error(f"unknown extractors {unknown}; known: {', '.join(EXTRACTORS)}")
    names = available(wanted)
    if skipped := [name for name in wanted if name not in names]:
        print(f"not installed, skipped: {', '.join(skipped)}", file=sys.stderr)
    rows: list[tuple[str, str, Score]] = []
    for spec in args.site:
        site, _, rest = spec.partition("=")
        path, _, rule_text = rest.partition(":")
        rule = Rule.parse(rule_text or "body")
        scores, missed = run_site(Path(path), rule, names, args.pages, args.dump, site)
        if missed:
            print(f"{site}: {missed} pages without main content by the rule", file=sys.stderr)
        rows.extend((site, name, score) for name, score in scores.items())
        for name, score in scores.items():
            for line, count in score.chrome_examples.most_common(args.chrome):
                print(f"{site} {name} chrome x{count}: {line}", file=sys.stderr)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
