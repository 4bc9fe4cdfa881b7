"""Values that are blocks of lines under a secret name: YAML block scalars and lists, JSON
arrays and objects, heredocs.

Trigger: ``password: |`` over an indented value, ``credentials:`` over a list of
``- <value>`` items, ``"credentials": ["…", "…"]``, and ``PASSWORD=$(cat <<EOF`` over a
heredoc body all kept their values: the key and the value are on different lines, or the
value is a container the assignment rule takes for code (issue 20). Outcome: after a secret
name (``keywords.KEY_WORD`` ending the key, or a password word of another language),

- a YAML block scalar (``key: |``, ``key: >-``): every line of the block;
- an empty YAML value: the more-indented lines below; an item (``- x``) or a plain line
  is redacted, a ``sub: value`` line is left to the other rules;
- a ``[`` or ``{`` (JSON, a YAML flow collection): each string in it that is not a key,
  on its line and the lines down to the closing bracket (a flow list's bare items too);
- a heredoc opened on a line holding a secret name before its ``<<``: the body lines, when
  the body is at most ``MAX_LINES`` lines (a longer one is a script, not a value).

Each line of a block keeps its indentation, item dash and quotes; only values become
markers, so the lines stay where they were. ``safe_cut`` keeps ``redact.stream`` from
cutting a window below an opener whose block runs on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from kb_mcp.redact._rule import is_placeholder, line_span, marker, splice
from kb_mcp.redact.keywords import KEY_WORD, PASSWORD_WORD, may_name_a_secret, word_kind
from kb_mcp.redact.values import names_something

MAX_LINES = 200

# no plural: ``tokens = {…}`` is a lexer's table, ``passwords:`` a list of rules
_SECRET_KEY = rf"(?:{KEY_WORD}|{PASSWORD_WORD})"
# Each opener is found at its separator (a literal ``re`` skips to in C); the key before it
# is checked on the text before (``_KEY_BEFORE``), and for YAML what stands before the key.
_YAML_OPENER = re.compile(
    r"(?m)[:：](?<![)\]}]:)(?P<after>[ \t]*(?P<scalar>[|>][-+0-9]*)?[ \t]*(?:#[^\n]*)?\r?)$"
)
# ``=>`` as ``=`` and a ``>`` checked behind: a pattern led by a class, not an alternation
# of a class and a literal, which ``re`` cannot skip to (0.08 s of 5 MB, not 0.04)
_CONTAINER_OPENER = re.compile(r"[:=：](?:(?<==)>)?[ \t]*(?P<open>[\[{])(?!REDACTED:)")
_KEY_BEFORE = re.compile(rf"(?P<key>{_SECRET_KEY})\\{{0,4}}[\"']?[ \t]*\Z")
_YAML_LINE_HEAD = re.compile(r"(?P<indent>[ \t]*)(?P<dash>-[ \t]+)?[\"']?[\w.-]*")
# What a line may hold before a YAML opener's colon: that head, a key word (letters,
# joiners, blanks, an apostrophe) and its quotes and escapes. Any other character (``def
# f(x):``, ``if a == b:``) means no key stands first, found before the key word is sought.
_YAML_KEY_LINE = re.compile(r"[\w.\"' \t\\-]*")
REACH = 64
_HEREDOC = re.compile(r"<<-?[ \t]*(?P<q>['\"]?)(?P<tag>[A-Za-z_]\w{0,30})(?P=q)")
_SECRET_NAME = re.compile(_SECRET_KEY)
# A string, and whether it is a key (a colon after it): keys are matched to be skipped.
_STRING = re.compile(r"(?:\"(?P<dq>(?:[^\"\\\n]|\\.)*)\"|'(?P<sq>[^'\n]*)')(?P<key>[ \t]*:)?")
_ITEM = re.compile(r"[ \t]*-[ \t]+(?P<quote>[\"']?)(?P<value>[^\n]*?)(?P=quote)[ \t]*\r?$")
_SUB_KEY = re.compile(r"[ \t]*(?:-[ \t]+)?[\"']?[\w.-]+[\"']?[ \t]*:(?:[ \t]|$)")
_CONTENT = re.compile(r"[ \t]*(?P<value>\S[^\n]*?)[ \t]*\r?$")
_FLOW_ITEM = re.compile(r"(?<=[\[,])[ \t]*(?P<value>[^\s,\[\]{}\"':][^,\[\]{}\n]*?)[ \t]*(?=[,\]])")


def _lines(text: str, start: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each line from ``start`` on."""
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield start, end
        start = end + 1


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _yaml_edits(text: str, opener: re.Match[str]) -> tuple[int, list[tuple[int, int]]]:
    """Where the block under a YAML opener ends, and the value spans in it (none when the
    key is not the first thing on its line)."""
    line_start = text.rfind("\n", 0, opener.start()) + 1
    if not _YAML_KEY_LINE.fullmatch(text, line_start, opener.start()):
        return opener.end(), []
    key = _key_before(text, opener.start())
    head = key and _YAML_LINE_HEAD.fullmatch(text, line_start, key.start())
    if not head:
        return opener.end(), []
    base = len(head["indent"]) + (1 if head["dash"] else 0)
    spans, end = [], opener.end()
    for count, (a, b) in enumerate(_lines(text, opener.end() + 1)):
        line = text[a:b]
        if not line.strip():
            continue
        if _indent(line) <= base or count >= MAX_LINES:
            break
        end = b
        if opener["scalar"] is None and _SUB_KEY.match(line):
            continue
        item = _ITEM.match(line) if opener["scalar"] is None else None
        found = item or _CONTENT.match(line)
        if found and found["value"]:
            spans.append((a + found.start("value"), a + found.end("value")))
    return end, spans


def _container_edits(text: str, opener: re.Match[str]) -> tuple[int, list[tuple[int, int]]]:
    """Where the container after an opener closes, and the string values in it."""
    close = "]" if opener["open"] == "[" else "}"
    depth, pos, spans = 0, opener.start("open"), []
    line_start, _ = line_span(text, pos)
    for count, (a, b) in enumerate(_lines(text, line_start)):
        if count >= MAX_LINES:
            return pos, spans
        segment_start = max(a, pos)
        for m in _STRING.finditer(text, segment_start, b):
            group = "dq" if m["dq"] is not None else "sq"
            # a list of names (``"_git_credential": ["list_credential_helpers", …]``)
            if not m["key"] and not _is_name(m[group]):
                spans.append(m.span(group))
        if close == "]" and not _STRING.search(text, segment_start, b):
            spans += [m.span("value") for m in _FLOW_ITEM.finditer(text, segment_start, b)]
        stripped = re.sub(r"\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'", "", text[segment_start:b])
        depth += stripped.count(opener["open"]) - stripped.count(close)
        if depth <= 0:
            return b, spans
    return len(text), spans  # open at the end of the text: its rows may follow


def _is_name(value: str) -> bool:
    """An identifier made of words (``list_credential_helpers``), not ``hunter2``."""
    return value.isidentifier() and names_something(value)


def _heredoc_edits(text: str, opener: re.Match[str]) -> tuple[int, list[tuple[int, int]]]:
    start, end = line_span(text, opener.start())
    if not _SECRET_NAME.search(text, start, opener.start()):
        return end, []
    spans = []
    terminator = re.compile(rf"[ \t]*{re.escape(opener['tag'])}[ \t]*\r?")
    for count, (a, b) in enumerate(_lines(text, end + 1)):
        if terminator.fullmatch(text, a, b):
            return b, spans
        if count >= MAX_LINES:
            return end, []  # no terminator in reach: a script or a mention, not a value
        found = _CONTENT.match(text, a, b)
        if found and found["value"]:
            spans.append(found.span("value"))
    return len(text), []  # the text ends first: the body may go on past it


def _key_before(text: str, at: int) -> re.Match[str] | None:
    """The secret name ending right before ``at`` on its line, if any."""
    start = max(text.rfind("\n", 0, at) + 1, at - REACH)
    if not may_name_a_secret(text[start:at]):
        return None
    return _KEY_BEFORE.search(text, start, at)


def _openers(text: str) -> Iterator[tuple[int, int, str, list[tuple[int, int]]]]:
    """(opener start, block end, kind, value spans) of every block under a secret name."""
    for opener in _YAML_OPENER.finditer(text):
        end, spans = _yaml_edits(text, opener)
        if spans:
            key = _key_before(text, opener.start())
            yield opener.start(), end, word_kind(key["key"]) if key else "secret", spans
    for opener in _CONTAINER_OPENER.finditer(text):
        key = _key_before(text, opener.start())
        if key:
            end, spans = _container_edits(text, opener)
            yield opener.start(), end, word_kind(key["key"]), spans
    if "<<" in text:
        for opener in _HEREDOC.finditer(text):
            end, spans = _heredoc_edits(text, opener)
            key = _SECRET_NAME.search(text, line_span(text, opener.start())[0], opener.start())
            yield opener.start(), end, word_kind(key.group(0)) if key else "secret", spans


def redact_blocks(text: str, kinds: list[str]) -> str:
    """Values in blocks under a secret name (see the module)."""
    edits = []
    for _start, _end, kind, spans in _openers(text):
        for a, b in spans:
            value = text[a:b]
            if is_placeholder(value) or "[REDACTED:" in value:
                continue
            edits.append((a, b, marker(kind)))
            kinds.append(kind)
    return splice(text, edits) if edits else text


def safe_cut(text: str, cut: int) -> int:
    """The line start at or before ``cut`` above any opener whose block reaches ``cut``."""
    for start, end, _kind, _spans in _openers(text[:cut]):
        if end >= cut - 1:
            cut = min(cut, line_span(text, start)[0])
    return cut
