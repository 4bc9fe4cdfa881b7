"""A PostgreSQL store's URL: checked once when the settings load, shown only without secrets.

A team library lives at ``postgresql://USER@HOST:PORT/DBNAME?sslmode=verify-full`` (or
``postgres://…``; several ``HOST:PORT`` pairs, a socket folder as ``?host=/run/postgresql``
and every libpq parameter work as libpq defines them). The password is best kept out of
it: libpq itself reads ``~/.pgpass`` (or the file ``$PGPASSFILE`` names, mode 0600) and
``$PGPASSWORD``, and kb-mcp reads credentials from nowhere else. TLS parameters
(``sslmode``, ``sslrootcert``, ``sslcert``, ``sslkey``, …) pass to libpq untouched.

Why a module of its own: the URL may carry a password (``user:secret@``) and other
secrets (``?password=``, ``?sslpassword=``, ``?oauth_client_secret=``), and every place
that prints, logs or reports a store must show it the same way. ``shown`` is that one
way; ``check`` makes sure a URL that reaches the rest of kb-mcp is one libpq reads as the
user meant (no ``@`` that libpq and a reader would split differently), and its errors
never quote the URL. No I/O (libpq, through psycopg, only parses; no connection is
made), so the settings, in the base layer, use it.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from kb_mcp.errors import InvalidInput, Unavailable

SCHEMES = ("postgresql://", "postgres://")
EXAMPLE = "postgresql://USER@HOST:5432/DBNAME?sslmode=verify-full"
CREDENTIALS_HINT = (
    "keep the password out of the URL: libpq reads it from ~/.pgpass (or $PGPASSFILE) "
    "or $PGPASSWORD"
)
INSTALL_HINT = "pip install 'kb-mcp[postgresql]'"
PARAMETERS_DOC = "https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS"
# A query parameter whose value is a credential. libpq marks its own with a display
# character ("*": password, sslpassword, oauth_client_secret; its debug-only SCRAM keys
# are credentials too); a name rule instead of that list also covers parameters a later
# libpq adds (tests/test_postgres_access.py checks the rule against libpq's list).
_SECRET_NAME = re.compile(r"password|secret|token|scram", re.IGNORECASE)
_PARAMETER_NAME = re.compile(r"[a-z_]{1,64}")  # what a libpq keyword looks like
_PORT = re.compile(r"[0-9]{1,5}")


def is_postgres(text: str) -> bool:
    """Whether ``text`` names a PostgreSQL store (by its scheme, any case)."""
    return text.strip().lower().startswith(SCHEMES)


def is_secret(parameter: str) -> bool:
    """Whether the query parameter ``parameter`` (decoded) holds a credential."""
    return bool(_SECRET_NAME.search(parameter))


def _split(url: str) -> tuple[str, str, str, str]:
    """(scheme with ``//``, netloc, path with its ``/``, query without ``?``), split where
    libpq splits: the netloc ends at the first ``/`` or ``?``."""
    scheme = next((s for s in SCHEMES if url.lower().startswith(s)), "")
    rest = url[len(scheme) :]
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    path, _, query = tail.partition("?")
    return scheme, netloc, path, query


def _parameters(query: str) -> list[tuple[str, str]]:
    """(decoded name, the part as written) of each ``name=value`` of a query."""
    found = []
    for part in query.split("&"):
        name, equals, _ = part.partition("=")
        if part:
            found.append((unquote(name) if equals else "", part))
    return found


def shown(url: str) -> str:
    """``url`` with every secret removed: the password of its user part and each query
    parameter holding a credential; user, hosts, ports, database, socket folder, TLS and
    every other parameter kept, so what is shown still connects (with the password from
    ``~/.pgpass`` or ``$PGPASSWORD``). Anything that is not a PostgreSQL URL shows as a
    placeholder: a mistyped store may be a password pasted into the wrong place.

    Everything that shows a store to a person, a log or an agent's config goes through
    here. It errs on the side of removing: in a user part with two ``@`` (which ``check``
    refuses), all but the user's name before the last one goes.
    """
    if not is_postgres(url):
        return "(not a PostgreSQL URL)"
    scheme, netloc, path, query = _split(url.strip())
    if "@" in netloc:
        userinfo, hosts = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hosts}" if user else hosts
    kept = [
        part
        for name, part in _parameters(query)
        if _PARAMETER_NAME.fullmatch(name) and not is_secret(name)
    ]
    return f"{scheme.lower()}{netloc}{path}" + (f"?{'&'.join(kept)}" if kept else "")


def has_secret(url: str) -> bool:
    """Whether ``url`` carries a credential of its own (what ``shown`` removes)."""
    _, netloc, _, query = _split(url.strip())
    userinfo = netloc.rsplit("@", 1)[0] if "@" in netloc else ""
    return bool(userinfo.partition(":")[2]) or any(is_secret(n) for n, _ in _parameters(query))


def check(url: str) -> str:
    """``url`` stripped of surrounding space, once it is a PostgreSQL URL libpq reads as
    written; else ``InvalidInput`` saying what is wrong without quoting the URL (it may
    hold a password). ``Unavailable`` when the PostgreSQL driver is not installed: no
    such store can be opened then, and the hint says what to install."""
    url = url.strip()
    if not is_postgres(url):
        scheme = url.split("://", 1)[0] if "://" in url else ""
        what = (
            f"a {scheme}:// URL"
            if re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]{0,20}", scheme)
            else ("not a URL")
        )
        raise InvalidInput(
            f"the store must be `sqlite` or a PostgreSQL URL (postgresql://…), not {what}",
            hint=f"e.g. {EXAMPLE}; {CREDENTIALS_HINT}",
        )
    if not url.startswith(SCHEMES):
        raise _invalid("its scheme in capitals", "libpq reads postgresql:// in lowercase only")
    scheme, netloc, path, query = _split(url)
    _check_netloc(netloc)
    if "@" in path:  # a password with a `/` in it, cut by libpq where the netloc ends
        raise _invalid("an `@` after its host", "percent-encode a / or @ in a password")
    known = _libpq_parameters()
    for name, _ in _parameters(query):
        if not name:
            raise _invalid("a query part without `=`", "write each parameter as name=value")
        if name not in known:
            shown_name = f" {name!r}" if _PARAMETER_NAME.fullmatch(name) else ""
            raise _invalid(
                f"an unknown connection parameter{shown_name}", f"libpq's are at {PARAMETERS_DOC}"
            )
    _libpq_reads(url)
    return url


def _check_netloc(netloc: str) -> None:
    if netloc.count("@") > 1:
        raise _invalid(
            "more than one `@` in its user part",
            "percent-encode an @ in the user name or password as %40",
        )
    hosts = netloc.rsplit("@", 1)[-1]
    if "[" in hosts:  # an IPv6 address: libpq checks its brackets and port
        return
    for host in hosts.split(","):
        _, colon, port = host.partition(":")
        if colon and not (_PORT.fullmatch(port) and 0 < int(port) < 65536):
            raise _invalid("a port that is not a number from 1 to 65535", f"e.g. {EXAMPLE}")


def _invalid(problem: str, hint: str) -> InvalidInput:
    return InvalidInput(f"the PostgreSQL store URL has {problem}", hint=hint)


def _driver():
    """psycopg, or ``Unavailable`` saying which extra brings it."""
    try:
        import psycopg
    except ImportError as exc:
        raise Unavailable(
            "a PostgreSQL store needs the PostgreSQL driver (psycopg), which is not installed",
            hint=INSTALL_HINT,
        ) from exc
    return psycopg


def _libpq_parameters() -> frozenset[str]:
    """The connection parameters this libpq knows (``PQconndefaults``)."""
    psycopg = _driver()
    return frozenset(option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults())


def _libpq_reads(url: str) -> None:
    """libpq's own parse of ``url`` (``PQconninfoParse``: no connection is made). Its
    message quotes the URL or parts of it in double quotes: each quoted part is dropped."""
    psycopg = _driver()
    try:
        psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error as exc:
        said = re.sub(r'"[^"]*"', "…", str(exc).strip().splitlines()[0] if str(exc) else "")
        raise InvalidInput(
            f"libpq cannot read the PostgreSQL store URL: {said}", hint=f"e.g. {EXAMPLE}"
        ) from None
