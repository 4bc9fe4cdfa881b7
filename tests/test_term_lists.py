"""The postings segment's cache of decoded term lists (issue 10: the keyword leg read
and decoded its terms' posting blobs twice per search, most of its time at 100k chunks).

Scores staying FTS5's with the cache in place is pinned by ``test_keyword_segment.py``
(it compares the segment with the full OR across rebuilds); these pin what is kept.
"""

from __future__ import annotations

import numpy as np

from kb_mcp.index.term_lists import Lists, TermLists


def _reader(calls: list[list[str]], sizes: dict[str, int]):
    def read(keys: list[str]) -> Lists:
        calls.append(list(keys))
        return {
            k: (np.arange(sizes[k], dtype=np.uint32), np.ones(sizes[k])) for k in keys if k in sizes
        }

    return read


def test_term_lists_decode_each_list_once_per_generation() -> None:
    calls: list[list[str]] = []
    read = _reader(calls, {"cell": 4, "gene": 3})
    cache = TermLists(budget=100)
    first = cache.lists(1, ["cell", "gene", "absent"], read)
    again = cache.lists(1, ["gene", "cell"], read)
    assert calls == [["cell", "gene", "absent"]]
    assert again["cell"][0] is first["cell"][0]
    assert "absent" not in first
    cache.lists(2, ["cell"], read)  # a rebuild's generation is read afresh
    assert calls[-1] == ["cell"]


def test_term_lists_drop_the_least_recently_used_past_the_budget() -> None:
    calls: list[list[str]] = []
    read = _reader(calls, {"a": 6, "b": 6, "c": 6, "huge": 50})
    cache = TermLists(budget=12)
    cache.lists(1, ["a"], read)
    cache.lists(1, ["b"], read)
    cache.lists(1, ["a"], read)  # a is now the more recent of the two
    cache.lists(1, ["c"], read)  # 18 postings: b goes
    cache.lists(1, ["a", "c"], read)
    assert calls == [["a"], ["b"], ["c"]]
    cache.lists(1, ["b"], read)
    assert calls[-1] == ["b"]
    cache.lists(1, ["huge"], read)  # larger than the whole budget: served, never kept
    cache.lists(1, ["huge"], read)
    assert calls[-2:] == [["huge"], ["huge"]]
