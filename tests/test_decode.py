"""decode_bytes: BOMs, BOM-less UTF-16, legacy fallbacks, line ends, binary rejection."""

from __future__ import annotations

import codecs

import pytest

from kb_mcp.errors import Unreadable
from kb_mcp.ingest.decode import decode_bytes

TEXT = "Grüße, naïve café — “quoted” 日本語\nsecond line\n"


def test_decode_bytes_reads_plain_utf8() -> None:
    assert decode_bytes(TEXT.encode("utf-8")) == TEXT


def test_decode_bytes_strips_utf8_bom() -> None:
    assert decode_bytes(codecs.BOM_UTF8 + TEXT.encode("utf-8")) == TEXT


@pytest.mark.parametrize(
    ("bom", "encoding"),
    [
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
    ],
)
def test_decode_bytes_follows_bom(bom: bytes, encoding: str) -> None:
    assert decode_bytes(bom + TEXT.encode(encoding)) == TEXT


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_decode_bytes_detects_utf16_without_bom_by_nul_positions(encoding: str) -> None:
    text = "def main():\n    print('hello')\n"
    assert decode_bytes(text.encode(encoding)) == text


def test_decode_bytes_falls_back_to_cp1252() -> None:
    text = "café – “smart quotes” €5"
    assert decode_bytes(text.encode("cp1252")) == text


def test_decode_bytes_reads_bytes_undefined_in_cp1252_as_latin1() -> None:
    assert decode_bytes(b"\x93caf\xe9\x94 \x81") == "“café” \x81"


def test_decode_bytes_uses_declared_encoding_when_utf8_fails() -> None:
    text = "日本語のテキスト"
    assert decode_bytes(text.encode("shift_jis"), declared="shift_jis") == text


def test_decode_bytes_prefers_utf8_over_a_stale_declaration() -> None:
    assert decode_bytes("café".encode(), declared="iso-8859-1") == "café"


def test_decode_bytes_ignores_unknown_declared_encoding() -> None:
    assert decode_bytes("café".encode("cp1252"), declared="no-such-codec") == "café"


def test_decode_bytes_turns_crlf_and_cr_into_lf_keeping_line_count() -> None:
    data = b"one\r\ntwo\rthree\nfour"
    text = decode_bytes(data)
    assert text == "one\ntwo\nthree\nfour"
    assert len(text.split("\n")) == len(data.decode().splitlines())


def test_decode_bytes_keeps_tabs_form_feeds_and_escapes() -> None:
    text = "a\tb\x0cc\x1b[31mred\x1b[0m\n"
    assert decode_bytes(text.encode()) == text


def test_decode_bytes_accepts_empty_input() -> None:
    assert decode_bytes(b"") == ""


def test_decode_bytes_rejects_nul_bytes_outside_utf16() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00\x00\x00\x01\x00\x08\x06"
    with pytest.raises(Unreadable, match=r"binary data \(NUL byte at offset 8\)"):
        decode_bytes(png)


def test_decode_bytes_rejects_control_heavy_data() -> None:
    data = bytes(range(1, 32)) * 20 + b"some text"
    with pytest.raises(Unreadable, match=r"binary data \(\d+% control characters\)"):
        decode_bytes(data)
