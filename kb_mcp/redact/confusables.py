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
_NFKC = _Fold()
_INVISIBLE = "\u00ad\u180e\u200b-\u200f\u2060-\u2064\ufeff"
_FOLDED_AWAY = re.compile(rf"[{_INVISIBLE}]+|\\u(?P<hex>[0-9a-fA-F]{{4}})")
_ODD = "".join(_LOOK_ALIKES) + _INVISIBLE
_FULLWIDTH = "\uff01-\uff5e\u3000"
# A look-alike or invisible character touching an ASCII letter, or any fullwidth form
# (``：`` after 密码 as much as ``ｐａｓｓ``), or a ``\u`` escape. The pattern starts with
# one class of all three, each told apart behind it, so ``re`` skips everything else in C
# (three alternatives led by their own classes made it try every position: 0.2 s for the
# non-ASCII texts among 20 MB of package text, not 0.05); plain Cyrillic or Greek prose
# (no ASCII letter glued to it) does not count.
_DISGUISED = re.compile(
    rf"[{_ODD}{_FULLWIDTH}\\](?:(?<=[{_ODD}])(?:(?<=[A-Za-z].)|(?=[A-Za-z]))"
    rf"|(?<=[{_FULLWIDTH}])|(?<=\\)u(?=[0-9a-fA-F]{{4}}))"
)
# Each key rule and whether it reads the line with look-alikes folded to Latin: the rules
# of other languages must see Cyrillic and Greek as they are (``пароль``, not ``пapoль``).
_KEY_RULES: tuple[tuple[Rule, bool], ...] = (
    (values.ASSIGNMENT_RULE, True),
    (values.PROSE_PASSWORD_RULE, True),
    (localised.LOCALISED_PASSWORD_RULE, False),
)


def _folded(line: str, look_alikes: bool = True) -> tuple[str, list[int], list[int]]:
    """The folded line and its segments: folded start → original start (see ``_hits``).

    An invisible character is dropped; a ``\\uXXXX`` escape (a JSON string's spelling of
    ``密码``) becomes its character, mapped back to the escape's start."""
    folded_starts, original_starts, parts, pos, length = [0], [0], [], 0, 0
    for away in _FOLDED_AWAY.finditer(line):
        parts.append(line[pos : away.start()])
        length += away.start() - pos
        if away["hex"]:
            folded_starts.append(length)
            original_starts.append(away.start())
            parts.append(chr(int(away["hex"], 16)))
            length += 1
        pos = away.end()
        folded_starts.append(length)
        original_starts.append(pos)
    parts.append(line[pos:])
    folded = "".join(parts).translate(_FOLD if look_alikes else _NFKC)
    return folded, folded_starts, original_starts


def _value_span(match: re.Match[str], replacement: str) -> tuple[int, int]:
    """Span (in the matched text) of the value a key rule replaced with its marker."""
    at = replacement.index("[REDACTED:")
    end = replacement.index("]", at) + 1
    return match.start() + at, match.end() - (len(replacement) - end)


def _hits(line: str, offset: int) -> list[tuple[int, int, str]]:
    """(start, end, kind) in the text of each value the key rules find in the folded line."""
    hits = []
    for rule, look_alikes in _KEY_RULES:
        folded, folded_starts, original_starts = _folded(line, look_alikes)

        def original(
            pos: int, starts: list[int] = folded_starts, to: list[int] = original_starts
        ) -> int:
            i = bisect_right(starts, pos) - 1
            return offset + to[i] + pos - starts[i]

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
    if text.isascii() and "\\u" not in text:
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
