"""What every rule module shares: the Rule type, markers, the prefilter and placeholders.

A rule is a callable ``(text, kinds) -> text`` that appends one kind per redaction. Most are
a regex plus a replacer (:class:`Rule`); a few scan by hand where a regex would have to
nest quantifiers (PEM bodies, CSV columns, Markdown image destinations).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# A replacer returns (kind, replacement) for a match, or None to leave the match as it is.
Replacer = Callable[[re.Match[str]], tuple[str, str] | None]
Scan = Callable[[str, list[str]], str]


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def keep_newlines(replacement: str, original: str) -> str:
    """The replacement padded with the newlines it swallowed, so line numbers never move."""
    missing = original.count("\n") - replacement.count("\n")
    return replacement + "\n" * missing if missing > 0 else replacement


@dataclass(frozen=True, slots=True)
class Rule:
    """A pattern and what to put in place of each match."""

    pattern: re.Pattern[str]
    replace: Replacer

    def __call__(self, text: str, kinds: list[str]) -> str:
        def substitute(match: re.Match[str]) -> str:
            hit = self.replace(match)
            if hit is None:
                return match.group(0)
            kinds.append(hit[0])
            return keep_newlines(hit[1], match.group(0))

        return self.pattern.sub(substitute, text)


@dataclass(frozen=True, slots=True)
class Gated:
    """A rule that runs only when one of its needles occurs in the text.

    Why: ``re`` skips to candidates in C only when a pattern starts with a case-sensitive
    literal or class; a leading lookahead, lookbehind or IGNORECASE makes it try every
    position. A substring test runs at gigabytes per second, so a rule whose matches must
    contain a fixed word costs almost nothing on text without it. ``lower`` tests the
    lower-cased text, for rules an attacker could dodge by case (``URL(``).
    """

    needles: tuple[str, ...]
    rule: Scan
    lower: bool = False

    def __call__(self, text: str, kinds: list[str]) -> str:
        return self.rule(text, kinds) if self._present(text) else text

    def _present(self, text: str) -> bool:
        """Whether a needle occurs; the lower-cased copy is gone before the rule runs (it
        doubled the peak memory of redacting a 50 MB file, issue 10)."""
        haystack = text.lower() if self.lower else text
        return any(needle in haystack for needle in self.needles)


@dataclass(frozen=True, slots=True)
class LineGated:
    """A rule run only over the lines holding one of its needles (``lines_holding``).

    Why: a pattern that starts with a class of many letters (the key words start with 13)
    makes ``re`` try most positions of a text, while a substring search per needle finds
    the few lines worth it (the assignment rule: 0.7 s for 5 MB of package text, 0.05 s
    gated). Sound only for a rule whose every match lies within one line and holds a
    needle: it then finds the same matches, and the replacer sees the whole text as the
    match's string, as without the gate.
    """

    needles: tuple[str, ...]
    rule: Rule

    def __call__(self, text: str, kinds: list[str]) -> str:
        spans = lines_holding(text, self.needles)
        if spans is None:
            return self.rule(text, kinds)
        edits = []
        for start, end in spans:
            for match in self.rule.pattern.finditer(text, start, end):
                hit = self.rule.replace(match)
                if hit is not None:
                    kinds.append(hit[0])
                    edits.append((match.start(), match.end(), hit[1]))
        return splice(text, edits) if edits else text


def case_folded(text: str) -> str | None:
    """``text`` lower-cased one character for one, as ``re`` compares letters ignoring
    case, for needle searches whose offsets are the text's; None when a character's lower
    case is longer (``İ``), which would shift every offset after it.

    ``str.lower`` keeps ``ſ`` and ``ı``, which ``re`` matches to ``s`` and ``i`` ignoring
    case: folded too, so ``paſſword`` holds the needle ``pass`` as the pattern sees it."""
    lower = text.lower()
    if len(lower) != len(text):
        return None
    if "ſ" in lower or "ı" in lower:
        lower = lower.replace("ſ", "s").replace("ı", "i")
    return lower


def lines_holding(text: str, needles: tuple[str, ...]) -> list[tuple[int, int]] | None:
    """Start and end (as ``line_span``) of each line holding a needle, in order, the text
    case-folded (``case_folded``); None when it cannot be (then every line may hold one)."""
    folded = case_folded(text)
    return None if folded is None else needle_lines(text, folded, needles)


def needle_lines(text: str, folded: str, needles: tuple[str, ...]) -> list[tuple[int, int]]:
    """Start and end of each line of ``text`` holding a needle, sought in ``folded``: a
    lower-cased copy of ``text`` with the same offsets (``case_folded``, or ``str.lower``)."""
    spans = set()
    for needle in needles:
        at = folded.find(needle)
        while at >= 0:
            span = line_span(text, at)
            spans.add(span)
            at = folded.find(needle, span[1])  # the next line holding it
    return sorted(spans)


def replace_group(match: re.Match[str], group: str, kind: str) -> tuple[str, str]:
    """Replace one group of the match and keep its surroundings (key name, quotes, host)."""
    start, end = match.span(group)
    text = match.string
    return kind, text[match.start() : start] + marker(kind) + text[end : match.end()]


_PLACEHOLDER = re.compile(
    r"""\[REDACTED:[a-z_]+\]                   # already redacted: keeps redact idempotent
      | <[^<>]*> | &(?:lt|\#x0*3c|\#0*60)\b.*      # <string> written as HTML: &#x3C;string>
      | \$\{[^{}]*\} | \$[A-Za-z_]\w* | \{\{.*\}\} | \{\w*\} | %\(\w+\)s | %s
      | (.)\1*                                 # ****, xxxx, ........
      | your[\w.-]* | [\w.-]*[_-]here          # your-password, INSERT_TOKEN_HERE
    """,
    re.VERBOSE | re.IGNORECASE,
)
_PLACEHOLDER_WORDS = frozenset(
    {
        *("none", "null", "nil", "true", "false", "undefined", "redacted", "hidden", "required"),
        *("changeme", "change_me", "changeit", "example", "placeholder", "dummy", "optional"),
        # fetch()'s credentials option: `{credentials: "include"}`
        *("include", "omit", "same-origin"),
        # type names and keywords: `password: str`, `token = await fetch()`
        *("secret", "password", "token", "str", "string", "bytes", "int", "bool", "any"),
        *("secretstr", "await", "new", "yield", "lambda", "function", "async", "not", "typeof"),
    }
)


def is_placeholder(value: str) -> bool:
    """Empty values, markers, template/env references and documentation stand-ins.

    Well-known defaults such as ``changeme`` are kept on purpose: they are public, and
    redacting them would only make configuration docs harder to read.
    """
    return (
        not value
        or value.lower() in _PLACEHOLDER_WORDS
        or _PLACEHOLDER.fullmatch(value) is not None
    )


def looks_random(value: str) -> bool:
    """Upper, lower and a digit or symbol: what a generated secret has and a word does not."""
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() or c in "+/" for c in value)
    )


_WORD = re.compile(r"[A-Z]{2,}(?![a-z])|[A-Z]?[a-z]+|[A-Z]|\d+")
_VOWELS = frozenset("aeiouyAEIOUY")


def words(name: str) -> list[str]:
    """The words of an identifier: HTTPToken → HTTP Token, getToken2 → get Token 2."""
    return _WORD.findall(name)


def reads_like_words(name: str) -> bool:
    """A name made of words (``password_hash``, ``getToken``, ``HTTPToken``, ``Screenshot2024``).

    Why: a generated secret can hold a key word too (``TokenA8f7Gh2kLmQ9``,
    ``PwDRzPajzdlWOltmP0``), and the key word alone once made it pass for code. Such a run
    splits into stray letters, several digit runs or vowelless fragments; a name does not.
    ``exfil`` asks the same of URL path segments and host labels (``U0VDUkVU`` is data).
    """
    parts = words(name)
    letters = [w for w in parts if w.isalpha()]
    digit_runs = len(parts) - len(letters)
    stray = sum(len(w) == 1 for w in letters)
    # camel fragments without a vowel (Xk, Rq, Pzw); snake words such as ctx_db_pwd are names
    vowelless = sum(w.istitle() and len(w) > 1 and _VOWELS.isdisjoint(w) for w in letters)
    return digit_runs <= 1 and stray <= 1 and not (vowelless >= 3 and vowelless * 2 > len(letters))


def line_span(text: str, at: int) -> tuple[int, int]:
    """Start and end (before its newline) of the line holding position ``at``."""
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return start, len(text) if end < 0 else end


def splice(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Text with each (start, end, replacement) applied; overlapping later edits are dropped."""
    out, pos = [], 0
    for start, end, replacement in sorted(edits):
        if start < pos:
            continue
        out += [text[pos:start], keep_newlines(replacement, text[start:end])]
        pos = end
    return "".join([*out, text[pos:]])
