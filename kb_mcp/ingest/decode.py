"""Bytes → str for every text format, without guessing wrong quietly.

Order of evidence, strongest first:

1. A byte-order mark names the encoding (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE).
2. NUL bytes mean UTF-16 without a BOM if they sit at alternate positions
   (ASCII-heavy UTF-16 is half NULs); anywhere else they mean binary data.
3. Strict UTF-8, which random or legacy 8-bit bytes almost never pass.
4. The caller's declared encoding (an HTML ``<meta charset>``), if it decodes.
5. A legacy East Asian encoding (GBK/GB18030, Big5, Shift-JIS, EUC-KR), when
   charset-normalizer ranks it above cp1252 *and* the decoded text is
   overwhelmingly CJK (ideographs, full-width kana, Hangul, CJK punctuation).
   The second check keeps Western text such as "20°C ± 2°" from turning into
   half-width katakana, which charset-normalizer alone sometimes prefers.
6. cp1252 (what "latin-1" files from Windows really are), reading its five
   undefined bytes as latin-1, so this last step never fails.

Whatever decoded is then checked for control characters: text written by
people has almost none besides tab, newline, carriage return, form feed and
ESC (coloured logs), so a high share means binary data and raises ``Unreadable``.

Line endings: ``\\r\\n`` and a lone ``\\r`` both become ``\\n``. Editors and
``str.splitlines`` count each of them as one line end, so line numbers (and
therefore citations) are unchanged; afterwards ``"\\n"`` is the only line end.
Count lines with ``text.split("\\n")``: ``splitlines`` also breaks at form feed,
U+0085 and U+2028, which editors do not.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator

from kb_mcp.errors import Unreadable

# Longest BOMs first: the UTF-32 LE BOM starts with the UTF-16 LE one.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# How much of the input the heuristics look at: binary formats and UTF-16
# both show themselves in their first few kilobytes.
SNIFF_BYTES = 8192
_SNIFF_BYTES = SNIFF_BYTES

# BOM-less UTF-16: the NUL-carrying half of the byte pairs must be at least
# this share NULs, and the other half almost none (one in fifty).
_UTF16_MIN_NUL_SHARE = 0.10
_UTF16_MAX_OTHER_NUL_SHARE = 0.02

# Control characters allowed in text: tab, LF, VT, FF, CR and ESC.
_TEXT_CONTROLS = frozenset("\t\n\x0b\x0c\r\x1b")
# A character class, counted with ``findall``: ``str.translate`` with a deletion table
# walked the sample in Python-level dict lookups, 2.7 ms a file (a third of decoding on
# the bench corpus, issue 10); the class scans in C and finds nothing in most text.
_CONTROL_CHARS = re.compile(
    "["
    + "".join(re.escape(chr(c)) for c in [*range(0x20), 0x7F] if chr(c) not in _TEXT_CONTROLS)
    + "]"
)
# latin-1 decodes every byte; this table then turns 0x80-0x9F into their cp1252
# characters (€, “, —, …) except the five bytes cp1252 leaves undefined.
_CP1252_OVER_LATIN1 = {
    byte: bytes([byte]).decode("cp1252", errors="ignore") or chr(byte) for byte in range(0x80, 0xA0)
}
# More than one character in ten being a control character is not text.
_MAX_CONTROL_SHARE = 0.10
# Step 5: the candidates charset-normalizer chooses among, and the codec each is decoded
# with (the Windows supersets, which also read the vendor extensions real files hold).
_CJK_CANDIDATES = ("gb18030", "big5", "shift_jis", "euc_kr", "cp1252")
_CJK_CODECS = {"gb18030": "gb18030", "big5": "cp950", "shift_jis": "cp932", "euc_kr": "cp949"}
# How much of a file charset-normalizer looks at, and the share of the decoded non-ASCII
# characters that must be CJK for the guess to be trusted.
_CJK_SNIFF_BYTES = 64 * 1024
_MIN_CJK_SHARE = 0.9
_MIN_CJK_CHARS = 4
# Ideographs, kana (full width), Hangul, CJK punctuation and full-width forms; U+FF61-FF9F
# (half-width katakana) is left out: it is what misread Western bytes look like.
_CJK_RANGES = (
    (0x3000, 0x30FF), (0x3130, 0x318F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF), (0xFF01, 0xFF60), (0xFFE0, 0xFFE6), (0x20000, 0x2FA1F),
)  # fmt: skip


def decode_bytes(data: bytes, *, declared: str | None = None) -> str:
    """Decode file bytes to text with ``\\n`` line ends; raise ``Unreadable`` for binary data.

    ``declared`` is an encoding the file names for itself (an HTML meta charset);
    it is tried only after strict UTF-8 fails, because such declarations are
    often stale copies of a template.
    """
    text = _decode(data, declared)
    _reject_control_heavy(text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _decode(data: bytes, declared: str | None) -> str:
    """Pick the encoding by the order of evidence in the module docstring."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            # The BOM is strong evidence: a stray bad sequence after it becomes U+FFFD.
            return data[len(bom) :].decode(encoding, errors="replace")
    if b"\x00" in data:
        return _decode_nul_bearing(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if declared and (text := _try_declared(data, declared)) is not None:
        return text
    if (text := _decode_east_asian(data)) is not None:
        return text
    return data.decode("latin-1").translate(_CP1252_OVER_LATIN1)


def _decode_east_asian(data: bytes) -> str | None:
    """The text in a legacy CJK encoding if the evidence says so (step 5), else None."""
    from charset_normalizer import from_bytes  # imported here: only non-UTF-8 files pay

    matches = from_bytes(data[:_CJK_SNIFF_BYTES], cp_isolation=list(_CJK_CANDIDATES))
    if any(match.encoding == "cp1252" for match in matches):
        return None  # cp1252 reads as plausibly as any CJK guess: keep the Western reading
    best = matches.best()
    codec = _CJK_CODECS.get(best.encoding) if best is not None else None
    if codec is None:
        return None
    text = data.decode(codec, errors="replace")
    wide = [ch for ch in text[:_CJK_SNIFF_BYTES] if ord(ch) > 0x7F]
    cjk = sum(any(lo <= ord(ch) <= hi for lo, hi in _CJK_RANGES) for ch in wide)
    trusted = cjk >= _MIN_CJK_CHARS and cjk >= _MIN_CJK_SHARE * len(wide)
    return text if trusted else None


def _decode_nul_bearing(data: bytes) -> str:
    """Decode data containing NULs as BOM-less UTF-16, or reject it as binary."""
    encoding = _sniff_utf16(data[:_SNIFF_BYTES])
    if encoding is None:
        offset = data.index(b"\x00")
        raise Unreadable(f"binary data (NUL byte at offset {offset})")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        raise Unreadable(f"binary data (looks like {encoding} but does not decode)") from error


def _sniff_utf16(sample: bytes) -> str | None:
    """Name the UTF-16 byte order when NULs sit on one side of the byte pairs only."""
    pairs = len(sample) // 2
    if pairs == 0:
        return None
    even_nuls = sample[0 : pairs * 2 : 2].count(0) / pairs
    odd_nuls = sample[1 : pairs * 2 : 2].count(0) / pairs
    # "A" is 41 00 in little-endian UTF-16, so its NULs sit at odd offsets.
    if odd_nuls >= _UTF16_MIN_NUL_SHARE and even_nuls <= _UTF16_MAX_OTHER_NUL_SHARE:
        return "utf-16-le"
    if even_nuls >= _UTF16_MIN_NUL_SHARE and odd_nuls <= _UTF16_MAX_OTHER_NUL_SHARE:
        return "utf-16-be"
    return None


def _try_declared(data: bytes, declared: str) -> str | None:
    """Decode with a self-declared encoding; None when it is unknown or wrong."""
    try:
        return data.decode(declared)
    except (LookupError, UnicodeDecodeError):
        return None


def _reject_control_heavy(text: str) -> None:
    """Raise ``Unreadable`` when too many of the first characters are control characters."""
    sample = text[:_SNIFF_BYTES]
    if not sample:
        return
    controls = len(_CONTROL_CHARS.findall(sample))
    share = controls / len(sample)
    if share > _MAX_CONTROL_SHARE:
        raise Unreadable(f"binary data ({share:.0%} control characters)")


def looks_like_text(head: bytes) -> bool:
    """Whether a file's first bytes (``SNIFF_BYTES`` of them, say) read as text by the
    rules above: what a file with no reader for its name is read by (issue 20 item 10:
    ``README``, ``PKG-INFO``, ``*.mako``). A multi-byte character cut by the sample's
    end is dropped first, so UTF-8 text is not mistaken for a legacy encoding."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.reason == "unexpected end of data":
            head = head[: err.start]
    try:
        decode_bytes(head)
    except Unreadable:
        return False
    return True


def utf8_windows(data: bytes, window: int) -> Iterator[str]:
    """``decode_bytes(data)`` in pieces of about ``window`` bytes, each ending at a line
    end (a longer line at a character boundary), for a large file that must never exist
    as one string (``ingest/large``, issue 10).

    UTF-8 only, with or without its BOM: raises ``UnicodeDecodeError`` when ``data`` is
    not (the caller then decodes the whole, with every other rule of this module), and
    ``Unreadable`` when the first piece is control-heavy, as ``decode_bytes`` does.
    """
    first = pos = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    if not first and (any(data.startswith(bom) for bom, _ in _BOMS) or b"\x00" in data):
        raise UnicodeDecodeError("utf-8", b"", 0, 1, "UTF-16/32 or binary, not UTF-8")
    while pos < len(data):
        end = _piece_end(data, pos, window)
        text = data[pos:end].decode("utf-8")
        if pos == first:
            _reject_control_heavy(text)
        yield text.replace("\r\n", "\n").replace("\r", "\n")
        pos = end


def _piece_end(data: bytes, pos: int, window: int) -> int:
    """After the last newline in ``data[pos:pos+window]``; without one, the last character
    boundary there, and never between a ``\\r`` and the ``\\n`` after it."""
    limit = pos + window
    if limit >= len(data):
        return len(data)
    end = data.rfind(b"\n", pos, limit) + 1
    if not end:
        end = limit
        while end > pos + 1 and data[end] & 0xC0 == 0x80:
            end -= 1
        if data[end - 1 : end] == b"\r" and data[end : end + 1] == b"\n":
            end += 1  # the \n after it comes along
    return end
