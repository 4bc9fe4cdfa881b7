"""The postings segment's decoded term lists, kept between searches (issue 10).

Trigger: at 100k chunks a keyword search read and decoded its terms' posting blobs twice
(once for their document frequencies, once to score), and that was most of the keyword
leg (SciFact questions: 7.9 of about 9 ms CPU). A generation's rows never change (a
rebuild writes the next generation beside it, ``index/postings.py``), so a list decoded
once stays right until its generation is dropped: cached under ``(generation, key)``, the
least recently used ones out past ``BUDGET_POSTINGS``, the same arrays whatever the
data version, so scores stay FTS5's to the last bit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

Lists = dict[str, tuple["np.ndarray", "np.ndarray"]]  # key → (positions, weighted freq)

# Postings kept (12 bytes each: a uint32 position and a float64 frequency), so at most
# about 12 MB: issue 10 bounds the server's RSS at 200 MB at 300k chunks (162 MB measured
# before this cache). Over the bench perf 100k index, 600 searches: peak RSS 128 MB, 120
# MB without the cache; a SciFact search read 43k of its 90k postings (19k at 4M).
BUDGET_POSTINGS = 1_000_000


class TermLists:
    """A bounded, thread-safe cache of decoded term lists, keyed by generation and key."""

    def __init__(self, budget: int = BUDGET_POSTINGS) -> None:
        self.budget = budget
        self._lists: OrderedDict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def lists(self, gen: int, keys: Sequence[str], read: Callable[[list[str]], Lists]) -> Lists:
        """Each key's list in generation ``gen``; ``read`` decodes the ones not kept (a
        key absent from its answer has no postings, and is not kept)."""
        found: Lists = {}
        missing = []
        with self._lock:
            for key in dict.fromkeys(keys):
                kept = self._lists.get((gen, key))
                if kept is None:
                    missing.append(key)
                else:
                    self._lists.move_to_end((gen, key))
                    found[key] = kept
        if missing:
            fresh = read(missing)
            found.update(fresh)
            self._keep(gen, fresh)
        return found

    def missing(self, gen: int, keys: Sequence[str]) -> list[str]:
        """Those of ``keys`` not kept for generation ``gen`` (a reader that fetches its
        lists in the statement that reads everything else asks for these only)."""
        with self._lock:
            return [key for key in dict.fromkeys(keys) if (gen, key) not in self._lists]

    def _keep(self, gen: int, fresh: Lists) -> None:
        with self._lock:
            for key, arrays in fresh.items():
                size = len(arrays[0])
                if size > self.budget or (gen, key) in self._lists:
                    continue
                self._lists[(gen, key)] = arrays
                self._held += size
            while self._held > self.budget:
                _, (ids, _freq) = self._lists.popitem(last=False)
                self._held -= len(ids)
