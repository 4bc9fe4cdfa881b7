"""Settings: declared once, loaded once, passed down explicitly.

Precedence, lowest first: defaults < ``<home>/config.toml`` < ``KB_MCP_*`` environment <
command-line flags. ``load()`` is called by the entry points (CLI, ``serve``) and nowhere
else; no other module reads ``os.environ`` or a config file. ``docs/configuration.md`` is
generated from ``SETTINGS`` and a test fails when it is stale.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from kb_mcp import limits
from kb_mcp.errors import InvalidInput
from kb_mcp.limits import Limit
from kb_mcp.store.postgres import url as postgres_url

CONFIG_FILE_NAME = "config.toml"


@dataclass(frozen=True, slots=True)
class Setting:
    """One declared setting: its name, default, environment variable and help text.

    An integer setting names its ``limit`` (``kb_mcp/limits.py``): the range a value from
    the config file or the environment must fall in.
    """

    name: str
    default: Any
    help: str
    parse: Callable[[str], Any] = str
    limit: Limit | None = None
    choices: tuple[str, ...] = ()
    shown_default: str | None = None  # how the docs show a default that is resolved later

    @property
    def env(self) -> str:
        return "KB_MCP_" + self.name.upper()


def _parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"expected a boolean (1/0, true/false, yes/no), got {raw!r}")


def _parse_folders(raw: str) -> tuple[str, ...]:
    return tuple(part for part in raw.split(os.pathsep) if part.strip())


# The embedding providers a user can choose; ``kb_mcp/embed/registry.py`` dispatches on
# exactly these names (``embed.base.PROVIDERS`` is the same tuple, checked by a test).
EMBEDDERS = ("local", "ollama", "none")
# How the server watches folder sources; ``ingest/watch.WATCH_MODES`` is the same tuple
# (repeated so loading settings imports no ingest module; a test keeps them equal).
WATCH_MODES = ("auto", "poll", "off")
OLLAMA_DEFAULT_HOST = "http://localhost:11434"
# Who extracts typed entities and relations besides the ingest-time heuristics
# (``graph/llm.py``); the LLM pass runs in the background, after keyword search is ready.
GRAPH_EXTRACTORS = ("heuristic", "ollama")
GRAPH_DEFAULT_MODEL = "qwen3:0.6b"  # graph/llm.DEFAULT_MODEL, repeated: no import here
# Who reorders a search's first ranked passages (``kb_mcp/rerank/``): nobody, a
# cross-encoder in ONNX from a folder the user names, or a local chat model through Ollama.
# ``rerank.base.RERANKERS`` is the same tuple (repeated: no import here; a test keeps them).
RERANKERS = ("none", "onnx", "ollama")
RERANK_DEFAULT_MODEL = "qwen3:0.6b"  # rerank/ollama.DEFAULT_MODEL, repeated: no import here
# How a PDF becomes text; ``ingest/readers/pdf.PDF_MODES`` is the same tuple (no import).
PDF_MODES = ("layout", "text")
SQLITE = "sqlite"  # the `store` setting's default: the file kb.db in the home


@dataclass(frozen=True, slots=True)
class Store:
    """Where the library's index lives: the SQLite file ``kb.db`` in the home (the
    default; ``postgres_url`` is None) or a PostgreSQL database (issue 24).

    Its text is safe to show: ``str`` and ``repr`` give the URL with every secret removed
    (``store/postgres/url.shown``), so ``doctor``'s settings, a log line, an agent's config
    or a traceback's locals never hold the password. ``postgres_url`` is the URL as given,
    secrets included: only the code that connects reads it.
    """

    postgres_url: str | None = field(default=None, repr=False)

    def __str__(self) -> str:
        return SQLITE if self.postgres_url is None else postgres_url.shown(self.postgres_url)

    def __repr__(self) -> str:
        return f"Store({str(self)!r})"


def _parse_store(raw: str) -> Store:
    """``sqlite`` (or nothing) for the file in the home, else a checked PostgreSQL URL."""
    if raw.strip().lower() in ("", SQLITE):
        return Store()
    return Store(postgres_url.check(raw))


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "allow_agent_writes",
        False,
        "Let agents add documents through the "
        "`add_document` tool. Off by default: an agent can only read.",
        _parse_bool,
    ),
    Setting(
        "max_document_bytes",
        limits.MAX_DOCUMENT_BYTES.default,
        "Largest document (UTF-8 bytes) that `add_document` / `add-text` accept.",
        int,
        limits.MAX_DOCUMENT_BYTES,
    ),
    Setting(
        "max_title_chars",
        limits.MAX_TITLE_CHARS.default,
        "Longest title `add_document` accepts.",
        int,
        limits.MAX_TITLE_CHARS,
    ),
    Setting(
        "search_top_k",
        limits.TOP_K.default,
        "Results `search` returns when the caller does not say.",
        int,
        limits.TOP_K,
    ),
    Setting(
        "search_timeout_ms",
        limits.SEARCH_TIMEOUT_MS.default,
        "Deadline for one search or read query in SQLite, in CPU time (a busy machine "
        "stops it at three times this of wall-clock time); a search's question "
        "embedding has a budget of this length of its own (past it: keyword results), and "
        "a reranker works within it (past it: the ranking model's order).",
        int,
        limits.SEARCH_TIMEOUT_MS,
    ),
    Setting(
        "grep_timeout_ms",
        limits.GREP_TIMEOUT_MS.default,
        "Hard time limit of one `grep` call.",
        int,
        limits.GREP_TIMEOUT_MS,
    ),
    Setting(
        "grep_max_matches",
        limits.MAX_MATCHES.default,
        "Most matches one `grep` call returns by default.",
        int,
        limits.MAX_MATCHES,
    ),
    Setting(
        "folders",
        (),
        "Folders to keep in sync as sources, separated by the OS path "
        "separator (`:` on Linux and macOS). In config.toml: a list of paths.",
        _parse_folders,
    ),
    Setting(
        "sync_interval_s",
        300,
        "Seconds between background syncs of folder sources "
        "while the server runs (0 = only at start).",
        int,
        limits.SYNC_INTERVAL_S,
    ),
    Setting(
        "watch",
        "auto",
        "How the server notices file changes in folder sources between syncs: `auto` "
        "(the OS's file notifications, polling where they fail, e.g. at the inotify "
        "watch limit), `poll` (every 0.5 s; for network file systems, which send no "
        "notifications), `off` (only the interval sync).",
        choices=WATCH_MODES,
    ),
    Setting(
        "max_files_per_source",
        20_000,
        "Cap on files per folder source; newest files are kept, the surplus is reported.",
        int,
        limits.MAX_FILES_PER_SOURCE,
    ),
    Setting(
        "relations",
        True,
        "Use document relations in search (corrections, withdrawals, supersessions, "
        "updates detected at ingest): the current document first, and each result says "
        "what changed it. Off only to measure what they bring (`bench retrieval "
        "--no-relations`).",
        _parse_bool,
    ),
    Setting(
        "embedder",
        "local",
        "Which embedder builds the vectors of hybrid search: `local` (in-process, "
        "offline, the bundled all-MiniLM-L6-v2 int8 model; the default, so search is "
        "hybrid out of the box), `ollama` (an Ollama server), `none` (keyword and grep "
        "only; nothing is embedded and no model is loaded).",
        choices=EMBEDDERS,
    ),
    Setting(
        "embed_model",
        "",
        "The embedding model; empty means the provider's default (`local`: the "
        "bundled model, `ollama`: `qwen3-embedding:0.6b`). Changing it re-embeds in "
        "the background; search keeps the old vectors until the new ones are complete.",
        shown_default="provider default",
    ),
    Setting(
        "ollama_host",
        OLLAMA_DEFAULT_HOST,
        "The Ollama server used when `embedder = ollama`. When not set here, "
        "`$OLLAMA_HOST` is used if set.",
        shown_default=f"$OLLAMA_HOST or {OLLAMA_DEFAULT_HOST}",
    ),
    Setting(
        "graph_extractor",
        "heuristic",
        "Who finds the entity graph's entities: `heuristic` (rules, at ingest, always "
        "on) or `ollama` (also a local chat model through `ollama_host`, in the "
        "background after ingest: typed relations such as owns / runs / depends_on; "
        "chunk text is fenced as data, answers are checked against it, failures keep "
        "the heuristic entities and are retried later).",
        choices=GRAPH_EXTRACTORS,
    ),
    Setting(
        "pdf_mode",
        "layout",
        "How PDFs become text: `layout` (pymupdf4llm with its layout model when the "
        "`pdf` extra is installed: reading order of multi-column pages, headings, tables "
        "as Markdown; else the built-in reader) or `text` (the built-in reader, "
        "pypdfium2: each page's text in its stored order with headings by font size, "
        "no tables; many times faster than the layout model).",
        choices=PDF_MODES,
    ),
    Setting(
        "graph_model",
        GRAPH_DEFAULT_MODEL,
        "The Ollama chat model of `graph_extractor = ollama` (`ollama pull` it first). "
        "Each chunk is asked once per model.",
    ),
    Setting(
        "reranker",
        "none",
        "Who reorders a search's first 20 ranked passages: `none` (the default: the ranking "
        "model's order stands), `onnx` (a cross-encoder in ONNX, from the folder `reranker_model` "
        "names), `ollama` (a local chat model through `ollama_host` scores each passage "
        "0-10; passage text is fenced as data). It runs inside the search's "
        "`search_timeout_ms`; slow, failing or gone, the model's order stands and the "
        "result's reason says why.",
        choices=RERANKERS,
    ),
    Setting(
        "reranker_model",
        "",
        "The reranker's model: for `onnx` a folder holding `model.onnx` (a "
        "cross-encoder: input_ids, attention_mask, optional token_type_ids in, one "
        "logit or two classes out) and its `tokenizer.json`; for `ollama` a chat model "
        f"(empty: `{RERANK_DEFAULT_MODEL}`).",
        shown_default="empty (`ollama`: qwen3:0.6b)",
    ),
    Setting(
        "store",
        Store(),
        "Where the library's index lives: `sqlite` (the file kb.db in the home) or a "
        "PostgreSQL database shared by a team, `postgresql://USER@HOST:5432/DBNAME"
        "?sslmode=verify-full` (needs `pip install 'kb-mcp[postgresql]'`; every libpq "
        "parameter works, TLS ones included). Keep the password out of the URL: libpq "
        "reads it from `~/.pgpass` (or `$PGPASSFILE`) or `$PGPASSWORD`. A password in the "
        "URL is never shown: `doctor`, errors and `kb-mcp install` show the URL without it.",
        _parse_store,
        shown_default="`sqlite`",
    ),
    Setting(
        "host",
        "",
        "This machine's name on a shared (PostgreSQL) library: a folder source belongs to "
        "the machine that added it, and only that machine syncs it or drops it. Empty: the "
        "host name. Set it to keep a machine's folders when its name changes, or to give "
        "two homes on one machine folders of their own.",
        shown_default="the host name",
    ),
)

_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def default_home(environ: Mapping[str, str]) -> Path:
    """The XDG data dir (``$XDG_DATA_HOME/kb-mcp``, else ``~/.local/share/kb-mcp``)."""
    user_home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    base = environ.get("XDG_DATA_HOME") or str(user_home / ".local" / "share")
    return Path(base) / "kb-mcp"


def resolve_home(home: str | Path | None, environ: Mapping[str, str] | None = None) -> Path:
    """The library folder in effect: ``home`` if given, else ``$KB_MCP_HOME``, else the
    XDG default; absolute, ``~`` expanded."""
    environ = os.environ if environ is None else environ
    return Path(home or environ.get("KB_MCP_HOME") or default_home(environ)).expanduser().resolve()


def process_environment() -> Mapping[str, str]:
    """This process's environment, for the one reader outside the settings: ``kb-mcp
    install`` finds an agent's config folder by the agent's own variables (``APPDATA``,
    ``XDG_CONFIG_HOME``, ``CODEX_HOME``)."""
    return os.environ


def non_default_home(
    home: str | Path | None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The effective home when it is not the default one, else None.

    ``kb-mcp install`` writes this into an agent's server entry: an agent does not share
    the installing shell's ``KB_MCP_HOME`` and would otherwise open an empty default
    library (issue 7 item 21).
    """
    environ = os.environ if environ is None else environ
    effective = resolve_home(home, environ)
    return None if effective == default_home(environ).expanduser().resolve() else effective


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything configurable, frozen. Built by ``load()``; tests build it directly."""

    home: Path
    allow_agent_writes: bool = False
    max_document_bytes: int = 2_000_000
    max_title_chars: int = 300
    search_top_k: int = 8
    search_timeout_ms: int = 2_000
    grep_timeout_ms: int = 3_000
    grep_max_matches: int = 200
    folders: tuple[str, ...] = field(default_factory=tuple)
    sync_interval_s: int = 300
    watch: str = "auto"
    max_files_per_source: int = 20_000
    relations: bool = True
    embedder: str = "local"
    embed_model: str = ""
    ollama_host: str = OLLAMA_DEFAULT_HOST
    graph_extractor: str = "heuristic"
    graph_model: str = GRAPH_DEFAULT_MODEL
    pdf_mode: str = "layout"
    reranker: str = "none"
    reranker_model: str = ""
    store: Store = field(default_factory=Store)
    host: str = ""
    # Where each value came from (name → "config.toml", "$KB_MCP_EMBEDDER", "flag", …);
    # a name not listed has its default. Shown by ``doctor``; not part of equality.
    origins: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def with_overrides(self, **values: Any) -> Settings:
        return replace(self, **values)

    def origin(self, name: str) -> str:
        """Where the value of setting ``name`` came from: ``default`` when nowhere."""
        return dict(self.origins).get(name, "default")


def _coerce(setting: Setting, value: Any, origin: str) -> Any:
    """Turn a config-file or env value into the declared type, or say which one is wrong."""
    coerced = _coerce_type(setting, value, origin)
    if setting.choices:
        coerced = _check_choice(setting, coerced, origin)
    if setting.limit is not None:
        try:
            setting.limit.check(coerced, name=setting.name)
        except InvalidInput as exc:
            raise InvalidInput(f"bad value in {origin}: {exc.message}", hint=exc.hint) from exc
    return coerced


def _check_choice(setting: Setting, value: Any, origin: str) -> str:
    """``value`` if it is one of the setting's choices (any case), else which ones are."""
    normalized = str(value).strip().lower()
    if normalized not in setting.choices:
        raise InvalidInput(
            f"bad value for {setting.name} in {origin}: {value!r}",
            hint=f"choose one of: {', '.join(setting.choices)}",
        )
    return normalized


def _coerce_type(setting: Setting, value: Any, origin: str) -> Any:
    try:
        if isinstance(value, str):
            return setting.parse(value)
        if setting.name == "folders" and isinstance(value, list):
            return tuple(str(v) for v in value)
        if isinstance(setting.default, bool) and isinstance(value, bool):
            return value
        is_int = isinstance(setting.default, int) and not isinstance(setting.default, bool)
        if is_int and isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ValueError(f"expected {type(setting.default).__name__}, got {value!r}")
    except ValueError as exc:
        raise InvalidInput(f"bad value for {setting.name} in {origin}: {exc}") from exc
    except InvalidInput as exc:  # a parser's own message (never quoting a store's URL)
        raise InvalidInput(
            f"bad value for {setting.name} in {origin}: {exc.message}", hint=exc.hint
        ) from None


def _read_config_file(home: Path) -> dict[str, Any]:
    path = home / CONFIG_FILE_NAME
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput(f"cannot read config file {path}: {exc}") from exc
    unknown = sorted(set(data) - set(_BY_NAME))
    if unknown:
        raise InvalidInput(
            f"unknown setting(s) in {path}: {', '.join(unknown)}",
            hint="known settings: " + ", ".join(_BY_NAME),
        )
    return {name: _coerce(_BY_NAME[name], value, str(path)) for name, value in data.items()}


def load(
    *,
    home: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the one ``Settings`` of this process from defaults, file, environment, flags.

    ``overrides`` are the flags the user gave (``None`` values mean "not given").
    """
    environ = os.environ if environ is None else environ
    home_path = resolve_home(home, environ)
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    if environ.get("OLLAMA_HOST"):  # Ollama's own variable, below everything of ours
        values["ollama_host"], origins["ollama_host"] = environ["OLLAMA_HOST"], "$OLLAMA_HOST"
    for name, value in _read_config_file(home_path).items():
        values[name], origins[name] = value, CONFIG_FILE_NAME
    for setting in SETTINGS:
        raw = environ.get(setting.env)
        if raw is not None:
            values[setting.name] = _coerce(setting, raw, f"${setting.env}")
            origins[setting.name] = f"${setting.env}"
    for name, value in (overrides or {}).items():
        if value is not None:
            setting = _BY_NAME.get(name)
            if setting is not None and isinstance(value, str):  # as typed: parse, check
                value = _coerce(setting, value, "the command line")
            values[name], origins[name] = value, "flag"
    known = {f.name for f in fields(Settings)}
    return Settings(
        home=home_path,
        origins=tuple(sorted(origins.items())),
        **{k: v for k, v in values.items() if k in known},
    )


def settings_markdown() -> str:
    """The settings table for docs/configuration.md, generated from ``SETTINGS``."""
    lines = [
        "| setting (config.toml) | environment | default | what it does |",
        "|---|---|---|---|",
    ]
    for s in SETTINGS:
        default = list(s.default) if isinstance(s.default, tuple) else s.default
        shown = str(default).lower() if isinstance(default, bool) else repr(default)
        shown = f"`{shown}`" if s.shown_default is None else s.shown_default
        lines.append(f"| `{s.name}` | `{s.env}` | {shown} | {s.help} |")
    return "\n".join(lines)
