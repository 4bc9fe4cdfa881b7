"""YAML frontmatter: split it from a Markdown body, and write it back.

Frontmatter is the leading block between a ``---`` line and a closing ``---`` (or
``...``) line. A malformed block is treated as body text rather than rejected: a user's
note with a stray ``---`` must still be indexed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import yaml


@dataclass(frozen=True, slots=True)
class Frontmatter:
    meta: dict[str, Any]
    body: str
    body_start_line: int  # 1-based line of the body's first line in the whole text


def split_frontmatter(text: str) -> Frontmatter:
    """The frontmatter mapping and the body after it; ``{}`` when there is none."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return Frontmatter({}, text, 1)
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            try:
                meta = yaml.safe_load("\n".join(lines[1:index])) or {}
            except yaml.YAMLError:
                return Frontmatter({}, text, 1)
            if not isinstance(meta, dict):
                return Frontmatter({}, text, 1)
            return Frontmatter(meta, "\n".join(lines[index + 1 :]), index + 2)
    return Frontmatter({}, text, 1)


def render_frontmatter(meta: dict[str, Any], body: str) -> str:
    """``---`` YAML ``---`` then the body, unchanged."""
    dumped = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False, default_flow_style=False)
    return f"---\n{dumped}---\n{body}"


def meta_date(meta: dict[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` that holds a date, as ``YYYY-MM-DD`` (or an ISO timestamp)."""
    for key in keys:
        value = meta.get(key)
        if isinstance(value, datetime):
            return value.isoformat()
        if isinstance(value, date):
            return value.isoformat()
        if isinstance(value, str) and value.strip():
            parsed = _parse_date_text(value.strip())
            if parsed is not None:
                return parsed
    return None


def _parse_date_text(text: str) -> str | None:
    """``YYYY-MM-DD`` stays a date (as YAML gives it unquoted); longer text a timestamp."""
    try:
        if len(text) == 10:
            return date.fromisoformat(text).isoformat()
        return datetime.fromisoformat(text.replace("Z", "+00:00")).isoformat()
    except ValueError:
        try:
            return date.fromisoformat(text[:10]).isoformat()
        except ValueError:
            return None


def meta_list(meta: dict[str, Any], key: str) -> tuple[str, ...]:
    """A list-valued field (a lone string counts as one item)."""
    value = meta.get(key)
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, list):
        return tuple(str(v) for v in value if v is not None and str(v).strip())
    return ()
