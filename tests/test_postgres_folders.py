"""A folder source on a PostgreSQL library, as a new user meets it (issue 24).

``KB_MCP_STORE=<url> kb-mcp add DIR``, then ``search``, ``sync`` after an edit and after a
delete, and ``list``: each through the real CLI in a subprocess, on a real server
(fixture ``postgres_url``) and a real folder. The same folder added to a library in a
SQLite home is the reference: search must rank it the same, scores and cites included.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CLI_TIMEOUT_S

FILES = {
    "deploy.md": "# Deploy\n\n## Restart\n\nRestart the gateway with `systemctl restart gw`.\n"
    "Then check the health endpoint answers 200.\n",
    "adr/0007-sessions.md": "# ADR 7\n\nSessions live in Redis so a gateway restart keeps them.\n"
    "We rejected sticky sessions.\n",
    "health.txt": "Every service answers /healthz; the gateway also checks Redis.\n",
}
QUESTIONS = ("restart the gateway", "sticky sessions redis", "healthz")

Kb = Callable[..., subprocess.CompletedProcess]


def _cli(home: Path, base: dict[str, str]) -> Kb:
    """``kb(command, *args)``: the CLI on ``home`` with ``env`` (and a call's ``env``
    over it); fails the test unless it exits with ``exit_code`` (0 unless told)."""

    def run(
        command: str, *args: str, exit_code: int = 0, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, "-m", "kb_mcp", command, *args, "--home", str(home)],
            env={**base, **(env or {})},
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
            check=False,
        )
        assert done.returncode == exit_code, f"kb-mcp {command}: {done.stderr}"
        return done

    return run


def _machines(tmp_path: Path, child_env: dict[str, str], url: str) -> tuple[Kb, Kb]:
    """Two machines on one team library: a home each, and a host name each
    (``KB_MCP_HOST``: a folder source belongs to the machine that added it)."""
    env = {**child_env, "KB_MCP_STORE": url}
    return (
        _cli(tmp_path / "home-a", {**env, "KB_MCP_HOST": "machine-a"}),
        _cli(tmp_path / "home-b", {**env, "KB_MCP_HOST": "machine-b"}),
    )


def _ranking(kb: Kb, question: str) -> list[tuple]:
    found = json.loads(kb("search", question, "--mode", "keyword", "--json").stdout)
    return [(r["doc"], r["path"], r["cite"], r["score"]) for r in found["results"]]


def _paths(kb: Kb, question: str) -> list[str]:
    return [path for _doc, path, _cite, _score in _ranking(kb, question)]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def on_postgres(tmp_path: Path, child_env: dict[str, str], postgres_url: str) -> Kb:
    """The CLI as a new user runs it against a team library: ``KB_MCP_STORE=<url>``."""
    return _cli(tmp_path / "pg-home", {**child_env, "KB_MCP_STORE": postgres_url})


@pytest.fixture
def on_sqlite(tmp_path: Path, child_env: dict[str, str]) -> Kb:
    return _cli(tmp_path / "sqlite-home", child_env)


def test_an_added_folder_is_found_as_on_a_sqlite_home(
    folder: Path, on_postgres: Kb, on_sqlite: Kb
) -> None:
    for kb in (on_postgres, on_sqlite):
        kb("add", str(folder), "--yes")
    for question in QUESTIONS:
        want = _ranking(on_sqlite, question)
        assert want, question  # the comparison means something
        assert _ranking(on_postgres, question) == want, question
    assert _paths(on_postgres, "restart the gateway")[0] == "deploy.md"


def test_sync_takes_an_edit_and_a_delete(folder: Path, on_postgres: Kb) -> None:
    on_postgres("add", str(folder), "--yes")
    assert "deploy.md" in _paths(on_postgres, "systemctl")

    (folder / "deploy.md").write_text("# Deploy\n\nDrain the load balancer first.\n")
    on_postgres("sync")
    assert _paths(on_postgres, "drain balancer") == ["deploy.md"]
    assert _paths(on_postgres, "systemctl") == []

    (folder / "health.txt").unlink()
    on_postgres("sync")
    assert _paths(on_postgres, "healthz") == []
    grep = json.loads(on_postgres("grep", "healthz", "--json").stdout)
    assert grep["matches"] == []


def test_list_shows_the_folder_source(folder: Path, on_postgres: Kb) -> None:
    on_postgres("add", str(folder), "--yes", "--name", "team-notes")
    listed = json.loads(on_postgres("list", "--json").stdout)
    sources = {s["name"]: s for s in listed["sources"]}
    assert sources["team-notes"]["kind"] == "folder"
    assert sources["team-notes"]["documents"] == len(FILES)
    entries = json.loads(on_postgres("list", "team-notes", "--json").stdout)
    assert sorted(d["path"] for d in entries["documents"]) == sorted(FILES)


def test_another_machines_sync_keeps_the_folders_it_did_not_add(
    tmp_path: Path, folder: Path, child_env: dict[str, str], postgres_url: str
) -> None:
    """A team library holds every writer's folders, but each home lists only its own
    (``sources.json``): a sync on a machine that never added ``notes`` must not take
    it for a folder its user removed, or one teammate's sync empties the library."""
    machine_a, machine_b = _machines(tmp_path, child_env, postgres_url)
    machine_a("add", str(folder), "--yes")
    assert _paths(machine_b, "restart the gateway")[0] == "deploy.md"

    machine_b("sync")
    assert _paths(machine_b, "restart the gateway")[0] == "deploy.md"
    machine_a("sync")
    assert _paths(machine_a, "restart the gateway")[0] == "deploy.md"

    machine_b("remove", "notes", "--force")  # a teammate's folder goes only when forced
    assert _paths(machine_a, "restart the gateway") == []


def test_a_teammates_folder_of_the_same_name_is_not_taken_for_ones_own(
    tmp_path: Path, folder: Path, child_env: dict[str, str], postgres_url: str
) -> None:
    """Two machines' ``notes`` folders are two sources: sharing one source row, each
    machine's sync removed the files only the other one's folder holds."""
    machine_a, machine_b = _machines(tmp_path, child_env, postgres_url)
    machine_a("add", str(folder), "--yes")
    theirs = tmp_path / "machine-b" / "notes"
    theirs.mkdir(parents=True)
    (theirs / "cache.md").write_text("# Cache\n\nWarm the cache before the release.\n")

    taken = machine_b("add", str(theirs), "--yes", "--name", "notes", exit_code=6)
    assert "pick another --name" in taken.stderr

    added = machine_b("add", str(theirs), "--yes")
    assert "added source 'notes-2'" in added.stdout
    for machine in (machine_b, machine_a):
        machine("sync")
        assert _paths(machine, "warm the cache") == ["cache.md"]
        assert _paths(machine, "restart the gateway")[0] == "deploy.md"
