"""redact.stream: a text redacted window by window is the text redacted whole (issue 10).

Small windows are forced so that every secret, PEM block and CSV table of the document
straddles a window edge somewhere. Fake credentials are assembled at run time.
"""

from __future__ import annotations

import random

import pytest

from kb_mcp.redact import redact
from kb_mcp.redact import stream as redact_stream
from kb_mcp.redact.stream import redact_pieces


def _alnum(length: int) -> str:
    return ("a1B2c3D4e5F6g7H8i9J0kLmN" * 20)[:length]


_BASE64 = ("MIIEowIBAAKCAQEAx9" + _alnum(46))[:64]
_KEY = "\n".join(
    ["-----BEGIN RSA PRIVATE KEY-----", *[_BASE64] * 6, "Zm9v==", "-----END RSA PRIVATE KEY-----"]
)
_SECTIONS = [
    "Ordinary prose about deployment, with 中文 and emoji 🚀 in it.\n",
    f"The server key:\n{_KEY}\nand text after it.\n",
    # a key whose BEGIN is far above its END, with prose and blank lines inside
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "prose inside a block\n\n" * 5
    + "-----END OPENSSH PRIVATE KEY-----\n",
    # a cut starting mid-key: END without BEGIN, base64 lines above it
    "copied from the middle:\n" + f"{_BASE64}\n" * 5 + "Zm9v\n-----END PRIVATE KEY-----\n",
    # a truncated key: BEGIN, key-like lines, then prose
    "-----BEGIN EC PRIVATE KEY-----\n" + f"{_BASE64}\n" * 3 + "\nThe rest is prose.\n",
    "user,email,Password,notes\n"
    + "".join(f"u{i},u{i}@example.org,Pw{i}xK9{_alnum(8)},note {i}\n" for i in range(12))
    + "end of table\n",
    f'password = "hunter2{_alnum(6)}"\nAPI_TOKEN={_alnum(32)}\n',
    f"-p{_alnum(10)} at a line start, mysql -u root -p{_alnum(12)} mydb\n",
    f"curl -u admin:{_alnum(14)} https://example.org\n",
    f"postgres://app:{_alnum(16)}@db.internal:5432/app\n",
    f"token: ghp_{_alnum(36)}\nAuthorization: Bearer {_alnum(40)}\n",
    "the password is S3cr3t!Value and that is that.\n",
    f"AKIA{_alnum(16).upper()} {_alnum(40)}\n",
    "\n\n",
    # TSV, a ragged row, a header naming no secret, JSON escaped in a string, kubeconfig,
    # a key word in disguise (Cyrillic а, zero-width space)
    "user\tSecret access key\n"
    + "".join(f"u{i}\tK{i}x{_alnum(30)}\n" for i in range(6))
    + "\nid,name,api_token\n1,Smith, John,Tk9{_alnum(20)}\n2,Ann,Tk8{_alnum(20)}\n\n",
    "id,name,size\n1,a,2\n2,b,3\n",
    f'"{{\\"password\\": \\"{_alnum(12)}\\"}}"\n',
    f"    client-key-data: {_alnum(40)}==\n",
    f"p\u0430ssword = {_alnum(14)}\npass\u200bword: {_alnum(14)}\n",
]


def _document(seed: int, sections: int = 60) -> str:
    rnd = random.Random(seed)
    return "".join(rnd.choice(_SECTIONS) for _ in range(sections))


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("window", [16, 61, 200, 997])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_redact_pieces_equals_whole_text(window: int, seed: int) -> None:
    """Issue 10 item 2: secrets, PEM blocks and CSV tables split by window edges are
    redacted exactly as in the whole text, line for line."""
    text = _document(seed)
    whole = redact(text).text
    assert whole != text  # the document does hold secrets
    for size in (7, window, 4096):
        out = list(redact_pieces(_pieces(text, size), window=window))
        assert "".join(out) == whole
        assert all(piece.endswith("\n") for piece in out[:-1])


def test_redact_pieces_holds_one_window() -> None:
    """Issue 10: the pieces stay about a window long, so the whole text is never held."""
    text = _document(4, sections=400)
    out = list(redact_pieces(_pieces(text, 100), window=500))
    assert len(out) > 10
    # carried blocks (keys next to keys) widen a window, never towards the whole text
    assert max(map(len, out)) < len(text) / 20


def test_redact_pieces_csv_header_far_above() -> None:
    """Issue 10 item 2: a table's rows many windows below its header are still redacted."""
    rows = "".join(f"u{i},Pw{i}xK9{_alnum(8)}\n" for i in range(300))
    text = "name,password\n" + rows
    out = "".join(redact_pieces(_pieces(text, 50), window=100))
    assert out == redact(text).text
    assert out.count("[REDACTED:password]") == 300


def test_redact_pieces_of_nothing() -> None:
    """The empty text yields nothing; a text without a newline comes back whole."""
    assert list(redact_pieces([])) == []
    assert "".join(redact_pieces(["no newline ", "here"], window=4)) == "no newline here"


def test_redact_pieces_bounds_a_begin_line_without_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 10 item 2: a BEGIN line in prose whose END never comes is carried at most
    ``MAX_CARRY_CHARS``, not to the end of the file, and the text is still redacted as
    a whole (a truncated key: its BEGIN line only)."""
    monkeypatch.setattr(redact_stream, "MAX_CARRY_CHARS", 1_000)
    prose = "".join(f"Line {i} of a guide to keys, in prose.\n" for i in range(600))
    text = "A key file starts with -----BEGIN RSA PRIVATE KEY----- and so on.\n" + prose
    out = list(redact_pieces(_pieces(text, 100), window=100))
    assert "".join(out) == redact(text).text
    assert out[0].startswith("A key file starts with [REDACTED:private_key]\nLine 0")
    assert max(map(len, out)) < 1_000 + 200
