"""Which documents a reference can name, and which references can name a document:
looked up, not scanned (issue 10 ingest).

Trigger: matching (``relations/relink``) named every document for every reference, and
checked every relation row against every stored document, inside the sync's write
transaction: O(documents x relation rows); a 300k-chunk build spent over 18 CPU-minutes
in one transaction there. Outcome: the names of every document and the references of
every row are kept here, in postings keyed the ways ``relations/references`` can match
(ids, file names, days, series keys of titles, content words), plus the titles'
sorted words for the one rule that needs no shared word (similarity above
``TITLE_MATCH - 1``, scanned in C by rapidfuzz). A look-up returns a superset of what
``references.match_reference`` can return, never less, so running that function over
the candidates gives exactly its answer over the whole library: why each key is enough
is said at ``reference_keys``.

The index lives in memory, one per database file in a process, and catches up from
``names_log`` (written by triggers in every transaction that changes a name or a row)
at each use, inside the caller's write transaction: a rolled-back entry it had read is
noticed by its token, and then the index is read again from the tables.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import apsw
from rapidfuzz import fuzz, process

from kb_mcp.relations import detect
from kb_mcp.relations import references as refs
from kb_mcp.store import names_log as log
from kb_mcp.store import relations as store
from kb_mcp.store.db import read_snapshot

# A title scoring above this can be in an outcome (``match_reference`` keeps every
# candidate scoring above ``max(TITLE_MATCH - 1, best - TITLE_MARGIN)``).
FUZZY_CUTOFF = refs.TITLE_MATCH - 1
# Changes read from the log at once; past this many the tables are read again instead.
CATCH_UP_LIMIT = 20_000
LOG_KEEP = 100_000  # entries kept for other processes' indexes (``names_log.prune``)
PRUNE_EVERY = 10_000  # entries read between two prunes
OPEN_INDEXES = 4  # databases a process keeps an index for (tests open many)
NEAR_MEMO = 20_000  # query texts whose similar documents are remembered (``_NearMemo``)


def sorted_words(normalized: str) -> str:
    """The words of a normalized title in order: what ``fuzz.token_sort_ratio`` compares,
    so ``fuzz.ratio`` of two of these is that score."""
    return " ".join(sorted(normalized.split()))


@dataclass(frozen=True, slots=True)
class ReferenceKeys:
    """How a reference can find its documents, following ``match_reference``'s branches.

    - ``exact`` (ids or file names): a match holds every id or one file name, so it is
      in the postings of any of them;
    - ``day`` (a ``DATED`` reference): a match is dated that day;
    - otherwise a title: ``relative`` ones may name the stater's series (same ``series_key``).
      A title scores above ``FUZZY_CUTOFF`` only (``references._title_score``) when
      (a) its content words are a subset of the reference's (two or more), or (b) the
      reference's are a subset of its (two or more), or (c) for ``updates``, three or
      more are shared and at most a quarter of the title's are missing from the
      reference, or (d) the similarity of the sorted words (``fuzzy``) is above the
      cutoff. Fewer than two content words in the reference name nothing.

    Looked up as: (a) a pair of the title's rarest words (``_pairs_of``) is among the
    pairs of the reference's words; (b) the title holds every word of the reference
    (from a title: the reference's two rarest words are a pair of the title's); (c) as
    (a): a quarter of the title's words missing leaves two of them in the reference
    (from a title: one of its pairs is among an ``updates`` row's); (d) a scan in C,
    remembered per reference text (``_NearMemo``).
    """

    exact: bool
    ids: frozenset[str] = frozenset()
    files: frozenset[str] = frozenset()
    day: str | None = None
    relative: bool = False
    words: frozenset[str] = frozenset()
    fuzzy: str = ""


def reference_keys(reference: str) -> ReferenceKeys | None:
    """``reference``'s keys; None for ``SELF`` (it names its stater, no look-up)."""
    if reference == detect.SELF:
        return None
    ref = refs.parse_reference(reference)
    if ref.exact:
        return ReferenceKeys(True, ids=ref.ids, files=ref.files)
    if reference.startswith(refs.DATED):
        return ReferenceKeys(False, day=reference.removeprefix(refs.DATED))
    words = refs.content_words(ref.title)
    if len(words) < 2:
        words = frozenset()
    return ReferenceKeys(
        False,
        relative=refs.is_relative(reference),
        words=words,
        fuzzy=sorted_words(ref.title) if words else "",
    )


class _Postings:
    """Key → the set of items filed under it."""

    def __init__(self) -> None:
        self._items: dict[str, set[int]] = {}

    def add(self, keys: Iterable[str], item: int) -> None:
        for key in keys:
            self._items.setdefault(key, set()).add(item)

    def remove(self, keys: Iterable[str], item: int) -> None:
        for key in keys:
            found = self._items.get(key)
            if found is not None:
                found.discard(item)
                if not found:
                    del self._items[key]

    def union(self, keys: Iterable[str]) -> set[int]:
        out: set[int] = set()
        for key in keys:
            out |= self._items.get(key, set())
        return out

    def common(self, keys: Iterable[str]) -> set[int]:
        """Items filed under every one of ``keys`` (none for no keys)."""
        found = sorted((self._items.get(key, set()) for key in keys), key=len)
        if not found:
            return set()
        return set(found[0]).intersection(*found[1:])

    def size(self, key: str) -> int:
        return len(self._items.get(key, ()))


class _Similar:
    """Strings by item for a similarity scan in C (``rapidfuzz.process.extract``)."""

    def __init__(self) -> None:
        self._items: list[int] = []
        self._texts: list[str] = []
        self._at: dict[int, int] = {}

    def put(self, item: int, text: str) -> None:
        self.drop(item)
        if text:
            self._at[item] = len(self._items)
            self._items.append(item)
            self._texts.append(text)

    def drop(self, item: int) -> None:
        at = self._at.pop(item, None)
        if at is None:
            return
        self._texts[at] = ""  # scores 0: never above the cutoff
        if len(self._items) > 1024 and len(self._at) * 2 < len(self._items):
            pairs = [(i, t) for i, t in zip(self._items, self._texts, strict=True) if t]
            self._items = [i for i, _ in pairs]
            self._texts = [t for _, t in pairs]
            self._at = {i: n for n, i in enumerate(self._items)}

    def near(self, text: str) -> set[int]:
        """Items whose text scores ``FUZZY_CUTOFF`` or more against ``text``."""
        if not text or not self._at:
            return set()
        return {self._items[at] for at in _near_at(text, self._texts)}


def _near_at(text: str, texts: list[str]) -> list[int]:
    """Positions in ``texts`` scoring ``FUZZY_CUTOFF`` or more against ``text`` (in C)."""
    found = process.extract(text, texts, scorer=fuzz.ratio, score_cutoff=FUZZY_CUTOFF, limit=None)
    return [at for _text, _score, at in found]


class _NearMemo:
    """``_Similar.near`` of the documents, remembered per query text and kept current as
    documents come and go.

    Trigger: every re-match of a title reference scanned all N titles (rapidfuzz, 0.5 ms
    a call at 20k; half of the relations CPU at 20k, cProfile), and one stored document
    re-matches the rows it may answer, each a scan again. Outcome: a text is scanned over
    the library once; afterwards a stored document is compared (in C) with the remembered
    texts only, which are the rows' references: far fewer than the documents. ``fuzz.ratio``
    is symmetric, so comparing the document with the text gives the scan's answer.
    """

    def __init__(self) -> None:
        self._found: OrderedDict[str, set[int]] = OrderedDict()
        self._texts: list[str] | None = None  # the keys as a list, rebuilt when stale

    def get(self, text: str) -> set[int] | None:
        found = self._found.get(text)
        if found is not None:
            self._found.move_to_end(text)
        return found

    def keep(self, text: str, found: set[int]) -> None:
        self._found[text] = set(found)
        self._texts = None
        while len(self._found) > NEAR_MEMO:
            self._found.popitem(last=False)

    def put(self, item: int, text: str) -> None:
        """``item`` now has ``text``: in every remembered answer it scores into."""
        if not text or not self._found:
            return
        if self._texts is None:
            self._texts = list(self._found)
        for at in _near_at(text, self._texts):
            self._found[self._texts[at]].add(item)

    def drop(self, item: int) -> None:
        for found in self._found.values():
            found.discard(item)


class _Documents:
    """Every document's ``DocNames``, whether a user's source holds it, and postings."""

    def __init__(self) -> None:
        self.names: dict[int, refs.DocNames] = {}
        self.held: set[int] = set()
        self._ids, self._files, self._days = _Postings(), _Postings(), _Postings()
        self._titles, self._words = _Postings(), _Postings()
        self._pairs = _Postings()
        self._paired: dict[int, tuple[str, ...]] = {}
        self._content: dict[int, frozenset[str]] = {}  # the title's content words
        self._similar = _Similar()
        self._near = _NearMemo()

    def pairs(self, doc: int) -> tuple[str, ...]:
        """The pairs document ``doc`` is filed under (``_pairs_of``): rule (c) looked up
        from the document's side (``_Statements.answerable_by``)."""
        return self._paired.get(doc, ())

    def rarest_pair(self, words: frozenset[str]) -> tuple[str, ...]:
        """The pair of the two words of ``words`` fewest titles hold now ((b): a title
        holding every word of a reference holds these two; any choice is correct, rare
        ones keep the postings short). One rare word was not enough: a word no title
        holds yet ("errata") filed every "Errata for …" row under it, and each errata
        stored looked them all up."""
        ranked = sorted(words, key=lambda w: (self._words.size(w), w))
        return _pair_keys(ranked[:2]) if len(words) >= 2 else ()

    def _pairs_of(self, words: frozenset[str]) -> tuple[str, ...]:
        """Every pair of a title's rarest ``len(words) // 4 + 2`` content words, as keys:
        when (a) every word of the title is in a reference, or (c) at most a quarter of
        them are missing from it, two of these are in it, so one of the pairs is among
        the reference's (``_pair_keys``). A single word shared with the reference (the
        old pivot) could be a word thousands of titles hold; two rarely are."""
        if len(words) < 2:
            return ()
        ranked = sorted(words, key=lambda w: (self._words.size(w), w))
        return _pair_keys(ranked[: len(words) // 4 + 2])

    def put(self, names: refs.DocNames, held: bool) -> None:
        self.drop(names.document_id)
        doc = names.document_id
        self.names[doc] = names
        if held:
            self.held.add(doc)
        self._ids.add(names.ids, doc)
        self._files.add(names.files, doc)
        self._days.add(_day(names), doc)
        self._titles.add((refs.series_key(names.title),), doc)
        words = refs.content_words(names.title)
        self._paired[doc] = self._pairs_of(words)
        self._content[doc] = words
        self._pairs.add(self._paired[doc], doc)
        self._words.add(words, doc)
        self._similar.put(doc, sorted_words(names.title))
        self._near.put(doc, sorted_words(names.title))

    def drop(self, doc: int) -> None:
        names = self.names.pop(doc, None)
        if names is None:
            return
        self.held.discard(doc)
        self._ids.remove(names.ids, doc)
        self._files.remove(names.files, doc)
        self._days.remove(_day(names), doc)
        self._titles.remove((refs.series_key(names.title),), doc)
        self._words.remove(refs.content_words(names.title), doc)
        self._pairs.remove(self._paired.pop(doc, ()), doc)
        self._content.pop(doc, None)
        self._similar.drop(doc)
        self._near.drop(doc)

    def series(self, title: str) -> set[int]:
        """Documents of ``title``'s series: their normalized titles equal once the
        numbers, versions and months a series differs by are dropped
        (``references.series_key``)."""
        return self._titles.union((refs.series_key(title),))

    def candidates(self, keys: ReferenceKeys, stater: refs.DocNames | None) -> set[int]:
        """Every document ``match_reference`` could return for a reference with ``keys``
        (a superset)."""
        if keys.exact:
            return self._ids.union(keys.ids) | self._files.union(keys.files)
        if keys.day is not None:
            return self._days.union((keys.day,))
        found = self.series(stater.title) if keys.relative and stater is not None else set()
        if keys.words:
            found |= self._shares_enough(keys.words)  # (a), (c)
            found |= self._words.common(keys.words)  # (b)
            found |= self.near(keys.fuzzy)  # (d)
        return found

    def _shares_enough(self, words: frozenset[str]) -> set[int]:
        """Titles filed under a pair of ``words`` that rule (a) or (c) accepts: every
        content word in ``words``, or three or more shared with at most a quarter
        missing (for any kind: a superset). A title the pair finds but neither rule
        accepts can only score above the cutoff by similarity, and ``near`` returns it.
        Checked here with set operations: a pair of two common words can still file
        hundreds of titles, and ``_title_score`` on each was most of the matching CPU
        left at 20k (cProfile)."""
        out = set()
        for doc in self._pairs.union(_pair_keys(sorted(words))):
            title = self._content[doc]
            shared = len(title & words)
            if shared == len(title) or (shared >= 3 and shared >= 0.75 * len(title)):
                out.add(doc)
        return out

    def near(self, fuzzy: str) -> set[int]:
        """Documents whose sorted title words score ``FUZZY_CUTOFF`` or more against
        ``fuzzy``: remembered, else scanned (``_NearMemo``)."""
        found = self._near.get(fuzzy)
        if found is None:
            found = self._similar.near(fuzzy)
            if fuzzy:
                self._near.keep(fuzzy, found)
        return set(found)


class _Statements:
    """Every relation row's fixed fields (kind, reference, stater), by the keys of its
    reference: which rows a document could answer."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[str, str, int]] = {}
        self._keys: dict[int, ReferenceKeys] = {}
        self._ids, self._files, self._days = _Postings(), _Postings(), _Postings()
        self._words, self._first, self._loose = _Postings(), _Postings(), _Postings()
        self._firsts: dict[int, tuple[str, ...]] = {}  # row → the pair it is filed under
        self._relative: dict[int, set[int]] = {}  # stater → its relative rows
        self._similar = _Similar()

    def put(self, row: int, kind: str, reference: str, stated_by: int, docs: _Documents) -> None:
        self.drop(row)
        self.rows[row] = (kind, reference, stated_by)
        keys = reference_keys(reference)
        if keys is None:
            return
        self._keys[row] = keys
        self._ids.add(keys.ids, row)
        self._files.add(keys.files, row)
        self._days.add(() if keys.day is None else (keys.day,), row)
        self._words.add(keys.words, row)
        self._firsts[row] = docs.rarest_pair(keys.words)
        self._first.add(self._firsts[row], row)
        self._loose.add(_loose_keys(kind, keys), row)
        if keys.relative:
            self._relative.setdefault(stated_by, set()).add(row)
        self._similar.put(row, keys.fuzzy)

    def drop(self, row: int) -> None:
        fields = self.rows.pop(row, None)
        keys = self._keys.pop(row, None)
        if fields is None or keys is None:
            return
        self._ids.remove(keys.ids, row)
        self._files.remove(keys.files, row)
        self._days.remove(() if keys.day is None else (keys.day,), row)
        self._words.remove(keys.words, row)
        self._first.remove(self._firsts.pop(row, ()), row)
        self._loose.remove(_loose_keys(fields[0], keys), row)
        mine = self._relative.get(fields[2])
        if mine is not None:
            mine.discard(row)
            if not mine:
                del self._relative[fields[2]]
        self._similar.drop(row)

    def answerable_by(self, names: refs.DocNames, docs: _Documents) -> set[int]:
        """Every row whose answer a document with ``names`` can be in: looked up by the
        rules at ``ReferenceKeys`` read from the document's side, then checked one by
        one (``references.may_name``)."""
        found = self._ids.union(names.ids) | self._files.union(names.files)
        found |= self._days.union(_day(names))
        for member in docs.series(names.title):
            found |= self._relative.get(member, set())
        words = refs.content_words(names.title)
        if len(words) >= 2:
            found |= self._words.common(words)  # (a) the reference holds the whole title
        found |= self._first.union(_pair_keys(sorted(words)))  # (b)
        found |= self._loose.union(docs.pairs(names.document_id))  # (c)
        found |= self._similar.near(sorted_words(names.title))  # (d)
        return {row for row in found if self._may_be_answered(row, names, docs)}

    def _may_be_answered(self, row: int, names: refs.DocNames, docs: _Documents) -> bool:
        """Whether a document with ``names`` can be in ``row``'s answer (not its own row;
        ``references.may_name``): the rows it cannot be in keep their outcome."""
        kind, reference, stated_by = self.rows[row]
        if stated_by == names.document_id:
            return False
        stater = docs.names.get(stated_by)
        return refs.may_name(reference, names, kind == detect.UPDATES, stater)


def _pair_keys(words: list[str]) -> tuple[str, ...]:
    """Every pair of ``words`` (sorted) as one key each."""
    ordered = sorted(words)
    return tuple(f"{a} {b}" for i, a in enumerate(ordered) for b in ordered[i + 1 :])


def _loose_keys(kind: str, keys: ReferenceKeys) -> tuple[str, ...]:
    """An ``updates`` row is filed under every pair of its reference's words: a title
    it names by rule (c) has a pair of its ``_pairs_of`` among them."""
    return _pair_keys(sorted(keys.words)) if kind == detect.UPDATES else ()


def _day(names: refs.DocNames) -> tuple[str, ...]:
    return (names.date[:10],) if names.date else ()


class NameIndex:
    """The library's names and references, current as of ``names_log`` entry ``seen``."""

    def __init__(self) -> None:
        self.documents = _Documents()
        self.statements = _Statements()
        self.seen: tuple[int, int | None] | None = None  # (seq, token); None: never read
        self._read = 0  # entries read since the log was last pruned

    def catch_up(self, conn: apsw.Connection, *, writing: bool = True) -> None:
        """Bring the index to what ``conn`` sees (in its write transaction, or in a read
        transaction when not ``writing``: then the log is not pruned)."""
        if self.seen is None or log.token_at(conn, self.seen[0]) != self.seen[1]:
            self.read_all(conn)
            return
        entries = log.entries_after(conn, self.seen[0], CATCH_UP_LIMIT)
        if len(entries) == CATCH_UP_LIMIT:
            self.read_all(conn)
            return
        if not entries:
            return
        for item in {e.item for e in entries if e.what == log.DOCUMENT}:
            self._read_document(conn, item)
        for item in {e.item for e in entries if e.what == log.RELATION}:
            self._read_statement(conn, item)
        self.seen = (entries[-1].seq, entries[-1].token)
        self._read += len(entries)
        if writing and self._read >= PRUNE_EVERY:
            self._read = 0
            log.prune(conn, LOG_KEEP)

    def read_all(self, conn: apsw.Connection) -> None:
        """Read every document's names and every row's references (any transaction)."""
        self.seen = log.newest(conn)
        self.documents, self.statements = _Documents(), _Statements()
        held = store.user_held(conn)
        for doc_id, title, names, doc_date in store.candidates(conn):
            self.documents.put(refs.doc_names(doc_id, title, names, doc_date), doc_id in held)
        for row in store.statements(conn):
            self.statements.put(*row, self.documents)

    def _read_document(self, conn: apsw.Connection, doc_id: int) -> None:
        found = store.candidates(conn, doc_id)
        if not found:
            self.documents.drop(doc_id)
            return
        _, title, names, doc_date = found[0]
        held = bool(store.user_held(conn, doc_id))
        self.documents.put(refs.doc_names(doc_id, title, names, doc_date), held)

    def _read_statement(self, conn: apsw.Connection, row_id: int) -> None:
        found = store.statements(conn, row_id)
        if found:
            self.statements.put(*found[0], self.documents)
        else:
            self.statements.drop(row_id)


_OPEN: OrderedDict[str, NameIndex] = OrderedDict()
_LOCK = threading.Lock()


def _index_of(conn: apsw.Connection) -> NameIndex:
    with _LOCK:
        index = _OPEN.pop(conn.filename, None) or NameIndex()
        _OPEN[conn.filename] = index
        while len(_OPEN) > OPEN_INDEXES:
            _OPEN.popitem(last=False)
    return index


def names_for(conn: apsw.Connection) -> NameIndex:
    """The index of ``conn``'s database, caught up. Call inside a write transaction: the
    index is then used by one connection at a time (the write lock)."""
    index = _index_of(conn)
    with _LOCK:  # not while another thread's ``warm`` reads into it
        index.catch_up(conn)
    return index


def warm(conn: apsw.Connection) -> None:
    """Catch the index up in a read transaction of ``conn`` (outside any write
    transaction): reading the whole library (a process's first write) or what another
    process changed meanwhile, so that the write transaction only catches up from the
    last few log entries while other writers wait on its lock. For the writers (a sync,
    ``add_document``); a process that only searches never builds the index."""
    if not conn.getautocommit():
        return  # inside a transaction already: ``names_for`` catches up there
    index = _index_of(conn)
    with _LOCK, read_snapshot(conn):
        index.catch_up(conn, writing=False)
