"""Choosing the embedder: settings precedence, clear errors, the registry, doctor, and a
keyword-only mode that never loads numpy or creates a vector table (issue 8, "Embedders").

Settings tests pass ``environ={...}`` explicitly; the subprocess tests run without the
developer's ``KB_MCP_*`` variables (``child_env``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kb_mcp.cli.main import EMBEDDER_CHOICES
from kb_mcp.embed import registry
from kb_mcp.embed.base import PROVIDERS
from kb_mcp.errors import InvalidInput
from kb_mcp.settings import CONFIG_FILE_NAME, EMBEDDERS, OLLAMA_DEFAULT_HOST, Settings, load


def without_embedder_variable(env: dict[str, str]) -> dict[str, str]:
    """``child_env`` sets ``KB_MCP_EMBEDDER=none``; these tests need config.toml or the
    default to decide."""
    return {k: v for k, v in env.items() if k != "KB_MCP_EMBEDDER"}


def config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / CONFIG_FILE_NAME).write_text(text, encoding="utf-8")


def test_embed_config_defaults_to_the_local_model(tmp_path: Path) -> None:
    """Hybrid search out of the box: nothing to configure, no server, no download."""
    loaded = load(home=tmp_path, environ={})
    assert (loaded.embedder, loaded.embed_model, loaded.ollama_host) == (
        "local",
        "",
        OLLAMA_DEFAULT_HOST,
    )
    assert loaded.origin("embedder") == "default"


def test_embed_config_precedence_file_then_env_then_flag(tmp_path: Path) -> None:
    config(tmp_path, 'embedder = "ollama"\nembed_model = "nomic-embed-text"\n')
    from_file = load(home=tmp_path, environ={})
    assert (from_file.embedder, from_file.embed_model) == ("ollama", "nomic-embed-text")
    assert from_file.origin("embedder") == CONFIG_FILE_NAME

    env = {"KB_MCP_EMBEDDER": "none", "KB_MCP_EMBED_MODEL": "other"}
    from_env = load(home=tmp_path, environ=env)
    assert (from_env.embedder, from_env.embed_model) == ("none", "other")
    assert from_env.origin("embedder") == "$KB_MCP_EMBEDDER"

    overrides = {"embedder": "local", "embed_model": None}
    from_flag = load(home=tmp_path, environ=env, overrides=overrides)
    assert (from_flag.embedder, from_flag.embed_model) == ("local", "other")
    assert (from_flag.origin("embedder"), from_flag.origin("embed_model")) == (
        "flag",
        "$KB_MCP_EMBED_MODEL",
    )


def test_embed_config_ollama_host_falls_back_to_ollamas_own_variable(tmp_path: Path) -> None:
    ollama_env = {"OLLAMA_HOST": "http://gpu-box:11434"}
    assert load(home=tmp_path, environ=ollama_env).ollama_host == "http://gpu-box:11434"
    config(tmp_path, 'ollama_host = "http://file:11434"\n')
    assert load(home=tmp_path, environ=ollama_env).ollama_host == "http://file:11434"
    ours = {**ollama_env, "KB_MCP_OLLAMA_HOST": "http://ours:11434"}
    loaded = load(home=tmp_path, environ=ours)
    assert (loaded.ollama_host, loaded.origin("ollama_host")) == (
        "http://ours:11434",
        "$KB_MCP_OLLAMA_HOST",
    )


@pytest.mark.parametrize(
    ("where", "value"),
    [("env", "sentence-transformers"), ("file", "OpenAI"), ("flag", "bert")],
)
def test_embed_config_unknown_embedder_names_the_choices(
    tmp_path: Path, where: str, value: str
) -> None:
    environ, overrides = {}, {}
    if where == "env":
        environ = {"KB_MCP_EMBEDDER": value}
    elif where == "file":
        config(tmp_path, f'embedder = "{value}"\n')
    else:
        overrides = {"embedder": value}
    with pytest.raises(InvalidInput) as caught:
        load(home=tmp_path, environ=environ, overrides=overrides)
    assert value in caught.value.message and "embedder" in caught.value.message
    assert caught.value.hint == "choose one of: local, ollama, none"


def test_embed_config_choice_is_case_insensitive(tmp_path: Path) -> None:
    assert load(home=tmp_path, environ={"KB_MCP_EMBEDDER": " Ollama "}).embedder == "ollama"


def test_embed_config_every_list_of_providers_agrees() -> None:
    assert EMBEDDERS == EMBEDDER_CHOICES == PROVIDERS
    assert {*registry.IMPLEMENTATIONS, "none"} == set(EMBEDDERS)


def test_embed_config_registry_builds_none_as_no_embedder(tmp_path: Path) -> None:
    assert registry.make_embedder(Settings(home=tmp_path, embedder="none")) is None


def test_embed_config_a_provider_that_cannot_load_is_unavailable_with_its_reason(
    tmp_path: Path,
) -> None:
    embedder = registry.build_embedder("quantum", None, Settings(home=tmp_path))
    assert embedder is not None
    available = embedder.availability()
    assert not available.ok and "unknown embedder 'quantum'" in (available.reason or "")


def test_embed_config_cli_rejects_an_unknown_embedder_with_the_choices(kb_cli, home: Path) -> None:
    done = kb_cli("search", "kestrel", "--embedder", "bert")
    assert done.returncode == 2
    assert "invalid choice: 'bert'" in done.stderr and "'local', 'ollama', 'none'" in done.stderr


def test_embed_config_doctor_says_which_embedder_and_why(
    home: Path, child_env: dict[str, str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kb_mcp", "doctor", "--json", "--home", str(home)],
        env={**child_env, "KB_MCP_EMBEDDER": "none"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["embedder"]["detail"].startswith("none (from $KB_MCP_EMBEDDER)")
    assert checks["vectors"]["detail"] == "off: no embedder configured (--embedder none)"


def test_embed_config_doctor_fails_when_a_chosen_embedder_cannot_run(
    home: Path, child_env: dict[str, str]
) -> None:
    config(home, 'embedder = "ollama"\nollama_host = "http://127.0.0.1:9"\n')
    done = subprocess.run(
        [sys.executable, "-m", "kb_mcp", "doctor", "--json", "--home", str(home)],
        env=without_embedder_variable(child_env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    embedder = checks["embedder"]
    assert "ollama (from config.toml)" in embedder["detail"]
    assert "host http://127.0.0.1:9 (from config.toml)" in embedder["detail"]
    if not embedder["ok"]:  # unreachable host, or the provider module is not installed
        assert done.returncode == 1 and "NOT available" in embedder["detail"]


KEYWORD_ONLY = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from kb_mcp.library import Library
    from kb_mcp.settings import load

    home, folder = Path(sys.argv[1]), Path(sys.argv[2])
    settings = load(home=home, overrides={"embedder": "none", "allow_agent_writes": True})
    with Library(settings) as library:
        library.writing.add_document("Kestrels", "# Hovering\\n\\nThe kestrel hovers.", "n://k")
        library.writing.add_document("Kestrels", "# Hovering\\n\\nThe kestrel hunts.", "n://k")
        library.folders.add_folder(folder, "notes")
        library.folders.sync()
        (folder / "a.md").unlink()
        library.folders.sync()
        assert library.lookup.search("kestrel").hits
        assert library.vectors.embed_pending() is None and not library.vectors.state().usable
        library.catalog.overview()
        library.health.report()
        tables = library.db.query("SELECT name FROM sqlite_master WHERE name LIKE 'vec%'")
        signatures = library.db.query("SELECT COUNT(*) FROM embedding_signatures")
    print(sorted(m for m in ("numpy", "sqlite_vec") if m in sys.modules), tables, signatures)
    """
)


def test_embed_config_none_creates_no_vector_table_and_never_imports_numpy(
    tmp_path: Path, home: Path, child_env: dict[str, str]
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nthe heron waits.\n")
    (folder / "b.md").write_text("# B\n\nthe kestrel hovers.\n")
    script = tmp_path / "keyword_only.py"
    script.write_text(KEYWORD_ONLY)
    done = subprocess.run(
        [sys.executable, str(script), str(home), str(folder)],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] [] [(0,)]"


def test_embed_config_sync_with_embedder_none_prints_no_vector_line(
    kb_cli, tmp_path: Path, home: Path
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nthe heron waits.\n")
    done = kb_cli("add", str(folder), "--yes", "--embedder", "none")
    assert done.returncode == 0, done.stderr
    assert "vectors" not in done.stdout + done.stderr


def test_embed_config_sync_with_an_unavailable_embedder_still_succeeds(
    kb_cli, tmp_path: Path, home: Path
) -> None:
    config(home, 'ollama_host = "http://127.0.0.1:9"\n')  # nothing listens there
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nthe heron waits.\n")
    assert kb_cli("add", str(folder), "--yes", "--embedder", "none").returncode == 0
    (folder / "b.md").write_text("# B\n\nthe kestrel hovers.\n")
    done = kb_cli("sync", "--embedder", "ollama", "--embed-model", "missing-model", "--wait")
    assert done.returncode == 0, done.stderr
    assert "1 added" in done.stdout
    assert "vectors: 0 passages embedded, 2 pending" in done.stderr
    assert "Keyword search works" in done.stderr
    for wait in ([], ["--no-wait"]):  # the default, and said explicitly
        later = kb_cli("sync", "--embedder", "ollama", "--embed-model", "missing-model", *wait)
        assert later.returncode == 0, later.stderr
        assert "keyword search works now; 2 passages wait for vectors: " in later.stderr
        assert "vectors" not in later.stdout


@pytest.mark.anyio
async def test_embed_config_server_with_an_unavailable_embedder_answers_keyword_at_once(
    mcp_client, home: Path, server_log: Path, child_env: dict[str, str]
) -> None:
    """The background embedder starts after the handshake, fails (nothing listens at
    the Ollama host), and keyword search and ``list`` answer all the same."""
    config(home, 'embedder = "ollama"\nollama_host = "http://127.0.0.1:9"\n')
    env = without_embedder_variable(child_env)
    async with mcp_client(allow_agent_writes=True, env=env) as client:
        added = await client.call_tool(
            "add_document",
            {"title": "Kestrels", "content": "The kestrel hovers.", "source_uri": "n://k"},
        )
        assert added.structured_content["outcome"] == "created"
        found = await client.call_tool("search", {"query": "kestrel"})
        assert [h["title"] for h in found.structured_content["results"]] == ["Kestrels"]
        listed = (await client.call_tool("list", {})).structured_content
    assert listed["modes"] == ["keyword", "grep"]
    assert listed["health"]["vectors"].startswith("not usable: embedder unavailable")
    assert listed["health"]["embed_pending"] == 1
    [agent] = listed["sources"]
    assert (agent["embedded"], agent["embed_pending"]) == (None, None)


def test_embed_config_add_with_ollama_and_wait_returns_once_every_passage_has_a_vector(
    tmp_path: Path, home: Path, child_env: dict[str, str]
) -> None:
    """End to end through the CLI: ``kb-mcp add --wait`` with ollama against the loopback
    server that speaks Ollama's /api/embed (kb/ollama's tests/ollama_server.py); skipped
    on a checkout without the ollama embedder."""
    pytest.importorskip("kb_mcp.embed.ollama")
    ollama_server = pytest.importorskip("ollama_server")
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(5):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nthe heron number {i} waits.\n")
    env = without_embedder_variable(child_env)

    def kb_cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "kb_mcp", *args, "--home", str(home)]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)

    with ollama_server.serve_ollama() as server:
        config(home, f'embedder = "ollama"\nollama_host = "{server.url}"\n')
        done = kb_cli("add", str(folder), "--yes", "--wait")
        assert done.returncode == 0, done.stderr
        assert "vectors: 5 passages embedded with ollama:qwen3-embedding:0.6b" in done.stdout
        listed = json.loads(kb_cli("list", "--json").stdout)
    [notes] = listed["sources"]
    assert (notes["embedded"], notes["embed_pending"]) == (5, 0)


def test_fresh_install_searches_hybrid_with_no_embedder_configured(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """The README's path on a fresh machine: `kb-mcp add` a folder with no ``--embedder``
    and no ``KB_MCP_EMBEDDER``; a folder this small is embedded by the short rate
    measurement `add` makes before it returns, and search is hybrid."""
    env = without_embedder_variable(child_env)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "deploy.md").write_text(
        "# Rolling back a deployment\n\nRedeploy the previous image tag to undo a release.\n",
        encoding="utf-8",
    )
    (folder / "lunch.md").write_text("# Lunch\n\nThe canteen serves soup on Fridays.\n")
    home = tmp_path / "home"

    def kb(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "kb_mcp", *args, "--home", str(home)]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    added = kb("add", str(folder), "--yes")
    assert added.returncode == 0, added.stderr
    found = kb("search", "how do I undo the last release", "--json")
    assert found.returncode == 0, found.stderr
    answer = json.loads(found.stdout)
    assert answer["mode"] == "hybrid", answer
    assert answer["results"][0]["path"].endswith("deploy.md")
    assert "vector" in answer["results"][0]["legs"]


def test_cli_commands_run_the_local_model_on_every_core_and_the_server_on_one(
    tmp_path: Path,
) -> None:
    """Issue 8 speed: a CLI command (``add``, ``sync``) is waited on, so its local model
    gets every core; the default (the server's background embedding) keeps one thread."""
    import os

    from kb_mcp.embed.active import foreground_embedders

    settings = Settings(home=tmp_path, embedder="local")
    cli = foreground_embedders(settings)("local", None)
    server = registry.build_embedder("local", None, settings)
    threads = [e._load().session.get_session_options().intra_op_num_threads for e in (cli, server)]
    assert threads == [os.cpu_count(), 1]
    assert foreground_embedders(settings)("none", None) is None
