"""The Chinese number question: the clause saying what is asked must hold a number.

Pins issue 9's Chinese absent answers (golden2 dev, session 7): the Hengda V7 4.2.0
notes say a device that loses power goes back to the factory, with no repair time, and
that the longer clock-sync interval saves mobile data, with no figure; both questions
found numbers elsewhere in the notes. Guards against: emptying the notes' own figures
("重启两次", "5000 笔"), reading a heading's version or a list marker as the number, and
questions that ask for no number.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.library import Library
from kb_mcp.search.cjk_count import asks_for_cjk_number, best_clauses, cjk_number_reason
from kb_mcp.settings import Settings

NOTES = """# 恒达 V7 验证机固件 4.2.0 发布说明

## 主要变更

- 时钟同步间隔由 60 分钟调整为 6 小时，以减少移动网络流量。
- 离线刷卡缓存上限提高到 5000 笔。

## 升级须知

1. 固件升级时请勿断电，否则设备需返厂维修。
2. 升级完成后设备会自动重启两次，约需 4 分钟。
"""


@pytest.mark.parametrize(
    ("question", "absent"),
    [
        ("恒达 V7 验证机返厂维修需要多长时间？", True),
        ("恒达 V7 固件 4.2.0 每个月能节省多少移动网络流量？", True),
        ("恒达 V7 验证机升级完成后会重启几次？", False),
        ("恒达 V7 固件 4.2.0 的离线刷卡缓存上限是多少？", False),
    ],
)
def test_cjk_number_reads_the_clause_that_says_what_is_asked(question: str, absent: bool) -> None:
    reason = cjk_number_reason(question, [NOTES])
    assert (reason is not None) == absent, best_clauses(question, NOTES)


def test_cjk_best_clauses_skip_headings_and_list_markers() -> None:
    """The title's "4.2.0" and the list's "1." are not the repair time."""
    assert best_clauses("恒达 V7 验证机返厂维修需要多长时间？", NOTES) == ["否则设备需返厂维修"]


def test_cjk_number_leaves_other_questions_alone() -> None:
    assert not asks_for_cjk_number("验证机升级固件的时候断电会怎么样？")
    assert not asks_for_cjk_number("How many validators are there?")
    assert cjk_number_reason("验证机升级固件的时候断电会怎么样？", [NOTES]) is None


def test_cjk_number_question_answers_nothing_through_the_library(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "hengda.md").write_text(NOTES, encoding="utf-8")
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.add_folder(folder)
        library.sync()
        absent = library.search("恒达 V7 验证机返厂维修需要多长时间？", mode="keyword")
        assert absent.hits == ()
        assert absent.reason is not None and "clause" in absent.reason
        assert library.search("恒达 V7 验证机升级完成后会重启几次？", mode="keyword").hits
