"""Merge one server entry into an agent's config text, JSON or TOML, keeping the rest.

JSON configs are small objects an agent reads whole, so they are parsed and written back
with two-space indents. A Codex ``config.toml`` is the user's hand-edited file, with
comments, key order and other tables they care about, so it goes through ``tomlkit``,
which edits the document in place (a plain TOML writer would drop every comment). The
merged text is read back with ``tomllib`` and checked to hold exactly the old content
plus the entry before anything is written.

Nothing is returned, and so nothing is written, when the file is not valid, its servers
key is not a table, or a different entry already has the name (unless ``force``).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from kb_mcp.errors import Conflict, InvalidInput


def merged_text(
    path: Path, text: str, fmt: str, key: str, name: str, entry: dict[str, Any], force: bool
) -> str:
    """``text`` (the config at ``path``, '' when new) with ``key[name] = entry``."""
    if fmt == "toml":
        return _merged_toml(path, text, key, name, entry, force)
    return _merged_json(path, text, key, name, entry, force)


def read_entry(text: str, fmt: str, key: str, name: str) -> dict[str, Any] | None:
    """The entry named ``name`` in a config's text (what an agent would start)."""
    data = tomllib.loads(text) if fmt == "toml" else json.loads(text)
    return data.get(key, {}).get(name)


def _invalid(path: Path, problem: str) -> InvalidInput:
    return InvalidInput(
        f"cannot read {path}: {problem}; nothing was changed",
        hint="fix or move the file, then run the install again",
    )


def _check_replace(
    path: Path, key: str, name: str, current: Any, entry: dict[str, Any], force: bool
) -> None:
    if current is not None and current != entry and not force:
        raise Conflict(
            f"{path} already has an MCP server named {name!r} under {key!r}, configured "
            f"differently: {json.dumps(current)}",
            hint="pass --force to replace it, or --name to install under another name",
        )


def _merged_json(
    path: Path, text: str, key: str, name: str, entry: dict[str, Any], force: bool
) -> str:
    try:
        config = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise _invalid(path, f"not valid JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise _invalid(path, "it does not hold a JSON object")
    servers = config.get(key, {})
    if not isinstance(servers, dict):
        raise _invalid(path, f"its {key!r} is not an object")
    _check_replace(path, key, name, servers.get(name), entry, force)
    return json.dumps({**config, key: {**servers, name: entry}}, indent=2) + "\n"


def _merged_toml(
    path: Path, text: str, key: str, name: str, entry: dict[str, Any], force: bool
) -> str:
    import tomlkit  # only the TOML agent needs it
    from tomlkit.exceptions import TOMLKitError

    try:
        before = tomllib.loads(text)
        document = tomlkit.parse(text)
    except (tomllib.TOMLDecodeError, TOMLKitError) as exc:
        raise _invalid(path, f"not valid TOML ({exc})") from exc
    servers = before.get(key, {})
    if not isinstance(servers, dict):
        raise _invalid(path, f"its {key!r} is not a table")
    _check_replace(path, key, name, servers.get(name), entry, force)
    if key not in document:
        document.add(key, tomlkit.table(is_super_table=True))
    document[key][name] = _toml_table(entry)  # type: ignore[index]
    merged = tomlkit.dumps(document).rstrip("\n") + "\n"
    expected = {**before, key: {**servers, name: entry}}
    if tomllib.loads(merged) != expected:  # e.g. a server defined by dotted keys elsewhere
        raise _invalid(path, f"its {key!r} could not be edited in place")
    return merged


def _toml_table(entry: dict[str, Any]) -> Any:
    """The entry as a TOML table: scalars and arrays first, ``env`` as its own sub-table."""
    import tomlkit

    table = tomlkit.table()
    for field, value in entry.items():
        if not isinstance(value, dict):
            table.add(field, value)
    for field, value in entry.items():
        if isinstance(value, dict):
            sub = tomlkit.table()
            sub.update(value)
            table.add(field, sub)
    last = table[list(entry)[-1]] if isinstance(entry[list(entry)[-1]], dict) else table
    last.add(tomlkit.nl())  # a blank line before whatever table follows
    return table
