"""The cheap cuts in front of the redaction rules (issue 22: redaction runs on every file of
every sync). A cut may only skip text where its rule finds nothing: gated or not, a rule
takes out exactly the same, whatever the case, Unicode letters or line endings."""

from __future__ import annotations

import base64
import re

import pytest

from kb_mcp.redact import keywords, redact, values
from kb_mcp.redact._rule import case_folded, lines_holding

# Key words in spellings ``str.lower`` and ``re`` fold apart (``ſ``, ``ı``, Kelvin ``K``,
# ``İ``), on lines ended by CRLF, at the text's edges and beside other lines.
ASSIGNMENTS = [
    "paſſword = 'Hq5Lz8Wd2X'",
    "DB_PAſS=Hq5Lz8Wd2X\r\nother = 1\r\n",
    "ſecret: Hq5Lz8Wd2X",
    "credentıals = 'Hq5Lz8Wd2X'\n",
    "api_\u212aey = 'Hq5Lz8Wd2X'",
    "APİ = 1\napi_key = 'Hq5Lz8Wd2X'",
    "x = 1\n\ntoken=Hq5Lz8Wd2X",
    "password: hunter2\r\nPassword: enter it below\r\n",
    'cfg["token"] = "Hq5Lz8Wd2X"; cfg["secret"] = "Zk8wQ2mX9pLr4Tn"',
    '{\\"password\\": \\"Hq5Lz8Wd2X\\"}',
    "pass\nbypass = Hq5Lz8Wd2X\ndb.pass = Hq5Lz8Wd2X",
]


@pytest.mark.parametrize("text", ASSIGNMENTS)
def test_line_gated_assignment_takes_what_the_rule_takes_over_the_whole_text(text: str) -> None:
    gated_kinds: list[str] = []
    whole_kinds: list[str] = []
    gated = values.ASSIGNMENT(text, gated_kinds)
    assert gated == values.ASSIGNMENT_RULE(text, whole_kinds)
    assert gated_kinds == whole_kinds


def _spellings() -> list[str]:
    """Every form of the key-name grammar with each joiner, in three cases."""
    joiners = ("", "_", "-")
    keys = [f"{q}{j}key" for q in keywords._KEY_QUALIFIERS for j in joiners]
    keys += [f"{a}{j}{b}" for a, b in (("secret", "key"), ("key", "base")) for j in joiners]
    keys += [f"aws{j}secret{j}access{j}key" for j in joiners]
    keys += [f"secret{j}key{j}base" for j in joiners]
    keys += ["password", "passwd", "passphrase", "pwd", "db_pass", "db.pass", "x-pass", "pw"]
    keys += ["secret", "token", "credential", "credentials", "cookie"]
    return [k for key in keys for k in (key, key.upper(), key.title())]


def test_every_key_word_spelling_holds_a_needle_of_the_line_gate() -> None:
    """``keywords.KEY_WORD_NEEDLES`` must cover the grammar, or the gate skips a line."""
    for spelling in _spellings():
        assert re.search(keywords.KEY_WORD, spelling), spelling
        folded = case_folded(spelling)
        assert folded is not None
        assert any(needle in folded for needle in keywords.KEY_WORD_NEEDLES), spelling


def test_case_folding_keeps_offsets_and_folds_as_re_ignores_case() -> None:
    assert case_folded("Paſſ\u212aEY tıken") == "passkey tiken"
    assert case_folded("APİ_KEY") is None  # İ lower-cases to two characters
    assert lines_holding("a\nmy paſſ\r\nb pass", ("pass",)) == [(2, 10), (11, 17)]
    assert lines_holding("APİ_KEY", ("key",)) is None


PEM_B64 = base64.b64encode(
    b"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7Vb3Kx9\n"
    b"-----END PRIVATE KEY-----\n"
).decode()


@pytest.mark.parametrize("lead", ["", " ", "\n", "x = ", "data:\n  "])
def test_searches_led_by_the_character_before_take_a_value_at_the_text_start_too(
    lead: str,
) -> None:
    """Provider tokens and base64 runs are sought from the character before them, and the
    text's first one, which has none, on its own."""
    token = "ghp_" + "a1B2c3D4e5" * 4
    assert redact(lead + token).text == lead + "[REDACTED:github_token]"
    assert redact(lead + PEM_B64).text == lead + "[REDACTED:private_key]"
