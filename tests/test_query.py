"""parse_query / Query.match_expression: user text is data, never FTS5 syntax.

Guards against: FTS5 operators (NEAR, OR, *, -, :, ^, parentheses) injected from a query,
syntax errors that would turn a question into an error or an empty answer, unbounded
MATCH expressions, and query terms that the index copy never produced.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inline_snapshot import snapshot

from kb_mcp.index.textprep import FTS_TOKENIZER, index_copy
from kb_mcp.search.query import MAX_TERMS, Query, cjk_phrases, parse_query, quote_fts

# One or more FTS5 string literals joined by OR, and nothing else.
_LITERALS = re.compile(r'"(?:[^"]|"")*"(?: OR "(?:[^"]|"")*")*')

SPECIAL_INPUTS = [
    '"',
    '""',
    'say "hello',
    "*",
    "prefix*",
    "NEAR(a b)",
    "NEAR(a b, 3)",
    "-x",
    "a - b",
    "a:b",
    "head:install",
    "{head body}:x",
    "(",
    ")",
    "((a)",
    "^",
    "^start",
    "AND OR NOT",
    "a AND b OR c NOT d",
    "\\",
    "C:\\Users\\me\\file.txt",
    '\\"',
    "🔥🚀",
    "fix 🔥 bug",
    "+",
    "a + b",
    "'; DROP TABLE t; --",
    "\x00",
    "x\x00y",
    "\ud800 lone surrogate",
    "²³ ⅻ ǅ",
    "e\u0301 combining",
    "",
    "   \t\n",
    "x" * 10_000,
    " ".join(f"w{i}" for i in range(3_000))[:10_000],
    "机" * 10_000,
]


@pytest.fixture(scope="module")
def fts() -> Iterator[apsw.Connection]:
    """A real FTS5 table with the production tokenizer and a few index copies in it."""
    conn = apsw.Connection(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(head, body, tokenize='{FTS_TOKENIZER}')")
    for head, body in [
        ("Install", "Run make install; see getUserById in users.py."),
        ("机器学习", "机器学习模型的索引"),
        ("Near", "NEAR and OR are plain words here"),
    ]:
        conn.execute(
            "INSERT INTO t(head, body) VALUES (?, ?)", (index_copy(head), index_copy(body))
        )
    yield conn
    conn.close()


def _run(conn: apsw.Connection, expression: str) -> list[int]:
    return [row[0] for row in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,))]


def _assert_safe(conn: apsw.Connection, text: str) -> None:
    expression = parse_query(text).match_expression()
    if expression is None:
        return
    assert _LITERALS.fullmatch(expression), expression
    _run(conn, expression)  # raises apsw.SQLError on any FTS5 syntax error


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "how does getUserById work", '"getUserById" OR "get" OR "User" OR "Id" OR "work"'
        ),
        pytest.param("机器学习", '"机 器" OR "器 学" OR "学 习" OR "机" OR "器" OR "学" OR "习"'),
        pytest.param("索引", '"索 引" OR "索" OR "引"'),
        ("库", '"库"'),
    ],
)
def test_match_expression_docstring_examples(text: str, expected: str) -> None:
    assert parse_query(text).match_expression() == expected


def test_match_expression_near_and_minus_are_words_and_stopword_a_is_dropped() -> None:
    """The docstring shows "a" kept here; the stopword rule (only stopwords? keep) drops it."""
    assert parse_query("NEAR(a b) -c").match_expression() == '"NEAR" OR "b" OR "c"'


def test_parse_query_docstring_examples_terms_and_phrases() -> None:
    examples = ["how does getUserById work", "NEAR(a b) -c", "机器学习", "索引", "库"]
    assert {text: parse_query(text) for text in examples} == snapshot(
        {
            "how does getUserById work": Query(
                text="how does getUserById work",
                terms=("getUserById", "get", "User", "Id", "work"),
                phrases=(),
            ),
            "NEAR(a b) -c": Query(text="NEAR(a b) -c", terms=("NEAR", "b", "c"), phrases=()),
            "机器学习": Query(
                text="机器学习", terms=(), phrases=("机器", "器学", "学习", "机", "器", "学", "习")
            ),
            "索引": Query(text="索引", terms=(), phrases=("索引", "索", "引")),
            "库": Query(text="库", terms=(), phrases=("库",)),
        }
    )


@pytest.mark.parametrize("text", SPECIAL_INPUTS)
def test_match_expression_special_input_is_none_or_quoted_literals(
    fts: apsw.Connection, text: str
) -> None:
    _assert_safe(fts, text)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=200))
def test_match_expression_any_text_never_raises_fts5_syntax_error(text: str) -> None:
    conn = apsw.Connection(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(head, body, tokenize='{FTS_TOKENIZER}')")
    _assert_safe(conn, text)


OPERATOR_SOUP = ['"', "*", "(", ")", "^", ":", "-", "+", "\\", "{", "}", ",", " ", "NEAR",
                 "AND", "OR", "NOT", "a", "x1", "机", "器", "🔥"]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(OPERATOR_SOUP), max_size=30))
def test_match_expression_operator_soup_never_raises_fts5_syntax_error(parts: list[str]) -> None:
    conn = apsw.Connection(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(head, body, tokenize='{FTS_TOKENIZER}')")
    _assert_safe(conn, "".join(parts))


def test_match_expression_operator_words_match_as_plain_words(fts: apsw.Connection) -> None:
    assert parse_query("NEAR").match_expression() == '"NEAR"'
    assert parse_query("OR").match_expression() == '"OR"'  # a stopword, but the only word
    assert _run(fts, '"NEAR"') == [3]
    assert _run(fts, '"OR"') == [3]


def test_match_expression_none_when_nothing_to_search() -> None:
    for text in ["", "   ", "🔥🚀", "*()^:-", '"""']:
        query = parse_query(text)
        assert query.is_empty
        assert query.match_expression() is None


def test_quote_fts_doubles_inner_quotes() -> None:
    assert quote_fts('say "hi"') == '"say ""hi"""'


def test_parse_query_drops_stopwords() -> None:
    assert parse_query("what is the install command for the server").terms == (
        "install",
        "command",
        "server",
    )


def test_parse_query_keeps_stopwords_when_query_is_only_stopwords() -> None:
    assert parse_query("to be or not to be").terms == ("to", "be", "or", "not")


def test_parse_query_drops_stopwords_when_cjk_phrases_remain() -> None:
    assert parse_query("the 库") == Query(text="the 库", terms=(), phrases=("库",))


def test_parse_query_cjk_run_becomes_overlapping_bigrams_then_characters() -> None:
    assert parse_query("机器学习").phrases == ("机器", "器学", "学习", "机", "器", "学", "习")
    assert parse_query("学习 and 机器").phrases == ("学习", "学", "习", "机器", "机", "器")


def test_parse_query_cjk_function_characters_are_left_out() -> None:
    # 是 and 的 leave the bigrams and characters; the question particle 吗 too
    assert parse_query("索引是的吗").phrases == ("索引", "索", "引")
    # a run made only of function characters keeps its bigrams
    assert cjk_phrases("是的") == ["是的"]


def test_parse_query_single_cjk_char_stays_one_phrase() -> None:
    assert parse_query("库").phrases == ("库",)
    assert cjk_phrases("库") == ["库"]


def test_parse_query_cjk_next_to_latin_splits_into_phrase_and_term() -> None:
    assert parse_query("用Python写") == Query(
        text="用Python写", terms=("Python",), phrases=("用", "写")
    )


def test_parse_query_hangul_is_a_term_not_bigrams() -> None:
    assert parse_query("한국어 검색") == Query(
        text="한국어 검색", terms=("한국어", "검색"), phrases=()
    )


def test_parse_query_cjk_phrase_matches_spaceless_text_in_index(fts: apsw.Connection) -> None:
    assert _run(fts, parse_query("索引").match_expression()) == [2]
    assert _run(fts, parse_query("学习模型").match_expression()) == [2]


def _letters(n: int) -> str:
    """A distinct all-letter word per n (no digits: those split off as parts)."""
    return "w" + "".join(chr(ord("a") + int(d)) for d in str(n))


def test_parse_query_bounds_terms_to_max_terms() -> None:
    many_words = parse_query(" ".join(_letters(i) for i in range(1_000)))
    assert len(many_words.terms) == MAX_TERMS
    assert many_words.terms[:2] == ("wa", "wb")

    many_cjk = parse_query("".join(chr(0x4E00 + i) for i in range(500)) + " latin words")
    assert len(many_cjk.phrases) == MAX_TERMS
    assert many_cjk.terms == ()

    mixed = parse_query("机器学习 " + " ".join(_letters(i) for i in range(200)))
    assert len(mixed.phrases) + len(mixed.terms) == MAX_TERMS
    assert mixed.phrases == ("机器", "器学", "学习", "机", "器", "学", "习")


def test_parse_query_bounds_10k_char_input() -> None:
    query = parse_query("lorem ipsum 机器 " * 667)
    assert len(query.text) > 10_000
    assert len(query.terms) + len(query.phrases) <= MAX_TERMS
    assert query == Query(text=query.text, terms=("lorem", "ipsum"), phrases=("机器", "机", "器"))


def test_parse_query_dedupes_case_insensitively_keeping_first_spelling() -> None:
    assert parse_query("Foo foo FOO bar BAR").terms == ("Foo", "bar")
    assert parse_query("学习学习").phrases == ("学习", "习学", "学", "习")


@pytest.mark.parametrize(
    "text",
    [
        "how does getUserById work",
        "HTTPServer config",
        "机器学习 model",
        "snake_case_name lookup",
        pytest.param("utf8 decoding"),
        pytest.param("mContext leak"),
        pytest.param("test_getUserById"),
        pytest.param("调用getUserById函数"),
    ],
)
def test_match_expression_every_term_matches_a_document_of_the_same_text(text: str) -> None:
    """Query and index agree by construction: each quoted item finds the query's own text."""
    conn = apsw.Connection(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(head, body, tokenize='{FTS_TOKENIZER}')")
    conn.execute("INSERT INTO t(head, body) VALUES ('', ?)", (index_copy(text),))
    expression = parse_query(text).match_expression()
    assert expression is not None
    missed = [item for item in expression.split(" OR ") if _run(conn, item) != [1]]
    assert missed == []
