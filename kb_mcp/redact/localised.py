"""Passwords named in other languages: ``密码：X``, ``パスワードは「X」です``, ``Passwort: X``,
``пароль = X``, ``Le mot de passe est X``.

Trigger: the English key rules never saw these (issue 20). Outcome: the same two shapes as
in English, over ``keywords.PASSWORD_WORDS``, on the text and (through ``confusables``) on
its NFKC fold, so fullwidth ``：`` and ``＝`` separate as ``:`` and ``=`` do.

- ``word: X`` / ``word = X``: X goes when it is quoted (ASCII quotes, 「」, 『』, “”, «»),
  ends its line, is followed by CJK text (which needs no space), or looks made up (6+
  characters with a digit or symbol): "Passwort: bitte beim Admin erfragen" stays.
- ``word <copula> X`` ("ist", "lautet", "est", "是", "は"…): X must be quoted or look made up;
  so must X when up to three words qualify the key ("Пароль от сервера: X"), and after a
  word for a secret, key or token (``API密钥：X``, ``令牌为 X``, kind ``secret``) or a
  short form with other meanings (``mdp``).

A value is ASCII-ish: it stops at whitespace, quotes, CJK punctuation and CJK, kana or
Hangul letters (``Hq5Lz8Wd2X，请保管``), so a password written in those scripts is missed.
"""

from __future__ import annotations

import re

from kb_mcp.redact._rule import (
    Rule,
    is_placeholder,
    line_span,
    marker,
    needle_lines,
    splice,
)
from kb_mcp.redact.keywords import (
    COPULA,
    PASSWORD_WORD,
    PASSWORD_WORDS,
    SECRET_WORD,
    SECRET_WORDS,
    SHORT_PASSWORD_WORD,
    SHORT_PASSWORD_WORDS,
)

_OPEN = "\"'`「『“«„‘"
_CLOSE = "\"'`」』”»“’"
_CJK = "\u3000-\u30ff\u3400-\u9fff\uac00-\ud7af\uff00-\uffef"
_STOP = rf"\s{re.escape(_OPEN + _CLOSE)}{_CJK}"
_LOCALISED = re.compile(
    rf"(?:(?P<key>{PASSWORD_WORD})|(?P<loose_key>{SHORT_PASSWORD_WORD}|{SECRET_WORD}))"
    r"(?![A-Za-z\u00c0-\u024f])"
    r"(?:[ \t]*\([^()\n]{0,40}\))?"  # "Passwort (Datenbank): …"
    # "Пароль от сервера: …", "Passwort für den Server lautet …"
    r"(?P<qualifier>(?:[ \t]+[^\s:=：＝\"'`]{1,24}){1,3}?)?"
    rf"(?:[ \t]*(?P<sep>[:=])[ \t]*|[ \t]*(?i:{COPULA})[ \t]*:?[ \t]*)"
    rf"(?:[{re.escape(_OPEN)}](?P<quoted>[^{re.escape(_CLOSE)}\n]{{1,200}})[{re.escape(_CLOSE)}]"
    rf"|(?P<bare>[^{_STOP}]{{1,200}}))"
)
_TRAILING = ".,;:!?)]}"
_PATH = re.compile(r"(?:~|\.{1,2})?/|[A-Za-z]:\\")
_LINE_END = re.compile(rf"[ \t]*(?:$|\n|[{_CJK}])")


def _made_up(value: str) -> bool:
    letters = sum(c.isalpha() for c in value)
    return len(value) >= 6 and 0 < letters < len(value)


def _redact_localised(match: re.Match[str]) -> tuple[str, str] | None:
    group = "quoted" if match["quoted"] is not None else "bare"
    value = match[group]
    if "[REDACTED:" in value:
        return None
    if group == "bare":
        value = value.rstrip(_TRAILING)
        start = match.start("bare")
        ends_line = _LINE_END.match(match.string, start + len(value)) is not None
        plain_key = match["key"] and match["sep"] and not match["qualifier"]
        if not (_made_up(value) or (plain_key and ends_line and len(value) >= 4)):
            return None
        if _PATH.match(value) or "(" in value:
            return None
    if is_placeholder(value):
        return None
    start = match.start(group)
    text = match.string
    secret_word = match["loose_key"] and match["loose_key"].lower() not in SHORT_PASSWORD_WORDS
    kind = "secret" if secret_word else "password"
    return kind, text[match.start() : start] + marker(kind) + text[start + len(value) : match.end()]


LOCALISED_PASSWORD_RULE = Rule(_LOCALISED, _redact_localised)
# The ASCII spellings are found in lower-cased text; the rest are not cased.
_NEEDLES = tuple(
    sorted(
        {w.split()[0].split("-")[0] for w in PASSWORD_WORDS + SHORT_PASSWORD_WORDS}
        | set(SECRET_WORDS)
    )
)


# The needles led by a letter of another script (Cyrillic, Greek, CJK, Hangul…), sought in
# one pass: ``re`` skips in C to those rare first letters, where a find per needle read a
# non-ASCII text once for each of them.
_LATIN_LED = tuple(needle for needle in _NEEDLES if needle[0].isascii())
# The ones an ASCII text can hold (not ``lösenord``, ``hasło``, ``clé``): nine of the forty
# Latin-led needles, each a scan of the whole text, are skipped for most texts.
_ASCII_NEEDLES = tuple(needle for needle in _LATIN_LED if needle.isascii())
_OTHER_SCRIPT_LED = re.compile(
    "|".join(re.escape(needle) for needle in _NEEDLES if not needle[0].isascii())
)


def redact_localised_passwords(text: str, kinds: list[str]) -> str:
    """The rule over the lines holding one of the words, not over the whole text.

    Why: the words start with two dozen letters, so the pattern over a whole text tries
    most positions (1.6 s for 5 MB of package docs); a substring search per word finds
    the few lines worth it (0.16 s).
    """
    lower = text.lower()
    if len(lower) != len(text):  # a character whose lower case is longer (İ): no offsets
        return LOCALISED_PASSWORD_RULE(text, kinds)
    ascii_text = lower.isascii()
    spans = set(needle_lines(text, lower, _ASCII_NEEDLES if ascii_text else _LATIN_LED))
    found = None if ascii_text else _OTHER_SCRIPT_LED.search(lower)
    while found:
        span = line_span(text, found.start())
        spans.add(span)
        found = _OTHER_SCRIPT_LED.search(lower, span[1])
    edits = []
    for start, end in sorted(spans):
        line = text[start:end]
        redacted = LOCALISED_PASSWORD_RULE(line, kinds)
        if redacted != line:
            edits.append((start, end, redacted))
    return splice(text, edits) if edits else text


LOCALISED_PASSWORD = redact_localised_passwords
