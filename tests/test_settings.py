"""settings.load(): defaults < config.toml < KB_MCP_* env < overrides, and clear errors.

Every test passes ``environ={...}`` explicitly, so a developer's ``KB_MCP_*`` variables
cannot change what is tested.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kb_mcp.errors import InvalidInput
from kb_mcp.settings import CONFIG_FILE_NAME, SETTINGS, Settings, load


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / CONFIG_FILE_NAME).write_text(text, encoding="utf-8")


def test_settings_defaults_match_the_table(tmp_path: Path) -> None:
    loaded = load(home=tmp_path, environ={})
    assert loaded == Settings(home=tmp_path.resolve())
    assert {s.name: getattr(loaded, s.name) for s in SETTINGS} == {
        s.name: s.default for s in SETTINGS
    }


def test_settings_config_file_overrides_defaults(tmp_path: Path) -> None:
    _config(tmp_path, "search_top_k = 12\nallow_agent_writes = true\n")
    loaded = load(home=tmp_path, environ={})
    assert (loaded.search_top_k, loaded.allow_agent_writes) == (12, True)
    assert loaded.grep_max_matches == 200


def test_settings_env_overrides_config_file(tmp_path: Path) -> None:
    _config(tmp_path, "search_top_k = 12\ngrep_max_matches = 50\n")
    loaded = load(home=tmp_path, environ={"KB_MCP_SEARCH_TOP_K": "20"})
    assert (loaded.search_top_k, loaded.grep_max_matches) == (20, 50)


def test_settings_overrides_beat_env_and_none_means_not_given(tmp_path: Path) -> None:
    _config(tmp_path, "search_top_k = 12\ngrep_max_matches = 50\n")
    loaded = load(
        home=tmp_path,
        environ={"KB_MCP_SEARCH_TOP_K": "20", "KB_MCP_GREP_MAX_MATCHES": "70"},
        overrides={"search_top_k": 30, "grep_max_matches": None},
    )
    assert (loaded.search_top_k, loaded.grep_max_matches) == (30, 70)


def test_settings_every_setting_reads_its_env_variable(tmp_path: Path) -> None:
    assert [s.env for s in SETTINGS][:2] == [
        "KB_MCP_ALLOW_AGENT_WRITES",
        "KB_MCP_MAX_DOCUMENT_BYTES",
    ]
    env = {"KB_MCP_ALLOW_AGENT_WRITES": "yes", "KB_MCP_SYNC_INTERVAL_S": "0"}
    loaded = load(home=tmp_path, environ=env)
    assert (loaded.allow_agent_writes, loaded.sync_interval_s) == (True, 0)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("true", True),
        (" YES ", True),
        ("on", True),
        ("0", False),
        ("off", False),
        ("No", False),
        ("", False),
    ],
)
def test_settings_bool_env_spellings(tmp_path: Path, raw: str, expected: bool) -> None:
    loaded = load(home=tmp_path, environ={"KB_MCP_ALLOW_AGENT_WRITES": raw})
    assert loaded.allow_agent_writes is expected


def test_settings_bad_bool_env_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        load(home=tmp_path, environ={"KB_MCP_ALLOW_AGENT_WRITES": "maybe"})
    assert "$KB_MCP_ALLOW_AGENT_WRITES" in caught.value.message
    assert "'maybe'" in caught.value.message


def test_settings_bad_int_env_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        load(home=tmp_path, environ={"KB_MCP_SEARCH_TOP_K": "eight"})
    assert "$KB_MCP_SEARCH_TOP_K" in caught.value.message
    assert "search_top_k" in caught.value.message


def test_settings_unknown_key_in_config_file_is_named_with_known_ones(tmp_path: Path) -> None:
    _config(tmp_path, "search_top_k = 3\nserch_top_k = 5\ncolour = 'red'\n")
    with pytest.raises(InvalidInput) as caught:
        load(home=tmp_path, environ={})
    assert "colour, serch_top_k" in caught.value.message
    assert str(tmp_path / CONFIG_FILE_NAME) in caught.value.message
    assert caught.value.hint == "known settings: " + ", ".join(s.name for s in SETTINGS)


@pytest.mark.parametrize(
    "line",
    ["search_top_k = 8.5", "search_top_k = true", "allow_agent_writes = 1", "folders = 3"],
)
def test_settings_wrong_type_in_config_file_names_the_setting(tmp_path: Path, line: str) -> None:
    _config(tmp_path, line + "\n")
    with pytest.raises(InvalidInput) as caught:
        load(home=tmp_path, environ={})
    assert f"bad value for {line.split()[0]} in {tmp_path / CONFIG_FILE_NAME}" in (
        caught.value.message
    )


def test_settings_unparsable_config_file_is_invalid_input(tmp_path: Path) -> None:
    _config(tmp_path, "search_top_k = [\n")
    with pytest.raises(InvalidInput, match="cannot read config file"):
        load(home=tmp_path, environ={})


def test_settings_string_values_in_config_file_are_parsed(tmp_path: Path) -> None:
    _config(tmp_path, "search_top_k = '9'\nallow_agent_writes = 'yes'\n")
    loaded = load(home=tmp_path, environ={})
    assert (loaded.search_top_k, loaded.allow_agent_writes) == (9, True)


def test_settings_folders_from_env_split_by_pathsep(tmp_path: Path) -> None:
    raw = os.pathsep.join(["/notes", "", "/work/docs", "  "])
    loaded = load(home=tmp_path, environ={"KB_MCP_FOLDERS": raw})
    assert loaded.folders == ("/notes", "/work/docs")


def test_settings_folders_from_config_file_list(tmp_path: Path) -> None:
    _config(tmp_path, "folders = ['/notes', '~/work/docs']\n")
    assert load(home=tmp_path, environ={}).folders == ("/notes", "~/work/docs")


def test_settings_folders_env_replaces_config_file_list(tmp_path: Path) -> None:
    _config(tmp_path, "folders = ['/notes']\n")
    loaded = load(home=tmp_path, environ={"KB_MCP_FOLDERS": "/elsewhere"})
    assert loaded.folders == ("/elsewhere",)


def test_settings_home_from_kb_mcp_home_env(tmp_path: Path) -> None:
    home = tmp_path / "from-env"
    _config(home, "search_top_k = 4\n")
    loaded = load(environ={"KB_MCP_HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert loaded.home == home.resolve()
    assert loaded.search_top_k == 4


def test_settings_explicit_home_beats_kb_mcp_home_env(tmp_path: Path) -> None:
    explicit, from_env = tmp_path / "explicit", tmp_path / "from-env"
    _config(explicit, "search_top_k = 5\n")
    _config(from_env, "search_top_k = 6\n")
    loaded = load(home=explicit, environ={"KB_MCP_HOME": str(from_env)})
    assert (loaded.home, loaded.search_top_k) == (explicit.resolve(), 5)


def test_settings_home_defaults_to_xdg_data_home(tmp_path: Path) -> None:
    loaded = load(environ={"XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert loaded.home == (tmp_path / "xdg" / "kb-mcp").resolve()


def test_settings_home_expands_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load(home="~/kb", environ={}).home == (tmp_path / "kb").resolve()


def test_settings_home_without_xdg_uses_home_from_given_environ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "process-home"))
    loaded = load(environ={"HOME": str(tmp_path / "given-home")})
    assert loaded.home == (tmp_path / "given-home" / ".local" / "share" / "kb-mcp").resolve()
