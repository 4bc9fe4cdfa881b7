"""The Chinese number question: the clause that says what is asked must hold a number. Pure.

English number questions are read by the answer-type floor (``floor.py``): a number
must stand near the question's words. Chinese is indexed one character a token, and
every release note holds a number near some of a question's characters ("6 小时，以减少
移动网络流量" for "每个月能节省多少移动网络流量"). What a reader sees is that the clause
saying what is asked holds none: the traffic saved has no figure, the repair time
("否则设备需返厂维修") none either.

So a question asking 多少 / 多久 / 多长时间 / 几<measure> answers only when, in one of
its leading passages, a clause that holds the most of the question's characters holds
a number (digits, or 一 … 十 百 千 万 两 半). Headings and list markers are not read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kb_mcp.index.textprep import CJK_CHAR

_ASKS = re.compile(
    r"多少|多久|多长时间|几(?:个|次|天|年|岁|人|名|位|种|家|座|条|辆|台|分钟|小时|月|周)"
)
# The characters of the asking phrase and the commonest function characters weigh nothing.
_FRAME = frozenset("多少久长时间几个次的了是在有和与及或吗呢么什请需要能会")
_CLAUSE = re.compile(r"[。，；！？!?;,\n：:]")
_MARKER = re.compile(r"^\s*(?:#+.*|\d+[.、)]\s*|[-*]\s+)")
_NUMBER = re.compile(r"\d|[一二三四五六七八九十百千万亿两半]")


def asks_for_cjk_number(question: str) -> bool:
    """Whether ``question`` is a Chinese question asking for a count, an amount or a time."""
    return _ASKS.search(question) is not None


def _asked_chars(question: str) -> set[str]:
    question = _ASKS.sub(" ", question)
    return {c for c in question if CJK_CHAR.fullmatch(c) and c not in _FRAME}


def best_clauses(question: str, text: str) -> list[str]:
    """The clauses of ``text`` holding the most of the question's characters (ties all),
    [] when none holds any; a heading line is skipped and a list marker is cut off."""
    asked = _asked_chars(question)
    scored = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        line = _MARKER.sub("", line)
        for clause in _CLAUSE.split(line):
            shared = len(asked & set(clause))
            if shared:
                scored.append((shared, clause))
    if not scored:
        return []
    top = max(shared for shared, _ in scored)
    return [clause for shared, clause in scored if shared == top]


def cjk_number_reason(question: str, texts: Sequence[str]) -> str | None:
    """Why a Chinese number question gets nothing, or None when one of ``texts`` (the
    leading passages) has a best clause holding a number."""
    if not asks_for_cjk_number(question) or not texts:
        return None
    for text in texts:
        if any(_NUMBER.search(clause) for clause in best_clauses(question, text)):
            return None
    return (
        f"nothing answers it: the question asks for a number, and in none of the "
        f"{len(texts)} closest passages does the clause that says what it asks about "
        "hold one; the answer is probably not stored"
    )
