"""split_markdown: sections, atomic blocks, packing, sentence breaks and exact line spans."""

from __future__ import annotations

import time

import pytest
from inline_snapshot import snapshot

from kb_mcp.chunk import Chunk
from kb_mcp.chunk.markdown import DEFAULT_BUDGET_CHARS, split_markdown
from kb_mcp.ingest.readers.text import markdown_title


def _outline(chunks: list[Chunk]) -> list[tuple[tuple[str, ...], int, int]]:
    return [(c.heading_path, c.start_line, c.end_line) for c in chunks]


def _covered(source: str, chunk: Chunk) -> str:
    """The lines a chunk cites, joined as ``read`` returns them (``\\n`` lines, CRLF kept)."""
    lines = source.split("\n")[chunk.start_line - 1 : chunk.end_line]
    return "\n".join(lines).removesuffix("\r")


def _sentences(count: int, start: int = 0) -> str:
    return " ".join(f"Sentence {i} is about the build cache." for i in range(start, count))


def test_split_markdown_blank_document_has_no_chunks() -> None:
    assert split_markdown("") == []
    assert split_markdown(" \n\n\t\n") == []


def test_split_markdown_skips_frontmatter_but_keeps_line_numbers() -> None:
    source = "---\ntitle: Notes\ntags: [a, b]\n---\n\n# Install\n\nRun make.\n"

    assert split_markdown(source) == snapshot(
        [
            Chunk(
                ordinal=0,
                heading_path=("Install",),
                start_line=6,
                end_line=8,
                text="# Install\n\nRun make.",
            )
        ]
    )


def test_split_markdown_keeps_a_leading_rule_that_is_not_frontmatter() -> None:
    source = "---\n\nNot metadata.\n\n---\n\nStill text.\n"

    chunks = split_markdown(source)

    assert [c.text for c in chunks] == [source.rstrip("\n")]


def test_split_markdown_heading_paths_nest_atx_and_setext_headings() -> None:
    source = (
        "Intro.\n\n"
        "Guide\n=====\n\nAbout.\n\n"
        "Install\n-------\n\nSteps.\n\n"
        "### On Linux ###\n\nApt.\n\n"
        "## Usage\n\nRun.\n\n"
        "# Appendix\n\nMore.\n"
    )

    assert _outline(split_markdown(source)) == snapshot(
        [
            ((), 1, 1),
            (("Guide",), 3, 6),
            (("Guide", "Install"), 8, 11),
            (("Guide", "Install", "On Linux"), 13, 15),
            (("Guide", "Usage"), 17, 19),
            (("Appendix",), 21, 23),
        ]
    )


def test_split_markdown_never_joins_two_sections() -> None:
    source = "".join(f"## Part {i}\n\nShort body {i}.\n\n" for i in range(5))

    chunks = split_markdown(source, budget=10_000)

    assert [c.text for c in chunks] == [f"## Part {i}\n\nShort body {i}." for i in range(5)]


def test_split_markdown_drops_bodiless_parent_heading_but_keeps_bodiless_leaf() -> None:
    source = "# Parent\n\n## Child\n\nText.\n\n## Empty leaf\n"

    assert _outline(split_markdown(source)) == snapshot(
        [(("Parent", "Child"), 3, 5), (("Parent", "Empty leaf"), 7, 7)]
    )


def test_split_markdown_fence_is_atomic_and_hides_headings_inside_it() -> None:
    fence = "```python\n# not a heading\n" + "x = 1\n" * 20 + "```"  # over budget, under cap
    source = f"# Code\n\nBefore.\n\n{fence}\n\nAfter.\n"

    chunks = split_markdown(source, budget=100, overlap=0)

    assert [c.text for c in chunks] == ["# Code\n\nBefore.", fence, "After."]
    assert {c.heading_path for c in chunks} == {("Code",)}


def test_split_markdown_unterminated_fence_ends_at_next_heading() -> None:
    source = "# A\n\n```sh\nmake\n\n# B\n\nText.\n"

    assert _outline(split_markdown(source)) == snapshot([(("A",), 1, 4), (("B",), 6, 8)])


def test_split_markdown_table_is_atomic() -> None:
    table = "| key | value |\n|-----|-------|\n" + "| k | a long enough value |\n" * 3
    source = f"Before.\n\n{table}\nAfter.\n"

    chunks = split_markdown(source, budget=80, overlap=0)  # the table is 112 chars, cap 120

    assert [c.text for c in chunks] == ["Before.", table.rstrip("\n"), "After."]


def test_split_markdown_packs_whole_blocks_greedily_up_to_budget() -> None:
    blocks = ["a" * 30, "b" * 30, "c" * 30, "d" * 30, "e" * 30]
    source = "\n\n".join(blocks) + "\n"

    chunks = split_markdown(source, budget=100, overlap=0)

    assert [c.text for c in chunks] == [
        "\n\n".join(blocks[:3]),
        "\n\n".join(blocks[3:]),
    ]


def test_split_markdown_next_chunk_repeats_trailing_blocks_within_overlap() -> None:
    blocks = ["a" * 60, "b" * 20, "c" * 60, "d" * 20]
    source = "\n\n".join(blocks) + "\n"

    chunks = split_markdown(source, budget=90, overlap=25)

    assert [c.text for c in chunks] == [
        "\n\n".join(blocks[:2]),
        "\n\n".join(blocks[1:3]),
        blocks[3],
    ]


def test_split_markdown_overlap_reaches_into_sentences_of_a_paragraph() -> None:
    paragraph = _sentences(4)
    source = f"{paragraph}\n\n{'x' * 150}\n"

    chunks = split_markdown(source, budget=200, overlap=60)

    assert chunks[1].text == f"Sentence 3 is about the build cache.\n\n{'x' * 150}"
    assert (chunks[1].start_line, chunks[1].end_line) == (1, 3)


def test_split_markdown_overlap_never_crosses_sections() -> None:
    source = "# A\n\n" + "a" * 80 + "\n\n# B\n\n" + "b" * 80 + "\n"

    chunks = split_markdown(source, budget=100, overlap=90)

    assert [c.text for c in chunks] == ["# A\n\n" + "a" * 80, "# B\n\n" + "b" * 80]


def test_split_markdown_splits_long_list_between_items() -> None:
    items = [f"- item {i} " + "w" * 40 for i in range(6)]
    source = "\n".join(items) + "\n"

    chunks = split_markdown(source, budget=120, overlap=0)

    assert [c.text for c in chunks] == [
        "\n".join(items[:2]),
        "\n".join(items[2:4]),
        "\n".join(items[4:]),
    ]


def test_split_markdown_splits_long_paragraph_at_sentence_ends() -> None:
    source = "# Notes\n\n" + _sentences(30) + "\n"

    chunks = split_markdown(source, budget=200, overlap=0)

    assert len(chunks) > 3
    assert all(len(c.text) <= 200 and c.text.endswith("cache.") for c in chunks)
    assert [(c.start_line, c.end_line) for c in chunks[1:]] == [(3, 3)] * (len(chunks) - 1)
    assert " ".join(c.text for c in chunks) == source.rstrip("\n")


def test_split_markdown_splits_long_chinese_paragraph_at_cjk_sentence_ends() -> None:
    paragraph = "".join(f"第{i}步：运行构建命令。" for i in range(20)) + "完成了吗？完成了！"

    chunks = split_markdown(paragraph, budget=40, overlap=0)

    assert len(chunks) > 3
    assert all(len(c.text) <= 40 and c.text[-1] in "。！？" for c in chunks)
    assert "".join(c.text for c in chunks) == paragraph


def test_split_markdown_hard_splits_unpunctuated_cjk_at_the_budget() -> None:
    paragraph = "知识库" * 50

    chunks = split_markdown(paragraph, budget=60, overlap=0)

    assert [len(c.text) for c in chunks] == [60, 60, 30]
    assert "".join(c.text for c in chunks) == paragraph


def test_split_markdown_hard_splits_a_run_on_sentence_at_whitespace() -> None:
    paragraph = " ".join(["word"] * 100)

    chunks = split_markdown(paragraph, budget=50, overlap=0)

    assert all(len(c.text) <= 50 and c.text.strip() == c.text for c in chunks)
    assert " ".join(c.text for c in chunks) == paragraph


def test_split_markdown_leaves_cjk_text_untouched() -> None:
    source = "# 安装　指南\n\n在 Linux 上运行「make」，然后：\n\n- 第一步　检查\n- 第二步\n"

    chunks = split_markdown(source)

    assert [(c.heading_path, c.text) for c in chunks] == [(("安装　指南",), source.rstrip("\n"))]


@pytest.mark.parametrize(
    "source",
    [
        "---\ntitle: x\n---\n# A\n\npara one\nstill one   \n\n* item\n* item\n\n## B\n\n"
        "```\ncode\n```\n",
        "# Windows\r\n\r\nline one.\r\nline two.\r\n\r\n| a | b |\r\n|---|---|\r\n| 1 | 2 |\r\n",
        "Title\n=====\n\n> quoted\n> more\n\n<div>\nhtml\n</div>\n\n\tindented code\n",
        "# 中文\n\n第一段。\n\n第二段，没有结尾标点\n\n## 子节\n\n- 项目\n",
        "\n\n\n# Late start\n\ntext with trailing tab\t\n\n\n",
        "# Page\x0cbreak\n\nA form feed\x0c, U+2028\u2028 or lone \r ends no line.\n",
    ],
)
def test_split_markdown_chunk_text_equals_the_lines_it_cites(source: str) -> None:
    for chunk in split_markdown(source, budget=60, overlap=20):
        assert chunk.text == _covered(source, chunk)


@pytest.mark.parametrize(
    "source",
    [
        "# Long\n\n" + _sentences(40) + "\n\nTail.\n",
        "# 长\n\n" + "这是很长的一句话没有标点" * 40 + "。结束！\n",
        "intro line\n" + "- " + _sentences(12) + "\n- short\n",
        "wrapped " * 20 + "sentence.\nNext line " * 10 + "ends.\n",
    ],
)
def test_split_markdown_pieces_of_long_lines_stay_inside_the_lines_they_cite(source: str) -> None:
    for chunk in split_markdown(source, budget=120, overlap=40):
        covered = _covered(source, chunk)
        first_line = source.split("\n")[chunk.start_line - 1]
        last_line = source.split("\n")[chunk.end_line - 1]
        at = covered.find(chunk.text)
        assert at != -1
        assert at < len(first_line) + 1
        assert len(covered) - (at + len(chunk.text)) < len(last_line) + 1
        assert len(chunk.text) <= 120


def test_split_markdown_counts_lines_as_read_does_not_at_form_feeds() -> None:
    source = "# Notes\n\npage one\x0cpage two\x0cpage three\n\n## Two\n\nzebrafish.\n"

    assert _outline(split_markdown(source)) == snapshot(
        [(("Notes",), 1, 3), (("Notes", "Two"), 5, 7)]
    )


def test_split_markdown_numbers_chunks_in_document_order() -> None:
    source = "# A\n\n" + _sentences(20) + "\n\n# B\n\n" + _sentences(20) + "\n"

    chunks = split_markdown(source, budget=150)

    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert [c.start_line for c in chunks] == sorted(c.start_line for c in chunks)


def test_split_markdown_rejects_a_budget_below_one() -> None:
    with pytest.raises(ValueError, match="budget"):
        split_markdown("text", budget=0)


def test_split_markdown_handles_five_megabytes_in_linear_time() -> None:
    section = (
        "## Section\n\n" + _sentences(60) + "\n\n- a\n- b\n\n```\n# x\n```\n\n" + "中文。" * 300
    )
    source = (section + "\n\n") * (5_000_000 // len(section))

    started = time.perf_counter()
    chunks = split_markdown(source)
    elapsed = time.perf_counter() - started

    assert elapsed < 5.0, f"5 MB took {elapsed:.2f}s"
    assert max(len(c.text) for c in chunks) <= DEFAULT_BUDGET_CHARS
    assert len(chunks) >= source.count("## Section")


def test_heading_and_table_lines_with_a_long_run_of_spaces_are_read_in_linear_time() -> None:
    """The ATX heading pattern (and the title reader's) had a lazy title before an
    optional closing ``#`` run, and the table delimiter pattern nested runs of spaces:
    both backtracked over a long run of spaces in quadratic time (a heading line holding
    20,000 spaces took 14 s; these 50,000, minutes in all)."""
    spaces = " " * 50_000
    text = f"# Ocelot{spaces}x\n\n| a | b |\n|---{spaces}x\n\nThe ocelot moved north.\n"

    started = time.perf_counter()
    chunks = split_markdown(text)
    title = markdown_title(text)
    elapsed = time.perf_counter() - started

    assert elapsed < 2.0, f"{elapsed:.1f}s"
    assert chunks[-1].heading_path[0].startswith("Ocelot")
    assert title is not None and title.startswith("Ocelot")
