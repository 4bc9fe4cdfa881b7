"""Credentials and exfiltration URLs out of text. Pure functions over strings; no I/O.

``redact`` runs before a document is stored or indexed and ``redact_output`` on every tool
result, so a secret that reaches the library is never searchable nor handed back, and a
prompt-injected document cannot smuggle data out through a URL the agent's client fetches.
Secrets become ``[REDACTED:<kind>]``; assignments keep their key and URLs their user and host,
so the text still says *what* was there. Rules run in order, each over the previous output, so
the most specific kind wins (``github_token`` before ``token``). A marker counts as a
placeholder, which makes both functions idempotent. Patterns are linear: no unbounded
quantifier nests inside another, and scans skip ahead to literal prefixes or key words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["Redaction", "redact", "redact_output"]


@dataclass(frozen=True, slots=True)
class Redaction:
    """Redacted text plus what was taken out, so callers can log kinds without the secrets."""

    text: str
    count: int
    kinds: tuple[str, ...]


# A replacer returns (kind, replacement) for a match, or None to leave the match as it is.
_Replacer = Callable[[re.Match[str]], tuple[str, str] | None]


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str]
    replace: _Replacer


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _first_chars(pattern: str) -> str:
    """A lookahead for the characters a match of ``pattern`` can start with.

    Why: given a leading class, ``re`` skips to candidate positions in C instead of trying
    every alternative at every position: secret-free text scans ~5x faster. Handles what the
    tables below hold: top-level alternatives that start with a literal or a ``[...]`` class.
    """
    heads: set[str] = set()
    depth, at_start = 0, True
    for i, char in enumerate(pattern):
        if at_start:
            heads.update(pattern[i + 1 : pattern.index("]", i)] if char == "[" else char)
        depth += {"(": 1, ")": -1}.get(char, 0)
        at_start = char == "|" and depth == 0
    return "(?=[" + "".join(re.escape(c) for c in sorted(heads)) + "])"


def _replace_group(match: re.Match[str], group: str, kind: str) -> tuple[str, str]:
    """Replace one group of the match and keep its surroundings (key name, quotes, host)."""
    start, end = match.span(group)
    text = match.string
    return kind, text[match.start() : start] + _marker(kind) + text[end : match.end()]


# --- PEM private keys --------------------------------------------------------------------------
# A BEGIN without an END redacts to the end of the text: a truncated key is still a key.
_PEM = re.compile(
    r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)


# --- provider tokens ---------------------------------------------------------------------------
# Formats from each provider's documentation. The group name is the kind. Order matters where
# prefixes overlap: sk-ant- (Anthropic) before sk- (OpenAI).
_TOKEN_FORMATS: tuple[tuple[str, str], ...] = (
    ("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"),
    (
        "discord_webhook",
        r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}",
    ),
    ("anthropic_key", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai_key", r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("github_token", r"gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255}"),
    ("gitlab_token", r"glpat-[A-Za-z0-9_-]{20,}"),
    ("slack_token", r"xox[abprs]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}"),
    ("stripe_key", r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,}"),
    ("google_api_key", r"AIza[A-Za-z0-9_-]{35}"),
    ("huggingface_token", r"hf_[A-Za-z0-9]{30,}"),
    ("npm_token", r"npm_[A-Za-z0-9]{36}"),
    ("pypi_token", r"pypi-AgEI[A-Za-z0-9_-]{50,}"),
    ("sendgrid_key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
    ("aws_access_key", r"A[KS]IA[A-Z0-9]{16}"),
    ("discord_token", r"[MN][A-Za-z0-9]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}"),
    ("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
)
# ASCII boundaries, not \b: CJK letters count as \w, and a token glued to Chinese text is
# still a token.
_TOKEN = re.compile(
    _first_chars("|".join(fmt for _, fmt in _TOKEN_FORMATS))
    + r"(?<![A-Za-z0-9_-])(?:"
    + "|".join(f"(?P<{kind}>{fmt})" for kind, fmt in _TOKEN_FORMATS)
    + r")(?![A-Za-z0-9_])"
)


def _redact_token(match: re.Match[str]) -> tuple[str, str] | None:
    kind = match.lastgroup or "token"
    # Real tokens are random and contain digits; docs write ghp_xxxx… or sk-your-key-here.
    if kind != "jwt" and not any(c.isdigit() for c in match.group(0)):
        return None
    return kind, _marker(kind)


# --- Authorization headers and URL passwords: the named group is the value and its kind ------
_AUTH_HEADER = re.compile(
    r"(?=[Aa])(?<![A-Za-z0-9_])authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:basic[ \t]+"
    r"(?P<basic_auth>[A-Za-z0-9+/=]+)|(?:bearer|token)[ \t]+(?P<bearer_token>[A-Za-z0-9_.~+/=-]+))",
    re.IGNORECASE,
)
# Any scheme (postgres, redis, amqp, mongodb+srv…), so the match starts at "://". The password
# runs to the last "@" of the authority, so an unescaped "@" in it is not leaked.
_URL_USERINFO = re.compile(r"://[^\s:/?#@\"'<>]{0,128}:(?P<url_password>[^\s/?#\"'<>]{1,256})@")


def _redact_value(match: re.Match[str]) -> tuple[str, str] | None:
    kind = match.lastgroup or "secret"
    return None if _is_placeholder(match[kind]) else _replace_group(match, kind, kind)


# --- key = value assignments -------------------------------------------------------------------
# Key words match at the end of a longer key (DB_PASSWORD, dbPassword, client_secret) but not
# before more identifier (password_hash, api_key_name, get_token, max_tokens). "pass" counts
# only after a separator (DB_PASS, smtp.pass) so that bypass: and compass: stay prose.
# The group name is the kind; aws_secret_access_key comes before access_key.
_KEY_WORDS: tuple[tuple[str, str], ...] = (
    ("aws_secret_key", r"aws[_-]?secret[_-]?access[_-]?key"),
    ("password", r"passw(?:or)?d|pwd|pass(?<=[_.-]pass)"),
    ("secret", r"secret(?:[_-]?key)?"),
    ("token", r"token"),
    ("api_key", r"api[_-]?key"),
    ("access_key", r"access[_-]?key"),
    ("private_key", r"private[_-]?key"),
)
_KEY_WORD = re.compile("|".join(word for _, word in _KEY_WORDS), re.IGNORECASE)
# Forms: key=v, key: v, "key": "v", key := v, key: str = "v", cfg["key"] = v, f"…", `…`.
# "==" is a comparison and "::" a path separator, so neither separates a value.
_ASSIGN = re.compile(
    _first_chars(_KEY_WORD.pattern)
    + "(?:"
    + "|".join(f"(?P<{kind}>{word})" for kind, word in _KEY_WORDS)
    + r")(?![A-Za-z0-9_])(?:[\"']\]|[\"'])?[ \t]*"
    r"(?P<sep>(?::[ \t]*[A-Za-z_][\w.\[\], |]{0,60}?[ \t]+)?:?=(?!=)|:(?![:=]))[ \t]*"
    r"(?:[rbfu]{0,2}\"(?P<dq>(?:[^\"\\\n]|\\.)*)\"|[rbfu]{0,2}'(?P<sq>(?:[^'\\\n]|\\.)*)'"
    r"|`(?P<bq>[^`\n]*)`|(?P<bare>[^\s\"'`,;]{1,500}))",
    re.IGNORECASE,
)
# After "key:" a bare value must end its line: "password: hunter2" is config,
# "Password: enter it below" is prose.
_LINE_REST = re.compile(r"[ \t]*(?:[,;#`]|\r?\n|$)")
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_PATH = re.compile(r"(?:~|\.{1,2})?/|[A-Za-z]:\\")
_PLACEHOLDER = re.compile(
    r"""\[REDACTED:[a-z_]+\]                   # already redacted: keeps redact idempotent
      | <[^<>]*> | \$\{[^{}]*\} | \$[A-Za-z_]\w* | \{\{.*\}\} | \{\w*\} | %\(\w+\)s | %s
      | (.)\1*                                 # ****, xxxx, ........
      | your[\w.-]* | [\w.-]*[_-]here          # your-password, INSERT_TOKEN_HERE
    """,
    re.VERBOSE | re.IGNORECASE,
)
_PLACEHOLDER_WORDS = frozenset(
    {
        *("none", "null", "nil", "true", "false", "undefined", "redacted", "hidden", "required"),
        *("changeme", "change_me", "changeit", "example", "placeholder", "dummy", "optional"),
        # type names and keywords: `password: str`, `token = await fetch()`
        *("secret", "password", "token", "str", "string", "bytes", "int", "bool", "any"),
        *("secretstr", "await", "new", "yield", "lambda", "function", "async", "not", "typeof"),
    }
)


def _is_placeholder(value: str) -> bool:
    """Empty values, markers, template/env references and documentation stand-ins.

    Well-known defaults such as ``changeme`` are kept on purpose: they are public, and
    redacting them would only make configuration docs harder to read.
    """
    return (
        not value
        or value.lower() in _PLACEHOLDER_WORDS
        or _PLACEHOLDER.fullmatch(value) is not None
    )


def _is_code(value: str) -> bool:
    """An unquoted value that names something instead of spelling it out.

    ``get_token()``, ``os.environ["X"]``, ``self.token``, ``api_key=api_key`` are code.
    """
    return (
        any(c in value for c in "()[]{}")
        or _DOTTED_NAME.fullmatch(value) is not None
        or (value.isidentifier() and _KEY_WORD.search(value) is not None)
    )


def _redact_assignment(match: re.Match[str]) -> tuple[str, str] | None:
    # The value groups close last, so lastgroup names the one that matched (dq, sq, bq, bare).
    group = match.lastgroup or "bare"
    value = match[group]
    if _is_placeholder(value) or _PATH.match(value):
        return None
    if group == "bare":
        if _is_code(value):
            return None
        if match["sep"] == ":" and not _LINE_REST.match(match.string, match.end()):
            return None
    kind = next(kind for kind, _ in _KEY_WORDS if match[kind] is not None)
    return _replace_group(match, group, kind)


# --- exfiltration URLs (output only) -----------------------------------------------------------
_OPAQUE_RUN = re.compile(r"[A-Za-z0-9+/=_-]{64}")
_LOCAL_HOST = re.compile(r"localhost|.+\.localhost|127(?:\.\d{1,3}){3}|\[::1\]", re.IGNORECASE)
_HOST = re.compile(r"https?://(?:[^/?#@]*@)?(\[[^\]/]*\]|[^/?#:]*)", re.IGNORECASE)
# One level of balanced parentheses, as CommonMark allows in a link destination.
_MD_IMAGE = re.compile(
    r"!\[[^\[\]\n]{0,1000}\]\([ \t]*<?(?P<url>https?://(?:[^\s<>()]|\([^\s<>()]*\))+)",
    re.IGNORECASE,
)
_HTML_IMAGE = re.compile(
    r"<img\b[^<>]{0,1000}?\bsrc[ \t]*=[ \t]*[\"']?(?P<url>https?://[^\s\"'<>]+)", re.IGNORECASE
)
_URL = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)


def _is_remote(url: str) -> bool:
    host = _HOST.match(url)
    return host is None or _LOCAL_HOST.fullmatch(host.group(1)) is None


def _has_opaque_payload(url: str) -> bool:
    """Whether the query or fragment, percent-decoded, holds 64+ base64/hex characters in a row."""
    _, mark, query = url.partition("?")
    payload = query if mark else url.partition("#")[2]
    return _OPAQUE_RUN.search(unquote(payload)) is not None


def _split_trailing(url: str) -> tuple[str, str]:
    """URL and the punctuation after it, as GitHub autolinks do: ``(see https://x/a).`` ."""
    opens, closes, end = url.count("("), url.count(")"), len(url)
    while end and (url[end - 1] in ".,:;!?*'\"]}" or (url[end - 1] == ")" and closes > opens)):
        closes -= url[end - 1] == ")"
        end -= 1
    return url[:end], url[end:]


def _redact_image_url(match: re.Match[str]) -> tuple[str, str] | None:
    url = match["url"]
    if not _is_remote(url) or ("?" not in url and not _has_opaque_payload(url)):
        return None
    return _replace_group(match, "url", "exfil_url")


def _redact_bare_url(match: re.Match[str]) -> tuple[str, str] | None:
    url, tail = _split_trailing(match.group(0))
    if not _is_remote(url) or not _has_opaque_payload(url):
        return None
    return "exfil_url", _marker("exfil_url") + tail


# --- running the rules -------------------------------------------------------------------------
_CREDENTIAL_RULES = (
    _Rule(_PEM, lambda _: ("private_key", _marker("private_key"))),
    _Rule(_TOKEN, _redact_token),
    _Rule(_AUTH_HEADER, _redact_value),
    _Rule(_URL_USERINFO, _redact_value),
    _Rule(_ASSIGN, _redact_assignment),
)
# Exfiltration first: a URL that carries a secret out goes whole, not with a marker inside.
_OUTPUT_RULES = (
    _Rule(_MD_IMAGE, _redact_image_url),
    _Rule(_HTML_IMAGE, _redact_image_url),
    _Rule(_URL, _redact_bare_url),
    *_CREDENTIAL_RULES,
)


def _substitute(replace: _Replacer, kinds: list[str]) -> Callable[[re.Match[str]], str]:
    def substitute(match: re.Match[str]) -> str:
        hit = replace(match)
        if hit is None:
            return match.group(0)
        kinds.append(hit[0])
        return hit[1]

    return substitute


def _apply(text: str, rules: tuple[_Rule, ...]) -> Redaction:
    kinds: list[str] = []
    for rule in rules:
        text = rule.pattern.sub(_substitute(rule.replace, kinds), text)
    return Redaction(text=text, count=len(kinds), kinds=tuple(sorted(set(kinds))))


def redact(text: str) -> Redaction:
    """Credentials out of text on the way IN (before storage/indexing) and OUT.

    Kinds: ``private_key`` (PEM blocks, RSA/EC/OPENSSH/ENCRYPTED/PGP), provider tokens
    (``aws_access_key``, ``github_token``, ``gitlab_token``, ``slack_token``, ``slack_webhook``,
    ``discord_token``, ``discord_webhook``, ``stripe_key``, ``google_api_key``,
    ``openai_key``, ``anthropic_key``, ``huggingface_token``, ``npm_token``, ``pypi_token``,
    ``sendgrid_key``), ``jwt``, ``bearer_token`` / ``basic_auth`` in Authorization headers,
    ``url_password`` in ``scheme://user:pass@host``, and assignment values: ``aws_secret_key``,
    ``password``, ``secret``, ``token``, ``api_key``, ``access_key``, ``private_key``. A key
    matches when it ends in one of those words (``DB_PASSWORD``, ``clientSecret``, ``X-Api-Key``);
    an unquoted value ends at whitespace, a quote, ``,`` or ``;``.

    Assignment values are kept when they are empty, a marker, a template or env reference
    (``<your-password>``, ``${PASSWORD}``, ``$TOKEN``, ``{{ x }}``), one repeated character
    (``****``, ``xxx``), a stand-in (``your_token``, ``TOKEN_HERE``, ``changeme``, ``None``,
    ``str``), or a path (``/etc/ssl/key.pem``). Unquoted values are also kept when they are code
    (``get_token()``, ``self.token``, ``api_key=api_key``) or when a ``key:`` is followed by
    more words on its line (prose). A provider token without a digit is a doc stand-in.
    """
    return _apply(text, _CREDENTIAL_RULES)


def redact_output(text: str) -> Redaction:
    """What leaves through a tool: credentials (as redact) plus data-exfiltration URLs.

    An ``http(s)`` URL to a host other than loopback (``localhost``, ``*.localhost``,
    ``127.x.x.x``, ``[::1]``) becomes ``[REDACTED:exfil_url]`` when either

    - what follows its ``?`` (or, without one, its ``#``), percent-decoded, contains a run of
      64 or more characters from ``A-Z a-z 0-9 + / = _ -``: room for a key or a base64
      paragraph, longer than a SHA-1, a page number or a tracking tag. A SHA-256 hex digest
      (exactly 64) and a long ``q=a+b+c…`` search link are caught too; that is the price of
      catching base64, whose alphabet includes ``+``; or
    - it is the source of a Markdown image (``![alt](url)``) or an HTML ``<img src=…>`` and has
      any query string: a renderer fetches images unasked, so even ``?s=hunter2`` leaks.
      Badge images such as ``img.shields.io/…?style=flat`` are redacted by this rule as well.

    Only the URL is replaced; the alt text, brackets and trailing punctuation stay. Payloads
    in the path and reference-style images (``![x][ref]``) are not detected.
    """
    return _apply(text, _OUTPUT_RULES)
