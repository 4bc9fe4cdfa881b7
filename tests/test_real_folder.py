"""A real folder, as a new user adds it: what becomes a document and what stays out.

Issue 20 items 10 and 12, generated here rather than downloaded: a package whose Sphinx
sources live in ``docs/build/`` (beside a real ``build/`` of generated output), git's
manual pages about credential helpers, a ``.mako`` template, an extension-less
``README`` and ``PKG-INFO``, binaries that must stay unread, and ``.gitignore`` files at
two levels with a ``.kbignore`` on top. Each case is checked through ``list``, what an
agent sees, on a real ``kb.db``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kb_mcp.ingest.sources import REGISTRY_FILE
from kb_mcp.library import Library
from kb_mcp.settings import Settings

GITCREDENTIALS = """\
gitcredentials(7)
=================

NAME
----
gitcredentials - Providing usernames and passwords to Git

DESCRIPTION
-----------
Git will sometimes need credentials from the user in order to perform
operations; for example, it may need to ask for a username and password.
"""

CREDENTIAL_STORE = """\
git-credential-store(1)
=======================

NAME
----
git-credential-store - Helper to store credentials on disk
"""

CREDENTIAL_STORE_ROFF = """\
'\\" t
.TH "GIT\\-CREDENTIAL\\-STORE" "1" "2024-01-01" "Git 2.43.0" "Git Manual"
.SH "NAME"
git-credential-store \\- Helper to store credentials on disk
"""

MAKO_SETTINGS = """\
<%doc>
Every setting of the application, with its default.
</%doc>
[app]
# the folder the cache lives in
cache_dir = ${here}/cache
"""

PKG_INFO = """\
Metadata-Version: 2.1
Name: sample-package
Version: 1.0
Summary: A sample package whose metadata documents it
"""

CONF_PY = 'project = "sample"\nextensions = ["sphinx.ext.autodoc"]\n'

# What a values file looks like: no title, one secret a line.
SECRETS_VALUES = "prod\nHx9fQ2mLw8Zt\nAKIAIOSFODNN7EXAMPLE\n"


def build_corpus(root: Path) -> None:
    """The folder a new user adds; every case of items 10 and 12 is one file here."""
    texts = {
        # a package whose Sphinx sources live in docs/build (Mako, SQLAlchemy and alembic do)
        "pkg/docs/build/conf.py": CONF_PY,
        "pkg/docs/build/index.rst": "Sample package\n==============\n\nWelcome.\n",
        "pkg/docs/build/usage.rst": "Usage\n=====\n\nRun it.\n",
        "pkg/docs/build/Makefile": "html:\n\tsphinx-build . output\n",
        # generated output: a setuptools build/ and a Sphinx HTML build
        "pkg/build/lib/sample/__init__.py": "VERSION = 1\n",
        "pkg/build/bdist.linux-x86_64/wheel/sample.py": "x = 1\n",
        "pkg/docs/_build/html/index.html": "<html><body><p>built</p></body></html>\n",
        "pkg/docs/_build/html/.buildinfo": "config: 1\n",
        # git's manual pages about credential helpers
        "git/Documentation/gitcredentials.txt": GITCREDENTIALS,
        "git/Documentation/git-credential-store.txt": CREDENTIAL_STORE,
        "git/Documentation/git-credential-cache--daemon.adoc": CREDENTIAL_STORE,
        "git/man1/git-credential-store.1": CREDENTIAL_STORE_ROFF,
        # files with no known suffix whose content is text
        "pkg/templates/settings.mako": MAKO_SETTINGS,
        "pkg/README": "Sample package\n\nInstall it with pip.\n",
        "pkg/PKG-INFO": PKG_INFO,
        # packaging metadata and empty marker files say nothing worth a document
        "pkg/sample-1.0.dist-info/RECORD": "sample/__init__.py,sha256=abc,12\n",
        "pkg/sample-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\n",
        "pkg/sample/py.typed": "",
        # credential files keep being refused, by exact name or by what they hold
        "ops/secrets.txt": SECRETS_VALUES,
        "ops/.git-credentials": "https://user:Hx9fQ2mLw8Zt@example.com\n",
        "ops/deploy": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n"
        "-----END OPENSSH PRIVATE KEY-----\n",
        # .gitignore at two levels, and a .kbignore on top
        ".gitignore": "*.out.md\nscratch.md\n",
        "pkg/.gitignore": "generated/\n",
        "pkg/generated/api.md": "# generated\n",
        "pkg/sub/.gitignore": "!keep.out.md\n",
        "pkg/sub/keep.out.md": "# kept by the nested negation\n",
        "pkg/sub/drop.out.md": "# dropped by the root pattern\n",
        "scratch.md": "# scratch, kept by .kbignore over .gitignore\n",
        ".kbignore": "!scratch.md\n",
    }
    for rel, text in texts.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "pkg/logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    (root / "pkg/data.bin").write_bytes(bytes(range(256)) * 8)
    (root / "pkg/build/lib/sample/core.cpython-311.pyc").write_bytes(b"\xa7\r\r\n" + bytes(32))


INDEXED = {
    "pkg/docs/build/conf.py",
    "pkg/docs/build/index.rst",
    "pkg/docs/build/usage.rst",
    "pkg/docs/build/Makefile",
    "git/Documentation/gitcredentials.txt",
    "git/Documentation/git-credential-store.txt",
    "git/Documentation/git-credential-cache--daemon.adoc",
    "git/man1/git-credential-store.1",
    "pkg/templates/settings.mako",
    "pkg/README",
    "pkg/PKG-INFO",
    "pkg/sub/keep.out.md",
    "scratch.md",
}


def listed_paths(library: Library, source: str) -> set[str]:
    return {entry.path for entry in library.catalog.list_source(source, limit=200).documents}


def test_a_new_folder_source_gives_the_documents_a_reader_expects(tmp_path: Path) -> None:
    """issue 20 items 10 and 12: every real-folder case, through one sync."""
    build_corpus(tmp_path / "corpus")
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(tmp_path / "corpus")
        [report] = library.folders.sync()
        assert listed_paths(library, "corpus") == INDEXED
        assert report.failed == 0, report.failures
        assert report.skipped["sensitive"] == 3  # secrets.txt, .git-credentials, deploy
        [mako] = [
            entry.doc
            for entry in library.catalog.list_source("corpus", limit=200).documents
            if entry.path.endswith(".mako")
        ]
        assert "Every setting of the application" in library.lookup.read(mako).text


def test_a_folder_source_can_opt_out_of_gitignore(tmp_path: Path) -> None:
    """issue 20 item 12: ``--no-gitignore`` keeps today's behaviour for one source."""
    build_corpus(tmp_path / "corpus")
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(tmp_path / "corpus", gitignore=False)
        library.folders.sync()
        paths = listed_paths(library, "corpus")
    assert {"pkg/generated/api.md", "pkg/sub/drop.out.md", "pkg/sub/keep.out.md"} <= paths


def test_an_existing_source_keeps_its_files_until_the_user_opts_in(
    tmp_path: Path, kb_cli: Callable[..., object], home: Path
) -> None:
    """issue 20 item 12: a source registered before .gitignore was read (no choice
    stored) archives nothing on upgrade; ``kb-mcp add DIR --gitignore`` opts it in."""
    corpus = tmp_path / "corpus"
    build_corpus(corpus)
    home.mkdir()
    entry = {"name": "corpus", "root": str(corpus.resolve()), "ignore": []}
    (home / REGISTRY_FILE).write_text(json.dumps([entry]), encoding="utf-8")
    assert kb_cli("sync").returncode == 0
    before = json.loads(kb_cli("list", "corpus", "--json", "--limit", "200").stdout)
    assert "pkg/generated/api.md" in {d["path"] for d in before["documents"]}

    opted = kb_cli("add", str(corpus), "--gitignore", "--yes")
    assert opted.returncode == 0, opted.stderr
    assert "honours .gitignore" in opted.stdout
    after = json.loads(kb_cli("list", "corpus", "--json", "--limit", "200").stdout)
    assert {d["path"] for d in after["documents"]} == INDEXED
    stored = json.loads((home / REGISTRY_FILE).read_text(encoding="utf-8"))
    assert stored == [{**entry, "gitignore": True}]


def test_a_folder_of_the_folders_setting_keeps_todays_rules_until_opted_in(
    tmp_path: Path,
) -> None:
    """issue 20 item 12: a configured folder has no stored choice, so it reads no
    .gitignore; opting it in registers it under the same name with the choice."""
    build_corpus(tmp_path / "corpus")
    settings = Settings(
        home=tmp_path / "home", embedder="none", folders=(str(tmp_path / "corpus"),)
    )
    with Library(settings) as library:
        [configured] = library.folders.folder_sources()
        assert (configured.configured, configured.gitignore) == (True, False)
        library.folders.sync()
        assert "pkg/generated/api.md" in listed_paths(library, "corpus")
        library.folders.set_gitignore("corpus", True)
        [opted] = library.folders.folder_sources()
        assert (opted.name, opted.configured, opted.gitignore) == ("corpus", False, True)
        library.folders.sync()
        assert listed_paths(library, "corpus") == INDEXED


def test_every_real_folder_case_of_issue_20_through_one_sync(tmp_path: Path) -> None:
    """The issue's whole list in one folder, as a new user adds it: a PDF (read with the
    built-in reader, its accents folded), an AsciiDoc manual page cut at its headings, a
    built HTML page stored from its heading, Sphinx sources in ``docs/build``, a
    credential-helper manual page, a ``.mako`` file and an extension-less README."""
    from test_pdf_readers import manual_pdf
    from test_structure_real import MANPAGE_TXT, NAVIGATION, SECTIONS, SITE_PAGES

    corpus = tmp_path / "corpus"
    build_corpus(corpus)
    (corpus / "man").mkdir()
    (corpus / "man/tidewatch-sync.txt").write_text(MANPAGE_TXT, encoding="utf-8")
    page, heading, _ = SITE_PAGES["docbook/ch02.en.html"]
    (corpus / "site").mkdir()
    (corpus / "site/ch02.en.html").write_text(page, encoding="utf-8")
    (corpus / "manuals").mkdir()
    (corpus / "manuals/heliograph.pdf").write_bytes(manual_pdf())
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(corpus)
        [report] = library.folders.sync()
        assert report.failed == 0, report.failures
        new = {"man/tidewatch-sync.txt", "site/ch02.en.html", "manuals/heliograph.pdf"}
        assert listed_paths(library, "corpus") == INDEXED | new

        def hits(query: str, path: str) -> list:
            found = [h for h in library.lookup.search(query, top_k=50).hits if h.path == path]
            assert found, (query, path)
            return found

        [pdf] = hits("quillon screws tripod", "manuals/heliograph.pdf")[:1]
        assert "Adjusting the tripod" in pdf.section[-1], pdf.section
        manual = library.catalog.list_source("corpus", limit=200).documents
        [man] = [e.doc for e in manual if e.path == "man/tidewatch-sync.txt"]
        sections = {
            h.section
            for h in library.lookup.search("tidewatch-sync", top_k=50).hits
            if h.doc == man
        }
        assert sections, "the manual page is found"
        assert {path[-1] for path in sections} <= SECTIONS, sections
        [site] = [e.doc for e in manual if e.path == "site/ch02.en.html"]
        stored = library.lookup.read(site).text
        assert stored.startswith(heading + "\n"), stored[:200]
        assert not any(word.lower() in stored.lower() for word in NAVIGATION[:4])
        assert {"pkg/docs/build/index.rst", "pkg/README", "pkg/templates/settings.mako"} <= (
            listed_paths(library, "corpus")
        )
        assert "git/man1/git-credential-store.1" in listed_paths(library, "corpus")
