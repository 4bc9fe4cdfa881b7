"""Secrets recognisable by what names them: a key, a header, a flag, a URL, a CSV column.

Each rule keeps the name and replaces only the value, so the text still says what was
there (``password = "[REDACTED:password]"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb_mcp.redact._rule import (
    Gated,
    LineGated,
    Rule,
    is_placeholder,
    line_span,
    looks_random,
    marker,
    reads_like_words,
    replace_group,
    splice,
)
from kb_mcp.redact.keywords import KEY_WORD, KEY_WORD_NEEDLES, word_kind

# --- Authorization headers and URL passwords: the named group is the value and its kind ------
_AUTH_HEADER = re.compile(
    r"[Aa](?<![A-Za-z0-9_].)(?i:uthorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:basic[ \t]+"
    r"(?P<basic_auth>[A-Za-z0-9+/=]+)|(?:bearer|token)[ \t]+(?P<bearer_token>[A-Za-z0-9_.~+/=-]+)))"
)
# Any scheme (postgres, redis, amqp, mongodb+srv, s3…), so the match starts at "://". The
# password runs to the last "@" of the authority, so an unescaped "@" in it is not leaked.
# A second form lets the password hold raw "/" (an AWS secret in s3://key:secret@bucket):
# no "@" in it, no empty segment, and not a port followed by a path (host:8080/a/@b).
_URL_USERINFO = re.compile(
    r"://[^\s:/?#@\"'<>]{0,128}:(?P<url_password>[^\s/?#\"'<>]{1,256}"
    r"|(?!\d{1,5}/)[^\s/?#\"'<>@]{1,256}(?:/[^\s/?#\"'<>@]{1,256}){1,8})@"
)


def _redact_value(match: re.Match[str]) -> tuple[str, str] | None:
    kind = match.lastgroup or "secret"
    return None if is_placeholder(match[kind]) else replace_group(match, kind, kind)


AUTH_HEADER = Gated(("authorization",), Rule(_AUTH_HEADER, _redact_value), lower=True)
URL_PASSWORD = Rule(_URL_USERINFO, _redact_value)

# --- curl -u user:pass / --user user:pass ---------------------------------------------------------
_CLI_USER = re.compile(
    r"-(?<![\w-]-)(?:u|-user)(?:[ \t]+|=)[\"']?"
    r"(?P<user>[^\s:\"'$]{1,100}):(?P<password>[^\s\"']{1,256})"
)


def _redact_cli_user(match: re.Match[str]) -> tuple[str, str] | None:
    value, user = match["password"], match["user"]
    # docker run -u 1000:1000, --user www-data:www-data, -u "$(id -u):$(id -g)" are not secrets
    if is_placeholder(value) or value.isdigit() or value == user or "(" in value:
        return None
    return replace_group(match, "password", "password")


CLI_USER = Rule(_CLI_USER, _redact_cli_user)

# --- password flags: mysql -pSECRET, sshpass -p SECRET, redis-cli -a SECRET, --password X ----
# A short flag means a password only after the command that reads it so (gcc -pthread and
# ssh -p 2222 stay). mysql takes its password glued (-pX); "-p mydb" names a database.
_FLAG_VALUE = (
    r"""(?:'(?P<sq>[^'\n]{1,200})'|"(?P<dq>[^"\n]{1,200})"|(?P<bare>[^\s'"`;|&]{1,200}))"""
)
# Starts with a class of the commands' first letters, checked behind, so ``re`` skips in C.
_PASSWORD_COMMAND = re.compile(
    r"[mrs](?<![\w./-].)(?:(?P<mysql>(?<=m)(?:ysql(?:dump|admin|import|show|check|pump|sh)?"
    r"|ariadb(?:-?dump|-?admin)?|ycli))|(?P<sshpass>(?<=s)shpass)|(?P<redis>(?<=r)edis-cli))"
    r"(?![\w.-])[^\n;|&]{0,300}"
)
_COMMAND_FLAG = {
    "mysql": re.compile(r"(?<=\s)-p" + _FLAG_VALUE),
    "sshpass": re.compile(r"(?<=\s)-p[ \t]*" + _FLAG_VALUE),
    "redis": re.compile(r"(?<=\s)-a[ \t]+" + _FLAG_VALUE),
}
# --password VALUE (spaced; "--password=X" is an assignment): the value must look made up
# or be quoted, so "use --password to …" stays prose.
_LONG_FLAG = re.compile(r"-(?<=\s-)-pass(?:wor)?d[ \t]+(?!-)" + _FLAG_VALUE)


def _flag_edit(match: re.Match[str], offset: int, loose: bool) -> tuple[int, int, str] | None:
    group = match.lastgroup or "bare"
    value = match[group]
    if is_placeholder(value) or "$(" in value or value.startswith("$"):
        return None
    if loose and group == "bare" and (len(value) < 6 or value.isalpha()):
        return None
    start, end = match.span(group)
    return offset + start, offset + end, marker("password")


def redact_password_flags(text: str, kinds: list[str]) -> str:
    """Passwords given as command-line flags (see above)."""
    edits = []
    for command in _PASSWORD_COMMAND.finditer(text):
        flag = _COMMAND_FLAG[command.lastgroup or "mysql"]
        segment = command.group(0)
        found = (_flag_edit(m, command.start(), False) for m in flag.finditer(segment))
        edits += [edit for edit in found if edit]
    if "--pass" in text:
        found = (_flag_edit(m, 0, True) for m in _LONG_FLAG.finditer(text))
        edits += [edit for edit in found if edit]
    kinds += ["password"] * len(edits)
    return splice(text, edits) if edits else text


PASSWORD_FLAGS = Gated(
    ("mysql", "mariadb", "mycli", "sshpass", "redis-cli", "--pass"), redact_password_flags
)

# --- key = value assignments -------------------------------------------------------------------
# Key words (``keywords.KEY_WORD``) match at the end of a longer key (DB_PASSWORD, dbPassword,
# client_secret) but not before more identifier (password_hash, api_key_name, get_token,
# max_tokens); the kind is read from the word afterwards.
# A key word as a whole part of an identifier: api_key, tokenValue, DB_PASSWORD, HTTPToken —
# not the tail of hunter2secret.
_KEY_PART = re.compile(
    r"(?:^|(?<=[_-])|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]))"
    + KEY_WORD
    + r"(?=$|[_\-A-Z0-9])"
)
# Forms: key=v, key: v, "key": "v", key := v, key: str = "v", cfg["key"] = v, f"…", `…`,
# and JSON inside a JSON string, where the quotes are escaped once or more: \"key\": \"v\".
# "==" is a comparison and "::" a path separator, so neither separates a value.
_ASSIGN = re.compile(
    rf"(?P<key>{KEY_WORD})(?![A-Za-z0-9_])(?:[\"']\]|\\{{0,4}}[\"'])?[ \t]*"
    r"(?P<sep>(?::[ \t]*[A-Za-z_][\w.\[\], |]{0,60}?[ \t]+)?:?=(?!=)|:(?![:=]))[ \t]*"
    r"(?:[rbfu]{0,2}\"(?P<dq>(?:[^\"\\\n]|\\.)*)\"|[rbfu]{0,2}'(?P<sq>(?:[^'\\\n]|\\.)*)'"
    r"|\\{1,4}\"(?P<edq>[^\"\\\n]*)\\{1,4}\"|`(?P<bq>[^`\n]*)`|(?P<bare>[^\s\"'`,;]+))"
)
# After "key:" a bare value must end its line: "password: hunter2" is config,
# "Password: enter it below" is prose.
_LINE_REST = re.compile(r"[ \t]*(?:[,;#`]|\r?\n|$)")
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_PATH = re.compile(r"(?:~|\.{1,2})?/|[A-Za-z]:\\")


def names_something(name: str) -> bool:
    """A name made of words, and not one word plus digits (``Password2024``): the classic
    made-up password."""
    lone_word = re.fullmatch(r"[A-Za-z]+\d+", name) is not None
    return reads_like_words(name) and not lone_word


def _is_code(value: str) -> bool:
    """An unquoted value that names something instead of spelling it out.

    ``get_token()``, ``os.environ["X"]``, ``self.token``, ``api_key=api_key`` are code;
    ``hunter2secret`` is not, although it ends in a key word, and neither is
    ``TokenA8f7Gh2kLmQ9`` (see ``reads_like_words``).
    """
    if any(c in value for c in "()[]{}"):
        return True
    if _DOTTED_NAME.fullmatch(value) is not None:
        return all(names_something(part) for part in value.split("."))
    return value.isidentifier() and _KEY_PART.search(value) is not None and names_something(value)


# What may close a quoted "key: value" or an emphasised **key: value** right after the value.
_CLOSERS = "*_~\\"


def _closed_value(match: re.Match[str]) -> str | None:
    """The value of a bare ``key: value`` that a quote or emphasis closes, if it looks made up.

    Why: ``"token: 4f8a…"`` (a YAML or JSON string, a Markdown quote) and ``**token: 4f8a…**``
    do not end their line, so the prose guard of ``key:`` kept them (issue 11). Closed that
    way, the value is taken when it is 8+ characters mixing letters and digits, which
    ``"token: expired"`` and ``"Password: see below"`` are not.
    """
    value = match["bare"]
    core = value.rstrip(_CLOSERS)
    end = match.start("bare") + len(core)
    after = match.string[end : end + 1]
    if core == value and (not after or after not in "\"'"):
        return None
    made_up = any(c.isdigit() for c in core) and any(c.isalpha() for c in core)
    if len(core) < 8 or not made_up or is_placeholder(core) or _is_code(core):
        return None
    return core


_IDENTIFIER_TAIL = re.compile(r"[\w.-]*\Z")


def _spells_its_key(match: re.Match[str], value: str) -> bool:
    """An enum or a constant whose value is its own name: ``COOKIE = "cookie"``,
    ``OTP_CREDENTIALS = "otpCredentials"`` (issue 20 widened the key names)."""
    head = _IDENTIFIER_TAIL.search(match.string, max(0, match.start() - 80), match.start())
    name = (head.group(0) if head else "") + match["key"]
    letters = re.sub(r"[^a-z0-9]", "", value.lower())
    return letters == re.sub(r"[^a-z0-9]", "", name.lower().rpartition(".")[2])


def _redact_assignment(match: re.Match[str]) -> tuple[str, str] | None:
    # The value groups close last, so lastgroup names the one that matched (dq, sq, edq, bq,
    # bare).
    group = match.lastgroup or "bare"
    value = match[group]
    if is_placeholder(value) or _PATH.match(value) or _spells_its_key(match, value):
        return None
    kind = word_kind(match["key"])
    if group == "bare":
        if _is_code(value):
            return None
        if match["sep"] == ":" and not _LINE_REST.match(match.string, match.end()):
            core = _closed_value(match)
            if core is None:
                return None
            text, start = match.string, match.start("bare")
            after = text[start + len(core) : match.end()]
            return kind, text[match.start() : start] + marker(kind) + after
    return replace_group(match, group, kind)


ASSIGNMENT_RULE = Rule(_ASSIGN, _redact_assignment)
# Its matches lie within a line (no part of the pattern crosses a newline) and start with
# a key word, so only the lines holding a key word's needle are searched.
ASSIGNMENT = LineGated(KEY_WORD_NEEDLES, ASSIGNMENT_RULE)

# kubeconfig client-key-data / client-certificate-data: base64 of a key and its certificate.
_KUBECONFIG = re.compile(
    r"client-(?P<which>key|certificate)-data[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?P<value>[A-Za-z0-9+/=]{16,})"
)
KUBECONFIG = Rule(
    _KUBECONFIG,
    lambda m: replace_group(
        m, "value", "private_key" if m["which"] == "key" else "client_certificate"
    ),
)

# --- passwords in prose ------------------------------------------------------------------------
# "the password is hunter2secret", "password for the db: S3cret!", "pwd is …". A prose value
# must look made up (a digit or a symbol, 6+ characters) unless it is quoted: "the password is
# stored hashed" and "Password: enter it below" stay.
# A quoted value may hold spaces ('the passphrase was "correct horse battery staple"'). With
# no "is" or ":" at all ("root passwd Hk8sLq2Mz9Xw") the value must look generated: 8+
# characters mixing upper, lower and a digit.
_PROSE_PASSWORD = re.compile(
    r"[Pp](?<![A-Za-z0-9_][Pp])(?i:ass(?:w(?:or)?d|phrase|code)|wd)s?"
    r"(?:[ \t]+(?i:for|of|to|on)(?:[ \t]+[\w.@/-]{1,40}){1,4}?)?"
    r"(?:(?:[ \t]+(?i:is|was)(?:[ \t]*:)?[ \t]+|[ \t]*:[ \t]*)"
    r"(?:(?P<q>[\"'`])(?P<quoted>[^\"'`\n]{1,200})(?P=q)|(?P<bare>[^\s\"'`]{1,200}))"
    r"|[ \t]+(?P<loose>[^\s\"'`]{8,200}))"
)
_TRAILING = ".,;:!?)]}"
# A loose value is one word of password characters: not markup (&#x3C;<span>), not a call.
_LOOSE_VALUE = re.compile(r"[\w!@#$%^&*+=.~/-]+")


def _redact_prose_password(match: re.Match[str]) -> tuple[str, str] | None:
    group = "quoted" if match["quoted"] else "loose" if match["loose"] else "bare"
    value = match[group]
    if group != "quoted":
        value = value.rstrip(_TRAILING)
        if group == "loose":
            made_up = looks_random(value) and _LOOSE_VALUE.fullmatch(value) is not None
        else:
            made_up = any(not c.isalpha() for c in value)
        if len(value) < 6 or not made_up or _PATH.match(value) or _is_code(value):
            return None
    if is_placeholder(value):
        return None
    start = match.start(group)
    text = match.string
    replacement = marker("password") + text[start + len(value) : match.end()]
    return "password", text[match.start() : start] + replacement


PROSE_PASSWORD_RULE = Rule(_PROSE_PASSWORD, _redact_prose_password)
PROSE_PASSWORD = Gated(("pass", "pwd"), PROSE_PASSWORD_RULE, lower=True)

# --- CSV columns named like a secret -----------------------------------------------------------
# A header line of 2+ short labels, one of them ending in a key word (Password, Secret access
# key, api_token); each following row with as many cells has that cell redacted, down to the
# first line without the delimiter. A ragged row (an unquoted comma in a name, a missing cell)
# is not the end of the table: stopping there once left every row below it (issue 11); its
# cell is looked for from both ends. A cell with a space in it is prose, not a credential.
_CSV_LINE = (
    r"(?:\"?[A-Za-z][\w .()/-]{0,40}\"?[,\t]){1,40}\"?[A-Za-z][\w .()/-]{0,40}\"?\r?(?=\n|$)"
)
_CSV_FIRST = re.compile(_CSV_LINE)
# Starts at a literal newline, which ``re`` skips to in C; the first line is tried apart.
_CSV_HEADER = re.compile(rf"\n(?P<line>{_CSV_LINE})")
_CELL_VALUE = r'(?:"(?P<quoted>(?:[^"\n]|"")*)"|(?P<bare>[^,\t"\r\n]*))'
# Padding around a cell: blanks, but in TSV not the tab that delimits it (issue 11: padding
# that ate the tab made every TSV row look like one cell).
_CELL = {
    ",": re.compile(rf"[ \t]*{_CELL_VALUE}[ \t]*"),
    "\t": re.compile(rf" *{_CELL_VALUE} *"),
}


def _column_kind(name: str) -> str | None:
    """The kind a header cell names when it ends in a key word ("Secret access key")."""
    key = re.sub(r"[\s.()/-]+", "_", name.strip())
    match = _KEY_NAME.search(key)
    return None if match is None else word_kind(match.group(0))


_KEY_NAME = re.compile(r"(?:^|(?<=_))" + KEY_WORD + "$")


def _cells(text: str, start: int, end: int, delimiter: str) -> list[tuple[int, int]]:
    """Spans of the cell values on text[start:end] (inside quotes for a quoted cell)."""
    spans, pos = [], start
    while True:
        cell = _CELL[delimiter].match(text, pos, end)
        if cell is None:
            return []
        group = "quoted" if cell["quoted"] is not None else "bare"
        spans.append(cell.span(group))
        pos = cell.end()
        if pos >= end or text[pos] == "\r":
            return spans
        if text[pos] != delimiter:
            return []
        pos += 1


@dataclass(frozen=True, slots=True)
class _Table:
    """A header line naming a secret column: where it ends, its delimiter and its columns."""

    end: int
    delimiter: str
    width: int
    secret: dict[int, str]  # column index → kind


def _tables(text: str) -> dict[int, _Table]:
    """The header lines of ``text`` that name a secret column, by where they start."""
    first = _CSV_FIRST.match(text)
    spans = [first.span()] if first else []
    spans += [m.span("line") for m in _CSV_HEADER.finditer(text)]
    tables = {}
    for start, end in spans:
        delimiter = "\t" if "\t" in text[start:end] else ","
        names = [text[a:b].strip() for a, b in _cells(text, start, end, delimiter)]
        secret = {i: kind for i, name in enumerate(names) if (kind := _column_kind(name))}
        if secret:
            tables[start] = _Table(end, delimiter, len(names), secret)
    return tables


def redact_csv_columns(text: str, kinds: list[str]) -> str:
    """Values in CSV/TSV columns whose header names a secret (see above).

    A table's rows end at the next header that names a secret, which starts a table of its
    own, so each line is read once: ``user,password`` repeated 4,000 times took 27 s when
    every header read every row below it (issue 11).
    """
    edits: list[tuple[int, int, str]] = []
    tables = _tables(text)
    for table in tables.values():
        row_end = table.end
        while row_end < len(text):
            start, row_end = line_span(text, row_end + 1)
            if start in tables or table.delimiter not in text[start:row_end]:
                break  # the next table, a blank line or prose: this table ended
            cells = _cells(text, start, row_end, table.delimiter)
            for i, kind in table.secret.items():
                for a, b in _secret_cells(text, cells, i, table.width):
                    edits.append((a, b, marker(kind)))
                    kinds.append(kind)
    return splice(text, edits) if edits else text


def _secret_cells(
    text: str, cells: list[tuple[int, int]], column: int, width: int
) -> list[tuple[int, int]]:
    """The spans of column ``column``'s value in a row of ``cells`` under a header of ``width``.

    A ragged row (an unquoted comma in a name, a cell missing or added) has its column
    counted from the left and from the right, and a candidate is taken only when it looks
    generated (upper, lower and a digit): a word there may belong to another column.
    """
    ragged = len(cells) != width
    candidates = {column, column + len(cells) - width} if ragged else {column}
    spans = []
    for at in sorted(candidates):
        if not 0 <= at < len(cells):
            continue
        a, b = cells[at]
        value = text[a:b]
        if is_placeholder(value) or any(c.isspace() for c in value):
            continue
        if not ragged or (len(value) >= 8 and looks_random(value)):
            spans.append((a, b))
    return spans


def open_table(text: str) -> int | None:
    """Where the header line of a secret-naming table starts when the table's rows may
    go on past the end of ``text`` (every line after the header is one of its rows), so
    text that follows is redacted under that header (``redact.stream``); else None.

    Only the last such header can be open: a table ends at the next one."""
    tables = _tables(text)
    if not tables:
        return None
    start = max(tables)
    table = tables[start]
    row_end = table.end
    while row_end < len(text):
        line_start, row_end = line_span(text, row_end + 1)
        if line_start == len(text):
            break  # text ends with the newline after a row: the next line is unseen
        if table.delimiter not in text[line_start:row_end]:
            return None
    return start


# --- HTML: a value attribute named by another attribute ---------------------------------------
# <meta name="api-key" content="…">, <input type="password" value="…">: the name and the
# value sit in two attributes of one tag, so no key=value rule sees them together (issue 20).
# Named by a secret name (``KEY_WORD`` ending it), the value goes; named by a key-like word
# only (``name="session"``), it goes when it looks generated.
_TAG = re.compile(r"<[A-Za-z][^<>]{0,2000}>")
_ATTRIBUTE = re.compile(r"""([\w:.-]+)[ \t\r\n]*=[ \t\r\n]*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
_NAMING = frozenset({"name", "id", "type", "property", "itemprop", "key", "http-equiv", "for"})
_VALUED = frozenset({"content", "value"})
_SECRET_NAME = re.compile(rf"{KEY_WORD}s?$")


def redact_html_named_values(text: str, kinds: list[str]) -> str:
    """``content`` / ``value`` attributes of a tag whose name attribute names a secret."""
    from kb_mcp.redact.generic import looks_generated
    from kb_mcp.redact.keywords import key_like

    edits = []
    for tag in _TAG.finditer(text):
        attributes = list(_ATTRIBUTE.finditer(tag.group(0)))
        names = [a[2] or a[3] or a[4] or "" for a in attributes if a[1].lower() in _NAMING]
        strong = next((n for n in names if _SECRET_NAME.search(n)), None)
        if strong is None and not any(key_like(n) for n in names):
            continue
        for attribute in attributes:
            group = next((g for g in (2, 3, 4) if attribute[g] is not None), 4)
            value = attribute[group] or ""
            if attribute[1].lower() not in _VALUED or is_placeholder(value):
                continue
            if strong is None and not looks_generated(value):
                continue
            kind = word_kind(strong) if strong else "secret"
            start, end = attribute.span(group)
            edits.append((tag.start() + start, tag.start() + end, marker(kind)))
            kinds.append(kind)
    return splice(text, edits) if edits else text


HTML_NAMED_VALUES = Gated(("content", "value"), redact_html_named_values, lower=True)


# --- Cookie headers --------------------------------------------------------------------------
# ``Cookie: a=1; sessionid=…; csrftoken=…`` sends every cookie's value: each goes (names
# stay). ``Set-Cookie: sid=…; Path=/; HttpOnly`` sets one: its first pair's value goes, the
# attributes stay.
_COOKIE_HEADER = re.compile(
    r"[Cc](?<![\w][Cc])(?i:ookie)[\"']?[ \t]*:[ \t]*(?P<pairs>[^\n\"'`]{1,4000})"
)
_COOKIE_PAIR = re.compile(r"(?:^|;)[ \t]*[^=;\s]{1,200}=(?P<value>[^;\s]{1,4000})")


def redact_cookie_headers(text: str, kinds: list[str]) -> str:
    """Cookie values in ``Cookie:`` and ``Set-Cookie:`` headers (see above)."""
    edits = []
    for header in _COOKIE_HEADER.finditer(text):
        setting = text[max(0, header.start() - 4) : header.start()].lower() == "set-"
        start = header.start("pairs")
        for pair in _COOKIE_PAIR.finditer(header["pairs"]):
            value = pair["value"]
            if not is_placeholder(value):
                edits.append(
                    (
                        start + pair.start("value"),
                        start + pair.end("value"),
                        marker("session_cookie"),
                    )
                )
                kinds.append("session_cookie")
            if setting:
                break
    return splice(text, edits) if edits else text


COOKIE_HEADERS = Gated(("ookie",), redact_cookie_headers, lower=True)
