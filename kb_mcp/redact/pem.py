"""PEM private keys out of text, whole and line by line.

Every line of a key block, body included, becomes ``[REDACTED:private_key]`` (its
indentation and line ending kept), so a redacted document has exactly the lines of the
original and citations (line spans) stay exact; text before BEGIN and after END on their
lines stays too. Three shapes:

- BEGIN … END: the whole block.
- BEGIN without END (a truncated key): the BEGIN line and the key-like lines after it
  (base64, ``Proc-Type:`` style headers, blank lines), to the end of the text if it ends
  there. The first other line ends the key: a prose mention of a BEGIN line takes only its
  own line, not the rest of the document.
- END without BEGIN in view (a cut starting mid-key): the END line, the base64 line right
  above it, and the full-width (40+ column) base64 lines above that. The END line is the
  evidence. Base64 lines with no END in view are not redacted: 64-column base64 is also
  every certificate, public key and test fixture, and a caller that cuts text is expected
  to redact the whole document first.
"""

from __future__ import annotations

import re

from kb_mcp.redact._rule import marker

_LABEL = r"[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
# The END must come before the next BEGIN: a truncated key never swallows the next block.
_BLOCK = re.compile(
    rf"-----BEGIN{_LABEL}(?P<end>(?:(?!-----BEGIN).)*?-----END{_LABEL})?", re.DOTALL
)
_END = re.compile(rf"-----END{_LABEL}")
_BODY = re.compile(r"[A-Za-z0-9+/=]{1,100}")
_HEADER = re.compile(r"[A-Za-z][A-Za-z-]{0,30}:[^\n]{0,200}")
_LINE_CONTENT = re.compile(r"(?m)^([ \t]*)(\S[^\r\n]*)")


def _mark_lines(segment: str) -> str:
    """Each non-blank line of the segment → its indentation plus a marker."""
    return _LINE_CONTENT.sub(lambda m: m.group(1) + marker("private_key"), segment)


def _truncated_end(text: str, pos: int) -> int:
    """Where a key without END stops: after the key-like lines that follow ``pos``."""
    end = text.find("\n", pos)
    if end < 0:
        return len(text)
    while end < len(text):
        nxt = text.find("\n", end + 1)
        nxt = len(text) if nxt < 0 else nxt
        line = text[end + 1 : nxt].strip()
        if line and not (_BODY.fullmatch(line) or _HEADER.fullmatch(line)):
            break
        end = nxt
    return end


def _body_start(text: str, end_at: int) -> int:
    """Start of the run of base64 lines right above the END line starting at ``end_at``."""
    start = text.rfind("\n", 0, end_at) + 1
    if text[start:end_at].strip():
        return end_at  # END shares its line with other text: no body above to trust
    first = start
    while first > 0:
        above = text.rfind("\n", 0, first - 1) + 1
        line = text[above : first - 1].strip()
        # the last body line may be short (or a PGP "=CRC" line); the ones above it are full
        # 64/70/76-column lines, which keeps a heading word above the key out of it
        if not _BODY.fullmatch(line) or (first < start and len(line) < 40):
            break
        first = above
    return first if first < start else end_at


def redact_pem(text: str, kinds: list[str]) -> str:
    """Private key blocks → marker lines, one kind per block (see the module docstring)."""
    if "-----" not in text:
        return text
    out, pos = [], 0
    for match in _BLOCK.finditer(text):
        if match.start() < pos:
            continue
        end = match.end() if match["end"] else _truncated_end(text, match.end())
        out += [text[pos : match.start()], _mark_lines(text[match.start() : end])]
        kinds.append("private_key")
        pos = end
    text = "".join([*out, text[pos:]])
    out, pos = [], 0
    for match in _END.finditer(text):
        start = _body_start(text, match.start())
        if start == match.start():
            continue
        out += [text[pos:start], _mark_lines(text[start : match.end()])]
        kinds.append("private_key")
        pos = match.end()
    return "".join([*out, text[pos:]])


_BEGIN = re.compile(rf"-----BEGIN{_LABEL}")


def safe_cut(text: str, cut: int) -> int:
    """The latest line start at or before ``cut`` where ``text`` may be split and each
    part redacted alone as the whole would be (``redact.stream``); 0 when there is none.

    Not inside a block whose END may lie beyond (the last BEGIN in ``text[:cut]`` with
    no END after it), and not below a run of lines an END further down could take as
    its body (``_body_start``: the line right above END, and the 40+ column ones above
    it)."""
    begins = list(_BEGIN.finditer(text, 0, cut))
    if begins and _END.search(text, begins[-1].end(), cut) is None:
        cut = text.rfind("\n", 0, begins[-1].start()) + 1
    first = True
    while cut > 0:
        above = text.rfind("\n", 0, cut - 1) + 1
        line = text[above : cut - 1].strip()
        if not _BODY.fullmatch(line) or (not first and len(line) < 40):
            break
        cut, first = above, False
    return cut
