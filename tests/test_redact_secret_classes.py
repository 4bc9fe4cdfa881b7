"""Whole classes of secrets the third adversarial run got through (issue 20, item 2).

Each class is pinned here in several spellings, not the run's own examples (the run is
repeated with new values): key words of other languages and fullwidth separators, a
secret column of a Markdown pipe table, a value on the line after its key, key names past
the old list, base64 blobs holding a secret, a token split over lines, HTML attributes, a
provider token after a joiner, and the generic generated-value rule. Then the look-alikes
that must stay, line structure, streaming, and a library stored under the previous rules.
``tests/test_secrets_corpus.py`` runs the same classes through every source and place.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_redact_in_context import _stored_secrets

from kb_mcp.chunk import split_document
from kb_mcp.ingest import reredact
from kb_mcp.ingest.pipeline import store_document, text_hash
from kb_mcp.library import Library
from kb_mcp.redact import redact
from kb_mcp.redact.generic import looks_generated
from kb_mcp.redact.stream import redact_pieces
from kb_mcp.redact.version import RULES_VERSION
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store import meta

PEM = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7Vb3Kx9\n"
    "-----END PRIVATE KEY-----\n"
)
PEM_B64 = base64.b64encode(PEM.encode()).decode()
DOCKERCONFIG = base64.b64encode(
    json.dumps({"auths": {"reg.example.io": {"auth": "ZGVwbG95OlR6OHFXMm1LNHhMOQ=="}}}).encode()
).decode()


def _clean(text: str, *secrets: str) -> str:
    """The redacted text, checked to hold none of ``secrets``, as many lines as ``text``
    and to be a fixed point."""
    out = redact(text).text
    assert [s for s in secrets if s in out] == [], out
    assert out.count("\n") == text.count("\n")
    assert redact(out).text == out
    return out


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("生产库口令：Vq3tL8zWm2", "Vq3tL8zWm2"),
        ("密碼: Jd7kQ2xPz9", "Jd7kQ2xPz9"),
        ("管理员密码是 Rr4mX8qLw2，不要外传", "Rr4mX8qLw2"),
        ("本番のパスワード：「Lk2pZ9xQw7」", "Lk2pZ9xQw7"),
        ("パスワードは Lk2pZ9xQw7 です", "Lk2pZ9xQw7"),
        ("Das Passwort lautet: Mz8kWq3Lp5", "Mz8kWq3Lp5"),
        ("Kennwort = Mz8kWq3Lp5", "Mz8kWq3Lp5"),
        ("Пароль от сервера: Tz5nQw8Lk2", "Tz5nQw8Lk2"),
        ("관리자 비밀번호: Hx7mQ2zLp4", "Hx7mQ2zLp4"),
        ("La contraseña es «Pq9zLm2Xw4»", "Pq9zLm2Xw4"),
        ("clave: Pq9zLm2Xw4", "Pq9zLm2Xw4"),
        ("Le mot de passe : Fz4kQw9Lm2", "Fz4kQw9Lm2"),
        ("A senha é Sn8pQz2Lw5", "Sn8pQz2Lw5"),
        ("Het wachtwoord is Wq2zLp8Xm4", "Wq2zLp8Xm4"),
        ("api_key：Ak9zQw2Lm8Xp4Rt", "Ak9zQw2Lm8Xp4Rt"),  # fullwidth colon
        ("ＤＢ＿ＰＡＳＳＷＯＲＤ＝Ｎｆ７ｋＱｗ２Ｌｍ", "Ｎｆ７ｋＱｗ２Ｌｍ"),  # all fullwidth
        ("password\u3000=\u3000Id9qWz2Lm5", "Id9qWz2Lm5"),  # ideographic spaces
        ("API密钥：Qx7mZ2Lk9W", "Qx7mZ2Lk9W"),  # a secret word, a made-up value
        ("部署令牌为 Lm7Zq2Wx9K", "Lm7Zq2Wx9K"),
        ("서버 비번: Kp3zXq8Wm1", "Kp3zXq8Wm1"),
        ("mdp : Fz4kQw9Lm2", "Fz4kQw9Lm2"),
    ],
)
def test_redact_password_words_of_other_languages_and_nfkc_forms(text: str, secret: str) -> None:
    """issue 20 (secrets: key words in Chinese, Japanese, German, Russian, Korean, Spanish,
    French and more; fullwidth separators): the value goes, the key word stays."""
    out = _clean(text, secret)
    assert "[REDACTED:" in out


@pytest.mark.parametrize(
    "text",
    [
        "密码：请联系管理员获取",  # "ask the admin", no value
        "Passwort: bitte beim Admin erfragen",
        "Le mot de passe est trop court.",
        "La clave es importante para el acceso",
        "パスワードは8文字以上にしてください",
        "Пароль: смотрите в хранилище",
        "全角のコロン：これは普通の文です",
    ],
)
def test_redact_password_words_of_other_languages_in_prose_stay(text: str) -> None:
    """issue 20 (false-positive guard): the words alone, in sentences, are no secret."""
    assert redact(text).text == text


def test_redact_pipe_table_secret_column_every_row() -> None:
    """issue 20 (secrets: a password column in a Markdown pipe table, as every DOCX table
    becomes): each cell of the column, not the user names; a key-like column loses only
    its generated cells."""
    text = (
        "| Host | User | Password | Key |\n"
        "|:-----|------|:--------:|-----|\n"
        "| db1 | alice | Tq8mZ2xL9w | primary |\n"
        "| db2 | bob | hunter2 | `Zx9kQ2mL8pW4nR7tY3` |\n"
        "| db3 | carol | **** | none |\n"
        "\nAfter the table | a pipe in prose.\n"
    )
    out = _clean(text, "Tq8mZ2xL9w", "hunter2", "Zx9kQ2mL8pW4nR7tY3")
    assert out.splitlines()[2:5] == [
        "| db1 | alice | [REDACTED:password] | primary |",
        "| db2 | bob | [REDACTED:password] | `[REDACTED:secret]` |",
        "| db3 | carol | **** | none |",
    ]
    assert out.splitlines()[-1] == "After the table | a pipe in prose."


@pytest.mark.parametrize(
    "header",
    [
        "| API token | Owner |",
        "Secret access key | Owner",
        "| 密码 | 用户 |",
        "| **Password** (prod) | Owner |",
        "| Passwort: | Owner |",
    ],
)
def test_redact_pipe_table_headers_in_other_spellings(header: str) -> None:
    """issue 20: headers without outer pipes, several words, another language."""
    text = f"{header}\n|---|---|\n| Qm7zXw2Lp9Rt4 | ops |\n"
    out = _clean(text, "Qm7zXw2Lp9Rt4")
    assert "ops" in out


@pytest.mark.parametrize(
    ("text", "secrets"),
    [
        ("db:\n  password: |\n    Yb4nQz7Lm2Xw\n    second-line-9Qz\n  host: x\n",
         ("Yb4nQz7Lm2Xw", "second-line-9Qz")),
        ("api_token: >-\n  Yb4nQz7Lm2XwPq8\nnext: 1\n", ("Yb4nQz7Lm2XwPq8",)),
        ("credentials:\n  - Cr3dZx8mQ2Lk\n  - 'Cr3dYw7nP4Mj'\nother: x\n",
         ("Cr3dZx8mQ2Lk", "Cr3dYw7nP4Mj")),
        ('{"credentials": ["Cr3dZx8mQ2Lk", "Cr3dYw7nP4Mj"]}', ("Cr3dZx8mQ2Lk", "Cr3dYw7nP4Mj")),
        ('"credentials": [\n  "Cr3dZx8mQ2Lk",\n  "Cr3dYw7nP4Mj"\n],\n"x": 1\n',
         ("Cr3dZx8mQ2Lk", "Cr3dYw7nP4Mj")),
        ("export DB_PASSWORD=$(cat <<'EOF'\nHd8rQz2mXk4w\nEOF\n)\n", ("Hd8rQz2mXk4w",)),
        ("kubectl create secret generic db --from-file=pw=/dev/stdin <<EOF\nHd8rQz2mXk4w\nEOF\n",
         ("Hd8rQz2mXk4w",)),
        ("For the staging box the password is\n  Pw7xQz2mLk9 and the user is ops.\n",
         ("Pw7xQz2mLk9",)),
        ("The root password:\nPw7xQz2mLk9\n", ("Pw7xQz2mLk9",)),
        ("数据库密码：\nQx7mZ2Lk9Wp\n", ("Qx7mZ2Lk9Wp",)),
        ("The admin password is:\n\n```\nHq8Zm2Lx7Wp\n```\n", ("Hq8Zm2Lx7Wp",)),
        ("Passwort:\n\n    Hq8Zm2Lx7Wp\n", ("Hq8Zm2Lx7Wp",)),
    ],
)  # fmt: skip
def test_redact_value_on_the_lines_after_its_key(text: str, secrets: tuple[str, ...]) -> None:
    """issue 20 (secrets: YAML block scalars, heredocs, prose that wraps the value, a
    credentials list): every line of the value, the lines around untouched."""
    _clean(text, *secrets)


@pytest.mark.parametrize(
    "text",
    [
        "description: |\n  Set the password in the vault, never in this file.\n",
        "except InvalidToken:\n    pass\n",
        "if t[0] == token:\n    continue\n",
        'tokens = {\n    "root": [\n        (r"\\s+", Whitespace),\n    ]\n}\n',
        '"_git_credential": [\n    "list_credential_helpers",\n    "set_git_credential",\n],\n',
        "cat <<EOF\nhello world\nEOF\n",
        'msg = ("a long message "\n       "continued here")\n',
        "The password is\nstored hashed and salted.\n",
    ],
)
def test_redact_next_line_look_alikes_stay(text: str) -> None:
    """issue 20 (false-positive guard, found on public package sources): code statements
    ending in a key word, lexer tables, lists of names, heredocs without a key word."""
    assert redact(text).text == text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("secret_key_base: 8f7a6c5d4e3b2a1908f7a6c5d4e3b2a19", "8f7a6c5d4e3b2a1908f7a6c5d4e3b2a19"),
        ("ENCRYPTION_KEY=Zk8wQ2mX9pLr4Tn", "Zk8wQ2mX9pLr4Tn"),
        ("jwtSigningKey: 'Zk8wQ2mX9pLr4Tn'", "Zk8wQ2mX9pLr4Tn"),
        ("MASTER_KEY = hunter2-longer", "hunter2-longer"),
        ("db_pw = 'Pq7zXm2Lk'", "Pq7zXm2Lk"),
        ("pw: Pq7zXm2Lk", "Pq7zXm2Lk"),
        ("smtp.passwd=Pq7zXm2Lk", "Pq7zXm2Lk"),
        ("PWD='Pq7zXm2Lk'", "Pq7zXm2Lk"),
        ("Cookie: theme=dark; sessionid=Sx8kQz2mLp4Wn7Rt", "Sx8kQz2mLp4Wn7Rt"),
        ("Cookie: sid=abc123; csrf=short9", "short9"),
        ('curl -H "Cookie: session=plainword"', "plainword"),
        ("Set-Cookie: sid=Sx8kQz2mLp4Wn7Rt; Path=/; HttpOnly", "Sx8kQz2mLp4Wn7Rt"),
        ("session_cookie = 's%3AQz8kLm2Wp4Xn7Rt'", "Qz8kLm2Wp4Xn7Rt"),
    ],
)
def test_redact_key_names_by_grammar_not_list(text: str, secret: str) -> None:
    """issue 20 (secrets: ``*_key_base``, ``encryption_key``, ``signing_key``, ``pw`` /
    ``db_pw``, ``Cookie:`` values)."""
    _clean(text, secret)


@pytest.mark.parametrize(
    "text",
    [
        "cache_key = compute_key(request)",
        "primary_key = 'id'",
        "COOKIE = 'cookie'",
        "bypass: true",
        "npw = 3",
        'fetch(url, {credentials: "include"})',
        "password_min_length = 12",
        "max_tokens = 4096",
    ],
)
def test_redact_key_name_look_alikes_stay(text: str) -> None:
    """issue 20 (false-positive guard for the key-name grammar)."""
    assert redact(text).text == text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"tls.key: {PEM_B64}", PEM_B64[30:70]),
        (f"  .dockerconfigjson: {DOCKERCONFIG}", DOCKERCONFIG[10:50]),
        (
            "data:\n  blob: |\n"
            + "".join(f"    {PEM_B64[i : i + 64]}\n" for i in range(0, len(PEM_B64), 64)),
            PEM_B64[64:128],
        ),
        ("".join(f"{PEM_B64[i : i + 76]}\n" for i in range(0, len(PEM_B64), 76)), PEM_B64[76:152]),
        (
            "cfg: cGFzc3dvcmQ9SHE4Wm0yTHg3",
            "cGFzc3dvcmQ9SHE4Wm0yTHg3",
        ),  # a short one: base64 of password=Hq8Zm2Lx7
    ],
)
def test_redact_base64_blob_that_decodes_to_a_secret(text: str, secret: str) -> None:
    """issue 20 (secrets: a base64-wrapped PEM key, a ``.dockerconfigjson``), on one line
    or wrapped over several."""
    _clean(text, secret)


def test_redact_base64_of_ordinary_text_or_binary_stays() -> None:
    """issue 20 (false-positive guard): a blob is redacted for what it holds."""
    prose = base64.b64encode(b"Just a harmless sentence about configuration files.").decode()
    binary = base64.b64encode(bytes(range(200))).decode()
    for text in (f"note: {prose}", f"img: {binary}"):
        assert redact(text).text == text


@pytest.mark.parametrize(
    ("text", "secrets"),
    [
        ('TOKEN = "ghp_Ab3dEf6hIj9kLm2" +\n    "nOp5qRs8tUv1wXy4zAb7cD"\n',
         ("ghp_Ab3dEf6hIj9kLm2", "nOp5qRs8tUv1wXy4zAb7cD")),
        ('key = ("sk_live_Ab3dEf6hIj"\n       "9kLm2nOp5qRs8")\n', ("Ab3dEf6hIj", "9kLm2nOp5qRs8")),
        ("export GH=ghp_Ab3dEf6hIj9kLm2\\\nnOp5qRs8tUv1wXy4zAb7cD\n",
         ("ghp_Ab3dEf6hIj9kLm2", "nOp5qRs8tUv1wXy4zAb7cD")),
        ("const t = 'xoxb-1234-5678' + 'Abc9Def8Ghi7';\n", ("1234-5678", "Abc9Def8Ghi7")),
        ('TOKEN = "ghp_Ab3dEf6hIj9kLm2" "nOp5qRs8tUv1wXy4zAb7cD"\n',
         ("ghp_Ab3dEf6hIj9kLm2", "nOp5qRs8tUv1wXy4zAb7cD")),
    ],
)  # fmt: skip
def test_redact_token_split_by_string_concatenation(text: str, secrets: tuple[str, ...]) -> None:
    """issue 20 (secrets: a token split across lines by concatenation, implicit Python
    concatenation, a backslash continuation): every piece becomes a marker."""
    _clean(text, *secrets)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('<meta name="api-key" content="Mt8kQz2mLp4Wn7RtXy">', "Mt8kQz2mLp4Wn7RtXy"),
        ('<meta content="Mt8kQz2mLp4Wn7RtXy" name="csrf-token">', "Mt8kQz2mLp4Wn7RtXy"),
        ('<img src="a.png" alt="password: Al7tQz2mXk">', "Al7tQz2mXk"),
        ('<div data-token="Dt5kQz2mLp4Wn7Rt">', "Dt5kQz2mLp4Wn7Rt"),
        ('<input type="password" name="pw" value="In9pQz2mXk">', "In9pQz2mXk"),
        ("<input type='hidden' name='session' value='Ss8kQz2mLp4Wn7RtXy'>", "Ss8kQz2mLp4Wn7RtXy"),
    ],
)
def test_redact_html_attributes(text: str, secret: str) -> None:
    """issue 20 (secrets: HTML attributes through add_document, where raw HTML is text)."""
    _clean(text, secret)


def test_redact_html_attributes_look_alikes_stay() -> None:
    """issue 20 (false-positive guard)."""
    text = (
        '<meta name="viewport" content="width=device-width">\n'
        '<input type="text" name="user" value="alice">\n'
        '<input type="hidden" name="session" value="1">\n'
    )
    assert redact(text).text == text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("token-ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAbCd", "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAbCd"),
        ("stripe-sk_live_Ab3dEf6hIj9kLm2nOp5q.md", "Ab3dEf6hIj9kLm2nOp5q"),
        ("KEY_glpat-Ab3dEf6hIj9kLm2nOp5q", "Ab3dEf6hIj9kLm2nOp5q"),
        ("path/npm_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAbCd", "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAbCd"),
        ("x=AKIAQ3K7ZL2M4RTW9XPD", "AKIAQ3K7ZL2M4RTW9XPD"),
    ],
)
def test_redact_provider_token_after_a_joiner(text: str, secret: str) -> None:
    """issue 20 (secrets: ``-`` once counted as part of a longer identifier, so
    ``token-ghp_…`` and a file named ``stripe-sk_live_….md`` kept the token)."""
    _clean(text, secret)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("hmacSalt := 9fK2mQ8xLw4ZpR7tV3nB", "9fK2mQ8xLw4ZpR7tV3nB"),
        ("X-Auth: Zq8kLm2Wp4Xn7RtY5vB1", "Zq8kLm2Wp4Xn7RtY5vB1"),
        ("session id => 6b1f0c2e-8a9d-4f3b-b7e5-2c4d6a8f0e1b", "6b1f0c2e-8a9d-4f3b"),
        ("部署令牌 Zq8kLm2Wp4Xn7RtY5vB1 不要外传", "Zq8kLm2Wp4Xn7RtY5vB1"),
        ("Der Schlüssel lautet Zq8kLm2Wp4Xn7RtY5vB1.", "Zq8kLm2Wp4Xn7RtY5vB1"),
    ],
)
def test_redact_generated_value_beside_a_key_like_word(text: str, secret: str) -> None:
    """issue 20 (the generic second line of defence): no rule knows these wordings, the
    value looks generated and a key-like word stands before it."""
    _clean(text, secret)


@pytest.mark.parametrize(
    "value",
    [
        "test_password_hashing_v2",
        "python3.11/site-packages",
        "2024-01-02T03:04:05.000Z",
        "aaaaaaaaaaaaaaaaaaaa1",
        "ConfigurationManager2024",
        "v1.2.3-beta.4+build.5",
    ],
)
def test_generated_value_test_refuses_names_versions_and_paths(value: str) -> None:
    """issue 20 (false-positive guard of the generic rule)."""
    assert not looks_generated(value)
    assert redact(f"api_key_hint {value}").text == f"api_key_hint {value}"


def test_redact_streamed_multi_line_classes_equal_the_whole_text() -> None:
    """issue 20: the multi-line classes (a pipe table, a block scalar, a heredoc, a
    concatenated token) give the same text when the file is redacted window by window."""
    filler = "".join(f"line {n} of ordinary prose.\n" for n in range(40))
    rows_ = "".join(f"| u{n} | Pw{n}x9Qz2Lm |\n" for n in range(30))
    body = "".join(f"Hd{n}rQz2mXk4w\n" for n in range(20))
    text = filler.join(
        [
            "| user | password |\n|---|---|\n" + rows_,
            "db:\n  password: |\n" + "".join(f"    Yb{n}nQz7Lm2Xw\n" for n in range(20)),
            "export DB_PASSWORD=$(cat <<EOF\n" + body + "EOF\n)\n",
            'TOKEN = "ghp_Ab3dEf6hIj9kLm2" +\n    "nOp5qRs8tUv1wXy4zAb7cD"\n',
            "",
        ]
    )
    whole = redact(text).text
    for window in (97, 211, 1024):
        pieces = [text[i : i + 50] for i in range(0, len(text), 50)]
        assert "".join(redact_pieces(pieces, window=window)) == whole
    assert not re.search(r"Pw\d+x9|Yb\d+nQz|Hd\d+rQz|nOp5qRs8", whole)


def test_reredact_cleans_the_secret_classes_stored_under_the_previous_rules(tmp_path: Path) -> None:
    """issue 20: a library whose text was stored under rules version 3 holds these values
    raw; at first use under version 4 they are gone from every table and FTS term."""
    home = tmp_path / "home"
    secrets = ("Tq8mZ2xL9w", "Vq3tL8zWm2", "Zk8wQ2mX9pLr4Tn")
    body = (
        "# Handover\n\n| user | password |\n|---|---|\n| alice | Tq8mZ2xL9w |\n\n"
        "生产库口令：Vq3tL8zWm2\n\nENCRYPTION_KEY=Zk8wQ2mX9pLr4Tn\n"
    )
    now = "2026-01-01T00:00:00+00:00"
    record = rows.NewDocument(
        doc_key="handover", title="Handover", uri=None, kind="markdown", language=None,
        text=body, content_hash=text_hash(body), doc_date=None, tags=(), created_at=now,
        updated_at=now,
    )  # fmt: skip
    with Library(Settings(home=home, embedder="none")) as lib:
        lib.fts.ensure_current()
        with lib.db.write() as conn:
            source_id = rows.ensure_source(conn, "uploads", "upload", now)
            meta.put(conn, reredact.VERSION_KEY, str(RULES_VERSION - 1))
        path = lib.db.paths.of("handover.md")
        store_document(lib.db, source_id, path, record, split_document(body, "markdown"),
                       seen_at=now)  # fmt: skip
    assert RULES_VERSION == 4
    with Library(Settings(home=home, embedder="none")) as lib:
        assert lib.redaction.ensure_current().changed == 1
        text = lib.lookup.read("handover").text
    assert [s for s in secrets if s in text] == []
    assert _stored_secrets(home, secrets) == []


def test_provider_token_in_a_file_name_is_out_of_titles_list_read_search_and_web(
    tmp_path: Path,
) -> None:
    """issue 20 (secrets: a file named ``stripe-sk_live_….md`` showed the key in its title,
    ``list``, ``read``, search hits and the web view, the hyphen hiding the token from the
    boundary rule; an uploaded file's name was its stored uri and its ``docs/`` file's
    ``source_uri``). A folder file's stored path is item 3's (``locations.path``) and not
    checked here."""
    from starlette.testclient import TestClient

    from kb_mcp.web.app import build_app
    from kb_mcp.web.guard import Policy

    stripe, github = "Fk3Zq8Lm2Wx6Kp9Rn4Yv", "Gk3Zq8Lm2Wx6Kp9Rn4Yv7Bs1Dt5Fg8Hj2KlMn"
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / f"stripe-sk_live_{stripe}.md").write_text("Payment settlement notes.\n")
    (folder / f"token-ghp_{github}.txt").write_text("Settlement runner notes.\n")
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    upload = uploads / f"invoice-sk_live_{stripe}.md"
    upload.write_text("Settlement upload notes.\n")
    home = tmp_path / "home"
    with Library(Settings(home=home, embedder="none")) as library:
        library.folders.add_folder(folder, "notes")
        [report] = library.folders.sync()
        assert report.added == 2, report.failures
        library.writing.import_file(upload)
        listing = library.catalog.list_source("notes")
        listing_uploads = library.catalog.list_source("uploads")
        docs = [d.doc for d in (*listing.documents, *listing_uploads.documents)]
        reads = [library.lookup.read(doc) for doc in docs]
        hits = library.lookup.search("settlement notes")
        titles = [row[0] for row in library.db.query("SELECT title FROM documents")]
        uris = [row[0] or "" for row in library.db.query("SELECT uri FROM documents")]
        with TestClient(build_app(library, Policy("127.0.0.1", None)),
                        base_url="http://127.0.0.1:8765") as client:  # fmt: skip
            pages = [client.get("/").text, client.get("/search?q=settlement").text]
            pages += [client.get(f"/doc/{doc}").text for doc in docs]
    outputs = {
        "titles": "\n".join(titles),
        "uris": "\n".join(uris),
        "docs/": "\n".join(p.name + p.read_text() for p in (home / "docs").glob("*.md")),
        "list": repr([_pathless(e) for e in (*listing.documents, *listing_uploads.documents)]),
        "read": repr([_pathless(result) for result in reads]),
        "search": repr([_pathless(hit) for hit in hits.hits]),
        "web": "\n".join(pages),
    }
    assert {
        place: [s for s in (stripe, github) if s in text] for place, text in outputs.items()
    } == {place: [] for place in outputs}
    assert all("[REDACTED:" in title for title in titles), titles


def _pathless(result: Any) -> Any:
    """A result without its ``path`` field: stored paths are item 3's (``locations.path``)."""
    return dataclasses.replace(result, path="")
