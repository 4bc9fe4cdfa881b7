"""Unicode clean-up of every reader's text: one character where a reader gave the pieces.

Trigger: PDF text kept "M¨oller" and U+FFFD (issue 20 item 13). LaTeX-made PDFs print an
accent as a glyph of its own before its letter, so every PDF reader extracts a spacing
diacritic (U+00A8) and then the letter: the word is then found by neither "Möller" nor
"Moller". Other sources split letters too: decomposed text (macOS, some converters:
"o" + U+0308), PDF ligature glyphs ("ﬁle" for "file"), invisible characters inside a
word (a soft hyphen from HTML or a word processor: "infor\u00admation" was found by
neither search nor grep for "information"), and U+FFFD where a reader or the decoder met
a character it could not map.

Outcome: ``normalize_text`` runs on every reader's output, in the one place text is
converted (``readers.convert_bytes``, and the window-by-window reading of a large file,
``ingest/large``), so every format, source and upload is stored the same way:

- a spacing diacritic right before a letter becomes that letter's precomposed form
  ("M¨oller" → "Möller", "na¨ıve" → "naïve", the dotless i LaTeX puts under an accent
  read as "i"); when no precomposed letter exists the two characters stay as printed;
- NFC: canonically equivalent text is one string (it also maps the CJK compatibility
  ideographs to their unified forms, as NFC always does);
- the Latin ligatures U+FB00-FB06 become their letters;
- the invisible characters that only hint where a line may break or must not (soft
  hyphen U+00AD, zero-width space U+200B, word joiner U+2060, U+FEFF inside the text)
  go, so the text is the word a reader sees (ZWJ and ZWNJ stay: they change how
  emoji and Indic or Persian script are written);
- U+0000, which a PDF reader may give for a glyph it cannot map, is read as U+FFFD
  (CommonMark's rule for NUL; no text store keeps it: PostgreSQL's text type cannot);
- U+FFFD goes: between two word characters it becomes a space (the keyword index reads
  it as a separator already, and joining the two words would make a word that is in
  neither), elsewhere it is dropped.

Every rule works inside a line, so no line is added or removed: line N of the stored text
is line N of the reader's, and every citation stays where it was.
"""

from __future__ import annotations

import re
import unicodedata

# A spacing (stand-alone) diacritic → the combining mark it prints.
_COMBINING = {
    "\u00a8": "\u0308",  # ¨ diaeresis
    "\u00b4": "\u0301",  # ´ acute
    "\u02c6": "\u0302",  # ˆ circumflex
    "\u02dc": "\u0303",  # ˜ tilde
    "\u00af": "\u0304",  # ¯ macron
    "\u02d8": "\u0306",  # ˘ breve
    "\u02d9": "\u0307",  # ˙ dot above
    "\u02da": "\u030a",  # ˚ ring above
    "\u02dd": "\u030b",  # ˝ double acute
    "\u02c7": "\u030c",  # ˇ caron
    "\u00b8": "\u0327",  # ¸ cedilla
    "\u02db": "\u0328",  # ˛ ogonek
}
# The dotless letters TeX puts under an accent ("\"{\i}"): the accented letter is the dotted one's.
_DOTLESS = {"\u0131": "i", "\u0237": "j"}
_SPACING_BEFORE_LETTER = re.compile(f"([{''.join(_COMBINING)}])([^\\W\\d_])")
# Ligature glyphs → their letters; invisible break hints → nothing.
_LETTERS = str.maketrans(
    {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
     "\ufb05": "st", "\ufb06": "st",
     "\u00ad": None, "\u200b": None, "\u2060": None, "\ufeff": None}
)  # fmt: skip
_TRANSLATED = re.compile("[\ufb00-\ufb06\u00ad\u200b\u2060\ufeff]")
_REPLACEMENTS = re.compile("\ufffd+")  # a literal first: the scan is fast
# Any character a rule other than NFC acts on.
_ACTED_ON = re.compile(f"[{''.join(_COMBINING)}\ufb00-\ufb06\u00ad\u200b\u2060\ufeff\ufffd]")


def normalize_text(text: str) -> str:
    """``text`` with split letters joined and U+FFFD gone; the same lines (module docstring).

    ASCII text has nothing to fold and is returned at once (``str.isascii`` reads a flag
    Python keeps). Other text pays one scan for the characters the rules act on, each
    rule running only on what holds its own (``str.translate`` alone takes a second over
    10 MB), and an NFC check: 3 (CJK) to 9 (Latin) ms a MB on the 2-core dev machine.
    """
    if "\x00" in text:  # CommonMark's rule: U+0000 stands for U+FFFD (module docstring)
        text = text.replace("\x00", "\ufffd")
    if text.isascii():
        return text
    if _ACTED_ON.search(text):
        if _SPACING_BEFORE_LETTER.search(text):
            text = _SPACING_BEFORE_LETTER.sub(_precomposed, text)
        if _TRANSLATED.search(text):
            text = text.translate(_LETTERS)
        if "\ufffd" in text:
            text = _REPLACEMENTS.sub(_without_replacement, text)
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


def _without_replacement(match: re.Match[str]) -> str:
    """A run of U+FFFD: a space between two word characters, else nothing."""
    text, start, end = match.string, match.start(), match.end()
    between = start > 0 and end < len(text) and _is_word(text[start - 1]) and _is_word(text[end])
    return " " if between else ""


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _precomposed(match: re.Match[str]) -> str:
    """The letter with the accent when one code point is that letter; else as printed."""
    mark, letter = match.group(1), match.group(2)
    composed = unicodedata.normalize("NFC", _DOTLESS.get(letter, letter) + _COMBINING[mark])
    return composed if len(composed) == 1 else match.group(0)
