"""Key words disguised with look-alike characters: ``pаssword`` (Cyrillic а), ``ｐａｓｓｗｏｒｄ``
(fullwidth), ``pass\u200bword`` (a zero-width space).

Trigger: a person or an agent reads each of those as "password"; the ASCII key patterns do
not, so the value stayed in clear. Outcome: the key rules (assignments, passwords in prose)
run again over a folded copy of the text, and each value they would redact there is mapped
back to its span in the original, which gets the marker. Every other character, newlines
included, stays where it was, so line numbers and positions outside the value are exact.

Folding: every character whose NFKC form is one character becomes that character (what a
reader sees: fullwidth ``ｐａｓｓ`` and ``：``, ``＝``, the ideographic space; issue 20 asked
that the rules see NFKC text), and the Cyrillic and Greek letters that look like Latin ones
become those letters, one character for one; zero-width and invisible format characters
are removed, with an offset map back. A character whose NFKC form is longer or empty
(ligatures, ``①``, ``㎏``) is kept as it is, so every offset maps back by segments; and
mathematical alphanumerics (``𝐩𝐚𝐬𝐬``) are left out, as before.

Cost: nothing for ASCII text (``str.isascii`` is a C scan); otherwise one skipping regex scan
for a look-alike inside or beside an ASCII word, or a fullwidth letter, and the fold and the
two rules again on the lines holding one.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right

from kb_mcp.redact import localised, values
from kb_mcp.redact._rule import Rule, line_span, marker, splice

# Cyrillic and Greek letters drawn like Latin ones (Unicode confusables.txt, the ones a key
# word could be spelled with).
_LOOK_ALIKES = {
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i",
    "ѕ": "s", "ј": "j", "ԁ": "d", "ԝ": "w", "һ": "h", "к": "k", "ո": "n",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
    "С": "C", "Т": "T", "Х": "X", "Ѕ": "S", "І": "I", "Ј": "J", "Ԝ": "W",
    "α": "a", "ο": "o", "ρ": "p", "ν": "v", "ι": "i", "κ": "k", "τ": "t",
    "Α": "A", "Β": "B", "Ε": "E", "Κ": "K", "Ο": "O", "Ρ": "P", "Τ": "T", "Χ": "X",
}  # fmt: skip


class _Fold(dict[int, str]):
    """``str.translate`` table: look-alikes, else the character's NFKC form when that is
    one character (computed once per character met)."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        normal = unicodedata.normalize("NFKC", char)
        self[code] = folded = normal if len(normal) == 1 else char
        return folded


_FOLD = _Fold({ord(k): v for k, v in _LOOK_ALIKES.items()})
_INVISIBLE = "\u00ad\u180e\u200b-\u200f\u2060-\u2064\ufeff"
_ZERO_WIDTH = re.compile(f"[{_INVISIBLE}]+")
_ODD = "".join(_LOOK_ALIKES) + _INVISIBLE
_FULLWIDTH = "\uff01-\uff5e\u3000"
# A look-alike or invisible character touching an ASCII letter, or any fullwidth form
# (``：`` after 密码 as much as ``ｐａｓｓ``). The pattern starts with one class of non-ASCII
# characters, so ``re`` skips everything else in C; plain Cyrillic or Greek prose (no ASCII
# letter glued to it) does not count.
_DISGUISED = re.compile(f"[{_ODD}](?:(?<=[A-Za-z].)|(?=[A-Za-z]))|[{_FULLWIDTH}]")
_KEY_RULES: tuple[Rule, ...] = (
    values.ASSIGNMENT,
    values.PROSE_PASSWORD_RULE,
    localised.LOCALISED_PASSWORD_RULE,
)


def _folded(line: str) -> tuple[str, list[int], list[int]]:
    """The folded line and its segments: folded start → original start (see ``_hits``)."""
    line = line.translate(_FOLD)
    folded_starts, original_starts, parts, pos = [0], [0], [], 0
    for gap in _ZERO_WIDTH.finditer(line):
        parts.append(line[pos : gap.start()])
        pos = gap.end()
        folded_starts.append(folded_starts[-1] + len(parts[-1]))
        original_starts.append(pos)
    parts.append(line[pos:])
    return "".join(parts), folded_starts, original_starts


def _value_span(match: re.Match[str], replacement: str) -> tuple[int, int]:
    """Span (in the matched text) of the value a key rule replaced with its marker."""
    at = replacement.index("[REDACTED:")
    end = replacement.index("]", at) + 1
    return match.start() + at, match.end() - (len(replacement) - end)


def _hits(line: str, offset: int) -> list[tuple[int, int, str]]:
    """(start, end, kind) in the text of each value the key rules find in the folded line."""
    folded, folded_starts, original_starts = _folded(line)

    def original(pos: int) -> int:
        i = bisect_right(folded_starts, pos) - 1
        return offset + original_starts[i] + pos - folded_starts[i]

    hits = []
    for rule in _KEY_RULES:
        for match in rule.pattern.finditer(folded):
            hit = rule.replace(match)
            if hit is not None:
                start, end = _value_span(match, hit[1])
                hits.append((original(start), original(end - 1) + 1, hit[0]))
    return hits


def redact_disguised_keys(text: str, kinds: list[str]) -> str:
    """Values whose key word is spelled with look-alike or invisible characters.

    Only the lines holding such a character are folded: the key rules never match across a
    line, and text in one script throughout costs one skipping search.
    """
    if text.isascii():
        return text
    hits, done = [], -1
    for odd in _DISGUISED.finditer(text):
        if odd.start() < done:
            continue
        start, done = line_span(text, odd.start())
        hits += _hits(text[start:done], start)
    edits, taken = [], -1
    for start, end, kind in sorted(hits):
        if start >= taken:  # both rules can find one value; it counts once
            edits.append((start, end, marker(kind)))
            kinds.append(kind)
            taken = end
    return splice(text, edits) if edits else text
