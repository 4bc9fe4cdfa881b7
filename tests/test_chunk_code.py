"""split_code: cuts at top-level definitions, packing, splitting inside long ones, exact spans."""

from __future__ import annotations

from itertools import pairwise

import pytest
from inline_snapshot import snapshot

from kb_mcp.chunk import Chunk
from kb_mcp.chunk.code import language_for_suffix, split_code

PYTHON = '''\
"""Settings and the library."""

import os
import sys


# Reads the file once.
@cache
@trace(
    level=2,
)
def load_settings(path):
    return os.environ.get(path)


async def fetch(url):
    return url


LIMIT = 10


class Library:
    def search(self, query):
        return query
'''

JAVASCRIPT = """\
import { readFile } from "node:fs";

// Adds two numbers.
export function add(a, b) {
  return a + b;
}

export const multiply = async (a, b) => {
  return a * b;
};

@Component({ selector: "app" })
export default class Widget {
  render() {}
}
"""

GO = """\
package server

import "fmt"

type Server struct {
\tname string
}

// Handle says hello.
func (s *Server) Handle() {
\tfmt.Println(s.name)
}
"""

C = """\
#include <stdio.h>

/* The helper. */
static int
helper(int x)
{
    return x;
}

int main(int argc, char **argv) {
    return helper(argc);
}
"""


def _outline(chunks: list[Chunk]) -> list[tuple[tuple[str, ...], int, int]]:
    return [(c.heading_path, c.start_line, c.end_line) for c in chunks]


def _covered(source: str, chunk: Chunk) -> str:
    """The lines a chunk cites, joined as ``read`` returns them (``\\n`` lines, CRLF kept)."""
    lines = source.split("\n")[chunk.start_line - 1 : chunk.end_line]
    return "\n".join(lines).removesuffix("\r")


def _long_function(blocks: int) -> str:
    body = "\n\n".join(f"    step_{i} = compute({i})\n    check(step_{i})" for i in range(blocks))
    return f"def build():\n{body}\n    return True\n"


def test_language_for_suffix_names_code_and_rejects_prose() -> None:
    suffixes = [".py", ".PY", ".ts", ".tsx", ".js", ".go", ".rs", ".java", ".cpp", ".h", ".rb"]
    suffixes += [".md", ".txt", ""]

    assert {s: language_for_suffix(s) for s in suffixes} == snapshot(
        {
            ".py": "python",
            ".PY": "python",
            ".ts": "typescript",
            ".tsx": "typescript",
            ".js": "javascript",
            ".go": "go",
            ".rs": "rust",
            ".java": "java",
            ".cpp": "cpp",
            ".h": "c",
            ".rb": "ruby",
            ".md": None,
            ".txt": None,
            "": None,
        }
    )


def test_split_code_blank_source_has_no_chunks() -> None:
    assert split_code("", "python") == []
    assert split_code("\n  \n", "go") == []


def test_split_code_python_cuts_at_definitions_with_their_decorators_and_comments() -> None:
    chunks = split_code(PYTHON, "python", budget=120)

    assert _outline(chunks) == snapshot([((), 1, 4), (("def load_settings",), 7, 13), ((), 16, 25)])
    assert chunks[1].text.startswith("# Reads the file once.\n@cache\n@trace(")


def test_split_code_preamble_never_shares_a_chunk_with_definitions() -> None:
    chunks = split_code(PYTHON, "python", budget=10_000)

    assert _outline(chunks) == snapshot([((), 1, 4), ((), 7, 25)])


def test_split_code_javascript_cuts_at_functions_arrow_bindings_and_classes() -> None:
    chunks = split_code(JAVASCRIPT, "javascript", budget=80)

    assert _outline(chunks) == snapshot(
        [
            ((), 1, 1),
            (("function add",), 3, 6),
            (("const multiply",), 8, 10),
            (("class Widget",), 12, 15),
        ]
    )


def test_split_code_go_cuts_at_types_and_methods() -> None:
    chunks = split_code(GO, "go", budget=80)

    assert _outline(chunks) == snapshot(
        [((), 1, 3), (("type Server",), 5, 7), (("func Handle",), 9, 12)]
    )


def test_split_code_c_keeps_the_return_type_line_with_its_function() -> None:
    chunks = split_code(C, "c", budget=60)

    assert _outline(chunks) == snapshot([((), 1, 1), (("helper",), 3, 8), (("main",), 10, 12)])


def test_split_code_long_definition_splits_at_blank_lines_inside_it() -> None:
    source = _long_function(12)

    chunks = split_code(source, "python", budget=150, overlap=0)

    assert len(chunks) > 2
    assert {c.heading_path for c in chunks} == {("def build",)}
    assert all(len(c.text) <= 150 for c in chunks)
    assert all(c.text.lstrip().startswith(("def build", "step_")) for c in chunks)


def test_split_code_long_definition_pieces_overlap_by_whole_blocks() -> None:
    source = _long_function(12)

    chunks = split_code(source, "python", budget=150, overlap=60)

    for previous, chunk in pairwise(chunks):
        assert chunk.start_line <= previous.end_line
        assert chunk.text.startswith("    step_")


def test_split_code_block_without_blank_lines_splits_between_lines() -> None:
    source = "def dense():\n" + "".join(f"    x_{i} = {i}\n" for i in range(40))

    chunks = split_code(source, "python", budget=100, overlap=0)

    assert len(chunks) > 3
    assert all(c.text == _covered(source, c) for c in chunks)
    assert [c.start_line for c in chunks[1:]] == [c.end_line + 1 for c in chunks[:-1]]


def test_split_code_python_2_is_cut_at_its_top_level_statements_as_python_3_is() -> None:
    # the scan reads strings, brackets and lines, not the grammar: print statements pass
    source = "import os\n\ndef old(x):\n    print x\n\nprint 'ready'\n\nclass Thing:\n    pass\n"

    chunks = split_code(source, "python", budget=30)

    assert _outline(chunks) == snapshot(
        [((), 1, 1), (("def old",), 3, 4), ((), 6, 6), (("class Thing",), 8, 9)]
    )


def test_split_code_python_with_a_string_left_open_falls_back_to_the_line_heuristic() -> None:
    source = "import os\n\ndef old(x):\n    return 'x\n\nprint(1)\n\nclass Thing:\n    pass\n"

    chunks = split_code(source, "python", budget=30)

    assert _outline(chunks) == snapshot(
        [((), 1, 1), (("def old",), 3, 4), (("def old",), 6, 6), (("class Thing",), 8, 9)]
    )


def test_split_code_python_statements_inside_strings_brackets_and_continuations_are_not_cut() -> (
    None
):
    source = (
        'TEXT = """\ndef not_code():\n"""\n\n\nCALL = f(\n1,\n)\n\n\nx = 1 + \\\n2\n\n\n'
        "@dec\n# note\n@dec2\nclass Real:\n    pass\nelse_ = 1\n\n\n"
        "try:\n    pass\nexcept OSError:\n    pass\nfinally:\n    pass\n"
    )

    chunks = split_code(source, "python", budget=40)

    assert _outline(chunks) == snapshot(
        [
            ((), 1, 3),
            ((), 6, 12),
            (("class Real",), 15, 19),
            ((), 20, 24),
            ((), 23, 26),
            ((), 25, 27),
            ((), 27, 28),
        ]
    )


def test_split_code_unknown_language_packs_blank_line_blocks() -> None:
    source = "SELECT 1;\n\nSELECT 2;\n\n" + "SELECT 3;\n" * 5

    chunks = split_code(source, None, budget=30, overlap=0)

    assert _outline(chunks) == snapshot([((), 1, 3), ((), 5, 7), ((), 8, 9)])


def test_split_code_python_lines_are_counted_as_read_counts_them() -> None:
    source = "import os\r\n\x0c\n# lone \r is no line end\ndef after_page_break():\n    return 1\n"

    chunks = split_code(source, "python", budget=80)

    assert _outline(chunks) == snapshot([((), 1, 1), (("def after_page_break",), 3, 5)])
    assert all(c.text == _covered(source, c) for c in chunks)


@pytest.mark.parametrize(
    ("source", "language"),
    [
        (PYTHON, "python"),
        (PYTHON.replace("\n", "\r\n"), "python"),
        (JAVASCRIPT, "typescript"),
        (GO, "go"),
        (C, "cpp"),
        (_long_function(20), "python"),
        ("# 中文注释\ndef 你好():\n    return '世界'\n", "python"),
    ],
)
def test_split_code_chunk_text_equals_the_lines_it_cites(source: str, language: str) -> None:
    chunks = split_code(source, language, budget=90, overlap=30)

    assert chunks
    assert all(c.text == _covered(source, c) for c in chunks)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
