"""Load a retrieval test collection in BEIR layout.

A BEIR set is a folder holding ``corpus.jsonl`` (``_id``, ``title``, ``text``,
``metadata``), ``queries.jsonl`` (``_id``, ``text``, ``metadata``) and one
``qrels/<split>.tsv`` per split (header ``query-id  corpus-id  score``). The
public sets in ``eval-data/`` and our own golden set share this layout, so one
loader serves ``kb-mcp bench retrieval`` for all of them.

The loader parses once, at this boundary, into frozen values. It streams the
JSON lines (SciFact is 8 MB) and stops at the first malformed line with the file
and line number, because a silently skipped line would quietly change a score.

Which queries a split keeps:

- every query with a row in ``qrels/<split>.tsv``, with its judgements as given
  (grades <= 0 are kept; the metrics treat them as not relevant);
- every query whose metadata says ``"expect": "none"``, with empty judgements.
  The golden sets use these for abstention: the right answer is nothing, so
  they can never appear in a qrels file. Such a query whose metadata names a
  ``split`` is kept only in that split, so that a set split dev / test can keep
  its absent-answer questions apart too (golden2 does).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from kb_mcp.errors import InvalidInput, NotFound

__all__ = [
    "GOLDEN2_SET",
    "GOLDEN3_SET",
    "GOLDEN_SET",
    "BeirDoc",
    "BeirQuery",
    "BeirSet",
    "load_beir",
    "read_qrels",
    "splits_in",
]

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_DIR = "qrels"
QRELS_HEADER = ("query-id", "corpus-id", "score")
EXPECT_NONE = "none"

GOLDEN_SET = Path(__file__).parent / "golden"
"""The hand-written golden set shipped with the package (see golden/README.md); split ``test``."""

GOLDEN2_SET = Path(__file__).parent / "golden2"
"""The second hand-written set, written before issue 9's tuning (see golden2/README.md);
splits ``dev`` (tune on it) and ``test`` (report it), on disjoint documents."""

GOLDEN3_SET = Path(__file__).parent / "golden3"
"""The blind development set, written by someone who had not read the ranking code (see
golden3/README.md); split ``dev`` only: tune on it."""

_LAYOUT_HINT = "a BEIR set holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv"
_JSONL_HINT = "fix or remove that line: each line must be one JSON object with a string '_id'"
_QRELS_HINT = "fix or remove that row: query-id, corpus-id, integer score, tab-separated"
_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class BeirDoc:
    """One corpus document; ``metadata`` carries golden-set flags such as ``retracted``."""

    id: str
    title: str
    text: str
    metadata: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class BeirQuery:
    """One query; ``query_class`` groups scores (``fact``, ``cjk``…) when the set has classes."""

    id: str
    text: str
    query_class: str | None
    metadata: Mapping[str, Any]

    @property
    def expects_none(self) -> bool:
        """True when the right answer is an empty result (an abstention query)."""
        return self.metadata.get("expect") == EXPECT_NONE


@dataclass(frozen=True, slots=True)
class BeirSet:
    """A loaded split: all docs, the split's queries, and query id → doc id → grade."""

    name: str
    docs: tuple[BeirDoc, ...]
    queries: tuple[BeirQuery, ...]
    qrels: Mapping[str, Mapping[str, int]]


def load_beir(path: Path, split: str) -> BeirSet:
    """Read the BEIR set in folder ``path`` and keep the queries of ``split``.

    Raises ``NotFound`` when the folder or one of its files is missing or the
    split does not exist (the message lists the splits that do), and
    ``InvalidInput`` for a malformed line, naming the file and line number.
    """
    path = Path(path)
    if not path.is_dir():
        raise NotFound(f"no BEIR set at {path}: not a folder", hint=_LAYOUT_HINT)
    judged = read_qrels(_qrels_file(path, split))
    all_queries = _read_records(_required_file(path, QUERIES_FILE), parse_query)
    queries = tuple(
        query for query in all_queries if query.id in judged or _absent_in(query, split)
    )
    qrels = {query.id: judged.get(query.id, _EMPTY) for query in queries}
    return BeirSet(
        name=path.name,
        docs=_read_records(_required_file(path, CORPUS_FILE), parse_doc),
        queries=queries,
        qrels=MappingProxyType(qrels),
    )


def _absent_in(query: BeirQuery, split: str) -> bool:
    """An abstention query belongs to ``split`` unless its metadata names another split."""
    return query.expects_none and query.metadata.get("split", split) == split


def parse_doc(record: Mapping[str, Any]) -> BeirDoc:
    """Build a doc from one corpus line; a missing title is an empty one, as in BEIR."""
    return BeirDoc(
        id=_required_str(record, "_id"),
        title=_optional_str(record, "title"),
        text=_required_str(record, "text"),
        metadata=_metadata(record),
    )


def parse_query(record: Mapping[str, Any]) -> BeirQuery:
    """Build a query from one queries line; the class is ``metadata.class`` or ``class``."""
    metadata = _metadata(record)
    query_class = metadata.get("class", record.get("class"))
    if query_class is not None and not isinstance(query_class, str):
        raise ValueError(f"'class' must be a string, got {type(query_class).__name__}")
    return BeirQuery(
        id=_required_str(record, "_id"),
        text=_required_str(record, "text"),
        query_class=query_class,
        metadata=metadata,
    )


def read_qrels(file: Path) -> Mapping[str, Mapping[str, int]]:
    """Parse a qrels TSV into query id → doc id → grade.

    The header row is optional. A doc judged twice for one query is an error
    rather than last-one-wins, since the two grades cannot both be meant.
    """
    judged: dict[str, dict[str, int]] = {}
    for number, line in _lines(file):
        fields = line.split("\t")
        if number == 1 and tuple(field.strip() for field in fields) == QRELS_HEADER:
            continue
        query_id, doc_id, grade = _parse_qrels_row(file, number, fields)
        row = judged.setdefault(query_id, {})
        if doc_id in row:
            problem = f"doc {doc_id!r} is judged twice for query {query_id!r}"
            raise _malformed(file, number, problem, _QRELS_HINT)
        row[doc_id] = grade
    return MappingProxyType({query: MappingProxyType(row) for query, row in judged.items()})


def splits_in(path: Path) -> tuple[str, ...]:
    """The split names a BEIR set offers: the stems of ``qrels/*.tsv``, sorted."""
    return tuple(sorted(file.stem for file in (Path(path) / QRELS_DIR).glob("*.tsv")))


def _qrels_file(path: Path, split: str) -> Path:
    """The qrels file of ``split``; an unknown split names the ones that exist."""
    file = path / QRELS_DIR / f"{split}.tsv"
    if file.is_file():
        return file
    found = splits_in(path)
    available = ", ".join(found) if found else f"none: {path / QRELS_DIR} has no .tsv files"
    raise NotFound(
        f"no split {split!r} in BEIR set {path.name} (splits found: {available})",
        hint=_LAYOUT_HINT,
    )


def _required_file(path: Path, name: str) -> Path:
    file = path / name
    if not file.is_file():
        raise NotFound(f"BEIR set {path} has no {name}", hint=_LAYOUT_HINT)
    return file


def _parse_qrels_row(file: Path, number: int, fields: list[str]) -> tuple[str, str, int]:
    """One ``query-id, corpus-id, score`` row; anything else is reported with its line."""
    if len(fields) != 3:
        problem = f"expected 3 tab-separated fields, got {len(fields)}"
        raise _malformed(file, number, problem, _QRELS_HINT)
    query_id, doc_id, score = (field.strip() for field in fields)
    if not query_id or not doc_id:
        raise _malformed(file, number, "empty query id or corpus id", _QRELS_HINT)
    try:
        return query_id, doc_id, int(score)
    except ValueError:
        raise _malformed(file, number, f"score {score!r} is not an integer", _QRELS_HINT) from None


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


_Record = TypeVar("_Record", bound=_HasId)


def _read_records(file: Path, parse: Callable[[Mapping[str, Any]], _Record]) -> tuple[_Record, ...]:
    """Parse every non-blank line of ``file``; the first bad line or repeated id stops the load.

    A repeated id is an error because one of the two records would silently
    shadow the other in every lookup by id.
    """
    records: list[_Record] = []
    first_seen: dict[str, int] = {}
    for number, line in _lines(file):
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError(f"expected a JSON object, got {type(record).__name__}")
            item = parse(record)
        except ValueError as error:  # json.JSONDecodeError is a ValueError
            raise _malformed(file, number, str(error), _JSONL_HINT) from error
        if item.id in first_seen:
            problem = f"id {item.id!r} already used on line {first_seen[item.id]}"
            raise _malformed(file, number, problem, _JSONL_HINT)
        first_seen[item.id] = number
        records.append(item)
    return tuple(records)


def _lines(file: Path) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their 1-based numbers, streamed; bad UTF-8 names its line."""
    with file.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
            except UnicodeDecodeError as error:
                raise _malformed(file, number, f"not UTF-8 ({error.reason})", None) from error
            if line.strip():
                yield number, line


def _metadata(record: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = record.get("metadata")
    if metadata is None:
        return _EMPTY
    if not isinstance(metadata, dict):
        raise ValueError(f"'metadata' must be an object, got {type(metadata).__name__}")
    return MappingProxyType(metadata)


def _required_str(record: Mapping[str, Any], key: str) -> str:
    if key not in record:
        raise ValueError(f"missing {key!r}")
    return _as_str(record[key], key)


def _optional_str(record: Mapping[str, Any], key: str) -> str:
    value = record.get(key)
    return "" if value is None else _as_str(value, key)


def _as_str(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{key!r} must be a string, got {type(value).__name__}")
    return value


def _malformed(file: Path, number: int, problem: str, hint: str | None) -> InvalidInput:
    """The one shape of a bad-line error: ``<file>: line <n>: <problem>``."""
    return InvalidInput(f"{file}: line {number}: {problem}", hint=hint)
