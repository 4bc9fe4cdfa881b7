"""YAML frontmatter: split it from a Markdown body, and write it back.

Frontmatter is the leading block between a ``---`` line and a closing ``---`` (or
``...``) line. It is untrusted input from any file in a folder, so it is parsed
defensively (issue 7 item 13: 360 bytes of aliases expanded into a 52 MB title in 1.7 s):

- A block over ``MAX_FRONTMATTER_CHARS``, nested deeper than ``MAX_DEPTH``, holding a
  YAML anchor or alias (``&a`` / ``*a``, the "billion laughs" bomb), not a mapping, or not
  valid YAML is **ignored**: ``meta`` is ``{}``, the block stays in the body as text, and
  ``problem`` says why. The check reads the event stream before anything is built, so a
  bomb costs microseconds, never memory.
- Known fields must have the expected shape: text fields (``title``, ``status``, ``date``…)
  a scalar, list fields (``tags``, ``supersedes``) a scalar or a list of scalars. A field of
  another shape is dropped and named in ``problem``; the rest of the frontmatter is kept.

Either way the document is still indexed: a user's note with a stray ``---`` or a
hostile header must never become unindexable. ``problem`` is what a caller shows (the
Markdown reader puts it in ``Converted.notes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import yaml

# Real frontmatter is a few hundred bytes; 64 KiB holds any honest header (agent documents
# carry at most a 2 KiB uri, 32 tags and a title) and parses in milliseconds.
MAX_FRONTMATTER_CHARS = 64 * 1024
MAX_DEPTH = 16
# Titles of folder files are capped like agent titles: the default of
# ``Settings.max_title_chars``. Files are read in worker processes that get no settings.
MAX_TITLE_CHARS = 300

_TEXT_FIELDS = frozenset(
    "title status date updated id source_uri created_at updated_at source kind".split()
)
_LIST_FIELDS = frozenset({"tags", "supersedes"})
_SCALARS = (str, int, float, bool, date, datetime)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Refused(Exception):
    """Frontmatter that is not read at all; the message is the reason."""


@dataclass(frozen=True, slots=True)
class Frontmatter:
    meta: dict[str, Any]
    body: str
    body_start_line: int  # 1-based line of the body's first line in the whole text
    problem: str | None = None  # why (part of) the frontmatter was ignored


def split_frontmatter(text: str) -> Frontmatter:
    """The frontmatter mapping and the body after it; ``{}`` when there is none or it is
    ignored (then ``problem`` says why)."""
    block = _block_bounds(text)
    if block is None:
        return Frontmatter({}, text, 1)
    yaml_end, body_start, closing_line = block
    source = text[text.index("\n") + 1 : yaml_end] if yaml_end > 3 else ""
    try:
        meta = _load(source)
    except _Refused as refused:
        return Frontmatter({}, text, 1, f"frontmatter ignored: {refused}")
    meta, problem = _checked_fields(meta)
    return Frontmatter(meta, text[body_start:], closing_line + 1, problem)


def cap_title(title: str, limit: int = MAX_TITLE_CHARS) -> str:
    """``title`` cut to ``limit`` characters (ending in "…" when cut)."""
    return title if len(title) <= limit else title[: limit - 1].rstrip() + "…"


def _block_bounds(text: str) -> tuple[int, int, int] | None:
    """``(end of the YAML, start of the body, 1-based closing line)``, or None if no block."""
    first_end = text.find("\n")
    if first_end < 0 or text[:first_end].rstrip() != "---":
        return None
    start, line = first_end + 1, 2
    while start <= len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if text[start:end].rstrip() in ("---", "..."):
            return max(start - 1, first_end), min(end + 1, len(text)), line
        start, line = end + 1, line + 1
    return None


def _load(source: str) -> dict[str, Any]:
    """The YAML mapping in ``source``; ``_Refused`` names what made it unreadable."""
    if len(source) > MAX_FRONTMATTER_CHARS:
        raise _Refused(f"it is {len(source):,} characters, over {MAX_FRONTMATTER_CHARS:,}")
    try:
        _check_events(source)
        meta = yaml.load(source, Loader=_LOADER) or {}  # _LOADER is a SafeLoader
    except yaml.YAMLError as error:
        raise _Refused(f"invalid YAML ({_first_line(error)})") from error
    except (ValueError, TypeError, OverflowError, RecursionError) as error:
        raise _Refused(f"unreadable value ({type(error).__name__})") from error
    if not isinstance(meta, dict):
        raise _Refused(f"it is a {type(meta).__name__}, not a mapping of fields")
    return meta


def _check_events(source: str) -> None:
    """Refuse anchors, aliases and deep nesting before any object is built."""
    depth = 0
    for event in yaml.parse(source, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            line = event.start_mark.line + 2  # +1 for 1-based, +1 for the opening ---
            raise _Refused(f"YAML anchors and aliases are not accepted (line {line})")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _checked_fields(meta: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``meta`` without known fields of the wrong shape, and a note naming those dropped."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in meta.items():
        if key in _TEXT_FIELDS and value is not None and not isinstance(value, _SCALARS):
            dropped.append(f"{key} (a {type(value).__name__}, expected text)")
        elif key in _LIST_FIELDS and not _is_scalar_list(value):
            dropped.append(f"{key} (expected a list of texts)")
        else:
            kept[key] = value
    problem = f"frontmatter fields ignored: {', '.join(dropped)}" if dropped else None
    return kept, problem


def _is_scalar_list(value: Any) -> bool:
    if value is None or isinstance(value, _SCALARS):
        return True
    return isinstance(value, list) and all(isinstance(v, _SCALARS) or v is None for v in value)


def _first_line(error: yaml.YAMLError) -> str:
    return str(error).strip().split("\n")[0][:120]


def render_frontmatter(meta: dict[str, Any], body: str) -> str:
    """``---`` YAML ``---`` then the body, unchanged. Never writes anchors or aliases, which
    ``split_frontmatter`` refuses."""
    dumped = yaml.dump(
        meta,
        Dumper=_NoAliasDumper,
        allow_unicode=True,
        sort_keys=False,
        default_flow_style=False,
    )
    return f"---\n{dumped}---\n{body}"


class _NoAliasDumper(_DUMPER):  # type: ignore[misc, valid-type]
    def ignore_aliases(self, data: Any) -> bool:
        return True


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
    """A list-valued field (a lone string counts as one item; nested values are skipped)."""
    value = meta.get(key)
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, list):
        return tuple(str(v) for v in value if isinstance(v, _SCALARS) and str(v).strip())
    return ()
