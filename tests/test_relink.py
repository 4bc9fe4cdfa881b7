"""Relation matching through the name index (issue 10 ingest, ``relations/relink.py`` and
``relations/name_index.py``): the stored outcome of every row equals what the whole-library
matcher decides from scratch, in any ingest order, after removals, renames written by
another path, a rolled-back transaction and an interrupted backfill.

Failure modes guarded: a candidate the index does not return (a fuzzy title, a series,
a day, a file name, an id) leaving a row pending or resolved where the whole library
makes it resolved or ambiguous; the in-memory index missing a change it did not make
(a rename, a rollback); a backfill cut short reported as current.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from rapidfuzz import fuzz

from kb_mcp.library import Library
from kb_mcp.relations import name_index, relink
from kb_mcp.relations.detect import SELF, UPDATES
from kb_mcp.relations.references import doc_names, match_reference, may_name, normalize
from kb_mcp.settings import Settings
from kb_mcp.store import relations as relation_rows


def _open(home: Path) -> Library:
    return Library(Settings(home=home, embedder="none", allow_agent_writes=True))


def _from_scratch(conn) -> dict[int, tuple[int | None, str]]:
    """Every row's outcome by the O(documents) matcher over the whole library (the old
    ``relink._match``, kept here as the oracle)."""
    names = [doc_names(*c) for c in relation_rows.candidates(conn)]
    held = relation_rows.user_held(conn)
    expected = {}
    for row in relation_rows.all_relations(conn):
        if row.reference == SELF:
            expected[row.id] = (row.stated_by, relation_rows.RESOLVED)
            continue
        stater = next((n for n in names if n.document_id == row.stated_by), None)
        others = [
            n
            for n in names
            if n.document_id != row.stated_by
            and (row.stated_by in held or n.document_id not in held)
        ]
        found = match_reference(row.reference, others, row.kind == UPDATES, stater)
        if len(found) == 1:
            expected[row.id] = (found[0], relation_rows.RESOLVED)
        else:
            state = relation_rows.AMBIGUOUS if found else relation_rows.PENDING
            expected[row.id] = (None, state)
    return expected


def _stored(conn) -> dict[int, tuple[int | None, str]]:
    return {
        r.id: ((r.from_id if r.reverse else r.to_id), r.state)
        for r in relation_rows.all_relations(conn)
    }


def _assert_as_from_scratch(lib: Library) -> None:
    conn = lib.db.conn
    assert _stored(conn) == _from_scratch(conn)


TECH = ["Kafka", "Pulsar", "Redis", "Postgres", "SQLite", "NATS", "Vault", "Consul"]
TOPICS = [
    "audit log retention policy",
    "on-call rota",
    "colour policies for dashboards",
    "release notes",
    "payments refund window",
    "office move to pier 9",
    "parking announcement",
    "tram wifi rollout",
    "backup schedule",
    "vpn access rules",
]
# Titles a reference names only by similarity (no two shared content words).
FUZZY = [("colour polices dashbords", "color policies dashboards")]


def _library_files(seed: int) -> dict[str, str]:
    """A generated library: ids, versions, file names, titles (some shared by two
    documents, some near-identical), dated withdrawals, series of minutes, updates."""
    rng = random.Random(seed)
    files: dict[str, str] = {}
    for n in range(1, 13):
        body = f"We use {rng.choice(TECH)}.\n"
        if n > 1 and rng.random() < 0.5:
            body += f"\nSupersedes ADR-{rng.randint(1, n - 1):04d}.\n"
        if rng.random() < 0.2:
            body += f"\nStatus: Superseded by ADR-{rng.randint(1, 14)}\n"
        files[f"adr/{n:04d}-{rng.choice(TECH).lower()}.md"] = (
            f"# ADR-{n}: Use {TECH[n % 8]}\n\n{body}"
        )
    for i, topic in enumerate(TOPICS):
        day = f"2025-12-{1 + i % 4:02d}"
        copies = 2 if i % 3 == 0 else 1  # a title two documents share: ambiguous
        for c in range(copies):
            title = topic.capitalize()
            files[f"topics/{i}-{c}.md"] = (
                f"---\ndate: {day}\n---\n# {title}\n\nThe {topic} as of {day}, copy {c}.\n"
            )
    for i in range(14):
        topic = rng.choice(TOPICS)
        kind = rng.choice(["errata", "correction", "withdrawn", "update", "file", "version"])
        day = f"2026-01-{1 + i:02d}"
        if kind == "errata":
            text = f"# Errata for the {topic}\n\nOne fix to the {topic}.\n"
        elif kind == "correction":
            text = f"# Correction to the {rng.choice(FUZZY)[rng.randint(0, 1)]}\n\nBlue.\n"
        elif kind == "withdrawn":
            text = f"# WITHDRAWN: {topic.capitalize()}\n\nThe {topic} is off.\n"
        elif kind == "update":
            text = f"# {topic.capitalize()} — update, 3 Feb 2026\n\nNew figures.\n"
        elif kind == "file":
            target = rng.choice(sorted(files))
            name = target.rsplit("/", 1)[-1]
            text = f"# Errata for {name}\n\nA typo in {name}.\n"
        else:
            text = f"# Errata for the v2.{rng.randint(1, 3)}.1 release notes\n\nTwo fixes.\n"
        files[f"notes/n{i}.md"] = f"---\ndate: {day}\n---\n{text}"
    files["notes/retraction.md"] = (
        "---\ndate: 2025-12-09\n---\n# Retraction: tram wifi rollout\n\n"
        "Our post of 1 December said that every tram gets Wi-Fi.\n"
        "That was wrong and we have withdrawn it.\n"
    )
    for week in range(4):
        text = f"# Payments group, minutes\n\nRefunds: {week + 2} days.\n"
        if week:
            text += "\nCorrection to item 1 of last week's minutes: refunds stay at 5 days.\n"
        files[f"minutes/m{week}.md"] = f"---\ndate: 2026-03-{5 + 7 * week:02d}\n---\n{text}"
    for v in (1, 2, 3):
        files[f"releases/v2.{v}.1.md"] = f"# Release notes v2.{v}.1\n\nChanges in 2.{v}.1.\n"
    files["fuzzy/colour.md"] = "# Colour polices dashbords\n\nRed.\n"
    return files


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _ingest(tmp_path: Path, seed: int, order_seed: int) -> list[tuple]:
    """Sync the library in groups of a shuffled order, add agent documents, remove and
    restore some files, checking every row against the oracle after each step; the
    rows by document keys at the end."""
    files = _library_files(seed)
    names = sorted(files)
    random.Random(order_seed).shuffle(names)
    root = tmp_path / f"o{order_seed}"
    folder = root / "notes"
    folder.mkdir(parents=True)
    with _open(root / "home") as lib:
        lib.folders.add_folder(folder, "notes")
        for start in range(0, len(names), 9):
            _write(folder, {n: files[n] for n in names[start : start + 9]})
            lib.folders.sync("notes")
            _assert_as_from_scratch(lib)
        # Agent text names agent documents only (the held rule), never the user's files.
        lib.writing.add_document("On-call rota", "Ann, then Bob.\n", "agent://rota")
        lib.writing.add_document(
            "Correction to the on-call rota", "Bob, not Ann.\n", "agent://rota-fix"
        )
        _assert_as_from_scratch(lib)
        gone = sorted(names)[:: max(1, order_seed % 5 + 3)]
        for name in gone:
            (folder / name).unlink()
        lib.folders.sync("notes")
        _assert_as_from_scratch(lib)
        _write(folder, {n: files[n] for n in gone})
        lib.folders.sync("notes")
        _assert_as_from_scratch(lib)
        return relation_rows.snapshot(lib.db.conn)


def test_relink_outcomes_equal_the_whole_library_matcher_in_any_order(tmp_path: Path) -> None:
    """Every row's stored outcome is the from-scratch one after each step, and the rows
    are the same in four ingest orders (kinds: ids, versions, file names, titles shared
    by two documents, near titles, dated withdrawals, series, updates, agent text)."""
    snapshots = [_ingest(tmp_path, seed=7, order_seed=order) for order in range(4)]
    states = {row[-1] for row in snapshots[0]}
    assert states == {"resolved", "pending", "ambiguous"}
    assert all(snap == snapshots[0] for snap in snapshots[1:])


def test_relink_sees_a_rename_written_outside_relink(tmp_path: Path) -> None:
    """A title changed by another write path (another process, a re-redaction) reaches
    the in-memory index through ``names_log``: a reference to the new title resolves."""
    folder = tmp_path / "notes"
    _write(folder, {"a.md": "# Draft one\n\nText.\n"})
    with _open(tmp_path / "home") as lib:
        lib.folders.add_folder(folder, "notes")
        lib.folders.sync("notes")
        with lib.db.write() as conn:
            conn.execute("UPDATE documents SET title = 'Vendor onboarding checklist'")
        _write(folder, {"fix.md": "# Errata for the vendor onboarding checklist\n\nStep 3.\n"})
        lib.folders.sync("notes")
        assert {state for _, state in _stored(lib.db.conn).values()} == {"resolved"}
        _assert_as_from_scratch(lib)


def test_relink_index_recovers_from_a_rolled_back_transaction(tmp_path: Path) -> None:
    """A document stored in a transaction that rolls back must not stay in the index:
    the errata naming its title stays pending, and resolves once it is really stored."""
    folder = tmp_path / "notes"
    _write(folder, {"fix.md": "# Errata for the vendor onboarding checklist\n\nStep 3.\n"})
    with _open(tmp_path / "home") as lib:
        lib.folders.add_folder(folder, "notes")
        lib.folders.sync("notes")
        with pytest.raises(RuntimeError), lib.db.write():
            lib.writing.add_document("Vendor onboarding checklist", "Steps.\n", "x://checklist")
            raise RuntimeError("rolled back")
        lib.writing.add_document("Travel policy", "Trains.\n", "x://travel")
        assert {state for _, state in _stored(lib.db.conn).values()} == {"pending"}
        _write(folder, {"list.md": "# Vendor onboarding checklist\n\nSteps.\n"})
        lib.folders.sync("notes")
        assert {state for _, state in _stored(lib.db.conn).values()} == {"resolved"}
        _assert_as_from_scratch(lib)


def test_relink_backfill_interrupted_resumes_and_is_not_current_until_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backfill commits in batches with a cursor; a failure mid-way leaves the
    version unset (not current) and the next run finishes it with the same rows."""
    files = _library_files(3)
    folder = tmp_path / "notes"
    _write(folder, files)
    with _open(tmp_path / "home") as lib:
        lib.folders.add_folder(folder, "notes")
        lib.folders.sync("notes")
        before = relation_rows.snapshot(lib.db.conn)
        with lib.db.write() as conn:
            conn.execute("DELETE FROM meta WHERE key = 'relations_version'")
    monkeypatch.setattr(relink, "BACKFILL_BATCH", 10)
    monkeypatch.setattr(relink, "_BACKFILL_READ", 5)
    calls = 0
    real = relink.record_relations

    def failing(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == 25:
            raise RuntimeError("crash")
        return real(*args, **kwargs)

    monkeypatch.setattr(relink, "record_relations", failing)
    with _open(tmp_path / "home") as lib:
        with pytest.raises(RuntimeError):
            lib.lookup.search("audit log retention")
        conn = lib.db.conn
        assert conn.execute("SELECT value FROM meta WHERE key = 'relations_cursor'").fetchone()
        assert not conn.execute("SELECT 1 FROM meta WHERE key = 'relations_version'").fetchone()
    monkeypatch.setattr(relink, "record_relations", real)
    with _open(tmp_path / "home") as lib:
        lib.lookup.search("audit log retention")
        assert relation_rows.snapshot(lib.db.conn) == before
        assert not lib.db.query("SELECT 1 FROM meta WHERE key = 'relations_cursor'")
        _assert_as_from_scratch(lib)


def test_name_index_sorted_words_score_as_token_sort_ratio() -> None:
    """The similarity scan compares pre-sorted words with ``fuzz.ratio``: the same score
    as ``token_sort_ratio`` of the titles, so the cutoff keeps every candidate."""
    rng = random.Random(5)
    alphabet = "abcdefghij kl 調整夜班車時刻表 ß0"
    for _ in range(2000):
        a = normalize("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))))
        b = normalize("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))))
        assert fuzz.ratio(
            name_index.sorted_words(a), name_index.sorted_words(b)
        ) == fuzz.token_sort_ratio(a, b)


def test_name_index_returns_every_title_the_rules_accept_from_both_sides() -> None:
    """The postings (pairs of rare words, the memo of similar titles) miss no document a
    reference can name and no row a document can answer: checked against every pair of
    a random library, as documents and rows arrive interleaved, a few titles change and
    some go (words long enough that a title differing by a word is not similar)."""
    rng = random.Random(11)
    vocab = [
        f"{w}{w[::-1]}"
        for w in (
            "alder birch cedar dogwood elm fir gum hazel ivy juniper "
            "larch maple oak pine rowan spruce teak walnut yew"
        ).split()
    ]
    common = vocab[:3]  # in most titles: one shared word is not enough
    docs, rows = name_index._Documents(), name_index._Statements()
    titles: dict[int, str] = {}
    refs_of: dict[int, tuple[str, str]] = {}
    for step in range(400):
        doc = rng.randrange(120)
        words = rng.sample(common, rng.randint(0, 2)) + rng.sample(vocab, rng.randint(1, 6))
        titles[doc] = " ".join(dict.fromkeys(words))
        docs.put(doc_names(doc, titles[doc], [f"d/{doc}.md"]), held=False)
        if step % 3 == 0:
            base = titles[rng.choice(list(titles))].split()
            kept = [w for w in base if rng.random() > 0.2] + rng.sample(vocab, rng.randint(0, 3))
            kind = rng.choice((UPDATES, "corrects"))
            refs_of[step] = (kind, " ".join(kept))
            rows.put(step, kind, " ".join(kept), 10_000, docs)
        if step % 17 == 0 and len(titles) > 1:
            gone = rng.choice(list(titles))
            docs.drop(gone)
            del titles[gone]
        for kind, reference in refs_of.values() if step % 10 == 0 else ():
            keys = name_index.reference_keys(reference)
            found = docs.candidates(keys, None)
            for other, title in titles.items():
                if may_name(reference, doc_names(other, title, []), kind == UPDATES):
                    assert other in found, (reference, title)
        mine = doc_names(doc, titles[doc], [f"d/{doc}.md"]) if doc in titles else None
        if mine is not None:
            expected = {
                row
                for row, (kind, reference) in refs_of.items()
                if may_name(reference, mine, kind == UPDATES)
            }
            assert rows.answerable_by(mine, docs) == expected, titles[doc]


def test_relink_sees_documents_another_process_stored(tmp_path: Path) -> None:
    """A document stored by another process (its own index) reaches this process's
    index through ``names_log``: an errata synced here afterwards resolves to it."""
    folder = tmp_path / "notes"
    _write(folder, {"a.md": "# Lunch menu\n\nSoup.\n"})
    with _open(tmp_path / "home") as lib:
        lib.folders.add_folder(folder, "notes")
        lib.folders.sync("notes")  # this process's index now holds the library
        script = (
            "import sys; from pathlib import Path\n"
            "from kb_mcp.library import Library; from kb_mcp.settings import Settings\n"
            "s = Settings(home=Path(sys.argv[1]), embedder='none', allow_agent_writes=True)\n"
            "with Library(s) as lib:\n"
            "    lib.writing.add_document('Vendor onboarding checklist', 'Steps.\\n', 'x://list')\n"
        )
        subprocess.run([sys.executable, "-c", script, str(tmp_path / "home")], check=True)
        _write(folder, {"fix.md": "# Errata for the vendor onboarding checklist\n\nStep 3.\n"})
        lib.folders.sync("notes")
        assert {state for _, state in _stored(lib.db.conn).values()} == {"resolved"}
        _assert_as_from_scratch(lib)


# One pair per way a reference finds its document (``name_index.ReferenceKeys``): the
# stater, then the document it names. Each title rule is met by that rule alone.
RULE_PAIRS = {
    "subset of the reference": (
        "# Errata for the audit log retention policy about archive access\n",
        "# Audit log retention policy\n\nNinety days.\n",
    ),
    "reference a subset": (
        "# Correction to the backup schedule\n\nSundays.\n",
        "# Backup schedule for the archive bucket and the cold storage tier\n\nNightly.\n",
    ),
    "loose update": (
        "# Update, 3 February 2026: the retention period for ridership data is now 36 months\n",
        "# Ridership data retention schedule\n\nTwelve months.\n",
    ),
    "similar only": (
        "# Correction to the color policies dashboards\n\nBlue.\n",
        "# Colour polices dashbords\n\nRed.\n",
    ),
    "id": ("# Notice\n\nThis notice cancels TICKET-4242.\n", "# TICKET-4242 Printer jam\n"),
    "file name": ("# Errata for runbook-db.md\n\nStep 2.\n", "# Database runbook\n\nSteps.\n"),
}


@pytest.mark.parametrize("staters_first", [True, False])
def test_relink_each_rule_resolves_whichever_side_arrives_first(
    tmp_path: Path, staters_first: bool
) -> None:
    """Each way a reference can name a document, met alone, resolves both when the
    named document is stored first (looked up from the reference) and when it arrives
    after (looked up from the document)."""
    staters = {f"s{i}.md": pair[0] for i, pair in enumerate(RULE_PAIRS.values())}
    targets = {f"t{i}.md": pair[1] for i, pair in enumerate(RULE_PAIRS.values())}
    targets["runbook-db.md"] = targets.pop(f"t{len(RULE_PAIRS) - 1}.md")
    folder = tmp_path / "notes"
    folder.mkdir()
    with _open(tmp_path / "home") as lib:
        lib.folders.add_folder(folder, "notes")
        for group in (staters, targets) if staters_first else (targets, staters):
            _write(folder, group)
            lib.folders.sync("notes")
        stored = _stored(lib.db.conn)
        # Every pair resolved (the update's heading also yields a dateline, pending).
        assert [state for _, state in stored.values()].count("resolved") == len(RULE_PAIRS)
        _assert_as_from_scratch(lib)
        for name in targets:  # removed: every row is pending again
            (folder / name).unlink()
        lib.folders.sync("notes")
        assert {state for _, state in _stored(lib.db.conn).values()} == {"pending"}
        _assert_as_from_scratch(lib)
