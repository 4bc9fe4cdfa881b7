"""The done-when test of issue 7's secrets items: a seeded corpus, one file per secret kind.

Every kind of issue 7 item 5, plus a PEM key block, a ``token: <40 chars>`` note, a
``password =`` on a long line that the chunker splits, and issue 11's three values in quoted
or escaped context (``"token: <40 hex>"`` in quotes, a Docker ``\\"auth\\"`` inside a JSON
string, an AWS secret in a CSV row past ragged rows), is ingested through every source
(folder sync, upload, ``add_document`` over the real stdio server, a hand-edited
``docs/`` file picked up by ``kb-mcp reindex``; issue 11 added the last two). Then no
secret value may appear anywhere: in any table of ``kb.db`` (every text column, every FTS
vocabulary term, the raw bytes of the database and its WAL before and after a
checkpoint), in the texts handed to an embedder, in ``docs/``, in any tool output or
error over stdio (search, grep with literal and regex probes, read whole and line by
line, list), in the audit log, the server's stderr or the CLI's output. The failure
message lists each leaking kind with where it leaked.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest
from hash_embedder import HashEmbedder

from kb_mcp.chunk.pack import DEFAULT_BUDGET_CHARS
from kb_mcp.embed.base import EmbedKind
from kb_mcp.library import DB_FILE, Library
from kb_mcp.server.audit import AUDIT_FILE
from kb_mcp.settings import Settings

ISSUE20_PEM = (
    "-----BEGIN EC PRIVATE KEY-----\n"
    "MHcCAQEEIBq7Zr2Wm9Xp4Lt8Vn3Bc6Df1Gh5Jk0QeRsTuYwXazKoAoGCCqGSM49\n"
    "-----END EC PRIVATE KEY-----\n"
)
PEM_B64 = base64.b64encode(ISSUE20_PEM.encode()).decode()
DOCKERCONFIG = base64.b64encode(
    json.dumps({"auths": {"registry.acme.io": {"auth": "Y2k6S3o3UW0yTHA5V3g0"}}}).encode()
).decode()
PEM_BODY = [
    f"MIIEpQIBAAKCAQEAq{i:02d}Zr7Wm9Xp4Lt8Vn3Bc6Df1Gh5Jk0QeRsTuYwXazK2mP" for i in range(12)
]
LONG_FILLER = " ".join(["lorem"] * ((DEFAULT_BUDGET_CHARS - 20) // 6))

# kind → (file name, text, secret values). File names are ordinary ones: the policy must
# let them through, so redaction is what keeps the values out.
CORPUS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "aws_secret_in_csv": (
        "users.csv",
        "user,access_key_id,secret_access_key\n"
        "alice,AKIAQ3K7ZL2M4RTW9XPD,wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq9Lm2Wk4\n",
        ("AKIAQ3K7ZL2M4RTW9XPD", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq9Lm2Wk4"),
    ),
    "azure_account_key": (
        "storage.md",
        "Connection string:\n\nDefaultEndpointsProtocol=https;AccountName=acme;"
        "AccountKey=Zm9vYmFyYmF6cXV4Q2xvdWRTdG9yYWdlS2V5MTIzNDU2Nzg5MA9x8Kq2==;"
        "EndpointSuffix=core.windows.net\n",
        ("Zm9vYmFyYmF6cXV4Q2xvdWRTdG9yYWdlS2V5MTIzNDU2Nzg5MA9x8Kq2",),
    ),
    "azure_sas_sig": (
        "share.md",
        "Download it from https://acme.blob.core.windows.net/backups/db.bak?sv=2022-11-02"
        "&sp=r&se=2030-01-01T00:00:00Z&sig=Qm9vdDJTaWduYXR1cmU3eEtxOVpw%2BZ3hRc0xN%3D\n",
        ("Qm9vdDJTaWduYXR1cmU3eEtxOVpw",),
    ),
    "kubeconfig_client_key_data": (
        "cluster.yaml",
        "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    client-key-data: "
        "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVBN3E5\n",
        ("LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVBN3E5",),
    ),
    "docker_config_auth": (
        "registry.json",
        '{"auths": {"registry.acme.io": {"auth": "ZGVwbG95Omh1bnRlcjJYcTk5enBMdw=="}}}\n',
        ("ZGVwbG95Omh1bnRlcjJYcTk5enBMdw",),
    ),
    "curl_user_password": (
        "api.md",
        "Call it:\n\n    curl -u deploy:Vx7pQ2mZr9Lk https://api.acme.io/v1/jobs\n",
        ("Vx7pQ2mZr9Lk",),
    ),
    "mailgun_key": (
        "mail.md",
        "The Mailgun sending key is key-3a6f9c2d8e1b7a4c0f5e9d2b6a8c1e4f for acme.io.\n",
        ("3a6f9c2d8e1b7a4c0f5e9d2b6a8c1e4f",),
    ),
    "vault_token": (
        "vault.md",
        "Log in with hvs.CAESIKq7Zr2Wm9Xp4Lt8Vn3Bc6Df1Gh5Jk0QeRsTuYwXaz then run the job.\n",
        ("CAESIKq7Zr2Wm9Xp4Lt8Vn3Bc6Df1Gh5Jk0QeRsTuYwXaz",),
    ),
    "env_line_password": (
        "app.ini",
        "[db]\npassword=hunter2secret\nhost=db.acme.io\n",
        ("hunter2secret",),
    ),
    "password_in_prose": (
        "onboarding.md",
        "For the staging box, the password is Tr0ub4dor8Zq and the user is ops.\n",
        ("Tr0ub4dor8Zq",),
    ),
    "url_password_with_slash": (
        "backup.md",
        "Nightly backups go to s3://backup:wJalr/K7MDENG/bPxRfQz81@bucket/nightly here.\n",
        ("wJalr/K7MDENG/bPxRfQz81", "bPxRfQz81"),
    ),
    "pem_private_key": (
        "server-notes.md",
        "# Server\n\nThe deploy key:\n\n-----BEGIN RSA PRIVATE KEY-----\n"
        + "\n".join(PEM_BODY)
        + "\n-----END RSA PRIVATE KEY-----\n\nRotate it yearly.\n",
        tuple(PEM_BODY),
    ),
    "token_40_chars": (
        "ci.md",
        "# CI\n\ntoken: 4f8a1c9e2b7d6f3a0c5e8b1d4f7a2c9e6b3d0f8a\n",
        ("4f8a1c9e2b7d6f3a0c5e8b1d4f7a2c9e6b3d0f8a",),
    ),
    "long_line_password": (
        "settings.md",
        "# Settings\n\n"
        + f"{LONG_FILLER} db_password = Qz7Lm2Xp9Wk4Rt and more words follow here. " * 3
        + "\n",
        ("Qz7Lm2Xp9Wk4Rt",),
    ),
    # issue 11: the three the second adversarial pass found in quoted or escaped context
    "token_40_hex_quoted": (
        "release.yaml",
        'steps:\n  - note: "token: 99f640d63912307394588a644ff16e18eb3942f6"\n  - run: make\n',
        ("99f640d63912307394588a644ff16e18eb3942f6",),
    ),
    "docker_auth_escaped": (
        "deploy-job.json",
        '{"script": "echo \'{\\"auths\\": {\\"ghcr.io\\": {\\"auth\\": '
        '\\"Y2ktYm90OlJ0N3FaMm1YOWtMNHdQOHZOYzM=\\"}}}\' > ~/.docker/config.json"}\n',
        ("Y2ktYm90OlJ0N3FaMm1YOWtMNHdQOHZOYzM",),
    ),
    "aws_secret_far_from_header": (
        "iam-keys.csv",
        "user,access_key_id,created,aws_secret_access_key\n"
        "alice,AKIAQ3K7ZL2M4RTW9XPB,2024-01-02,eYbKYdMAvTtms/X6tz5V+AS3ddOFWfk1ELGXRFzh\n"
        "bob (ops),,2024-02-03\n"
        "carol, jr,,2024-03-04,rotated\n"
        "ci-bot,,2024-05-06,KHdbga7yHWLEwj7Pt776hrw9mXmOlT4BDg3d0SPF\n",
        ("eYbKYdMAvTtms/X6tz5V+AS3ddOFWfk1ELGXRFzh", "KHdbga7yHWLEwj7Pt776hrw9mXmOlT4BDg3d0SPF"),
    ),
    # issue 20: the classes the third adversarial run got through
    "password_chinese": (
        "部署说明.md",
        "# 部署\n\n生产数据库密码：Gq7Wz3Lp9Xk\n",
        ("Gq7Wz3Lp9Xk",),
    ),
    "password_japanese": (
        "本番環境.md",
        "本番サーバーのパスワードは「Nm4Xq8Zr2Lw」です。\n",
        ("Nm4Xq8Zr2Lw",),
    ),
    "password_german": (
        "zugang.md",
        "Das Kennwort für den Server lautet Kw5Zt9Qm3Xp.\n",
        ("Kw5Zt9Qm3Xp",),
    ),
    "password_russian": ("dostup.md", "Пароль от базы: Rv6Yq2Nz8Lm\n", ("Rv6Yq2Nz8Lm",)),
    "password_korean": ("접속정보.md", "관리자 비밀번호: Bx3Lq7Wz9Km\n", ("Bx3Lq7Wz9Km",)),
    "password_spanish": ("acceso.md", "contraseña: Es4Nq8Wz2Lx\n", ("Es4Nq8Wz2Lx",)),
    "password_french": ("acces.md", "Le mot de passe est Fm7Qz3Lw9Xr.\n", ("Fm7Qz3Lw9Xr",)),
    "fullwidth_separator": ("ci-token.md", "token＝Fw8Zq2Lm6Xp4Rt9Wk\n", ("Fw8Zq2Lm6Xp4Rt9Wk",)),
    "pipe_table_password": (
        "accounts.md",
        "| host | user | password |\n|---|---|---|\n| db1 | ann | Pt5Lq8Zw3Xm |\n"
        "| db2 | bob | Hunt3r-Cell |\n",
        ("Pt5Lq8Zw3Xm", "Hunt3r-Cell"),
    ),
    "yaml_block_scalar": (
        "values.yaml",
        "db:\n  password: |\n    Yk6Wq2Zm9Lp\n  port: 5432\n",
        ("Yk6Wq2Zm9Lp",),
    ),
    "heredoc": (
        "setup.sh",
        "export DB_PASSWORD=$(cat <<'EOF'\nHr2Zq8Lm5Wx\nEOF\n)\n",
        ("Hr2Zq8Lm5Wx",),
    ),
    "prose_wrapped": (
        "handover.md",
        "For the staging console the password is\n  Wr9Lq3Zm6Xp and the login is ops.\n",
        ("Wr9Lq3Zm6Xp",),
    ),
    "secret_key_base": (
        "rails-config.yml",
        "production:\n  secret_key_base: 5c8e1f3a9b2d7e4f6a0c8e1f3a9b2d7e4f6a0c8e\n",
        ("5c8e1f3a9b2d7e4f6a0c8e1f3a9b2d7e4f6a0c8e",),
    ),
    "signing_key": ("jwt-settings.ini", "JWT_SIGNING_KEY=Sg4Zq9Lm2Wx7Kp\n", ("Sg4Zq9Lm2Wx7Kp",)),
    "short_pw": ("db.ini", "[db]\ndb_pw = Dp8Zq3Lm6Wx\n", ("Dp8Zq3Lm6Wx",)),
    "cookie_header": (
        "request-example.md",
        "GET /api HTTP/1.1\nCookie: theme=dark; session=Ck7Zq2Lm9Wx4Pr8T\n",
        ("Ck7Zq2Lm9Wx4Pr8T",),
    ),
    "credentials_array": (
        "service.json",
        '{"credentials": ["Ca5Zq8Lm2Wx", "Cb6Zq9Lm3Wy"]}\n',
        ("Ca5Zq8Lm2Wx", "Cb6Zq9Lm3Wy"),
    ),
    "pem_in_base64": ("tls-manifest.yaml", f"data:\n  tls.key: {PEM_B64}\n", (PEM_B64[8:60],)),
    "dockerconfigjson": (
        "registry-manifest.yaml",
        f"data:\n  .dockerconfigjson: {DOCKERCONFIG}\n",
        (DOCKERCONFIG[8:60],),
    ),
    "token_concatenation": (
        "client.py",
        'TOKEN = (\n    "ghp_Tc4Zq8Lm2Wx6Kp9"\n    "Rn3Yv7Bs1Dt5Fg8Hj2KlM"\n)\n',
        ("Tc4Zq8Lm2Wx6Kp9", "Rn3Yv7Bs1Dt5Fg8Hj2KlM"),
    ),
    "html_attributes": (
        "page.md",
        '<meta name="api-key" content="Hm5Zq9Lm3Wx7Kp2R">\n'
        '<img src="x.png" alt="password: Ha8Zq2Lm6Wx">\n',
        ("Hm5Zq9Lm3Wx7Kp2R", "Ha8Zq2Lm6Wx"),
    ),
    "token_after_hyphen": (
        "deploy-notes.md",
        "Use token-ghp_Th3Zq7Lm1Wx5Kp9Rn2Yv6Bs0Dt4Fg8Hj2KlM in CI.\n",
        ("Th3Zq7Lm1Wx5Kp9Rn2Yv6Bs0Dt4Fg8Hj2KlM",),
    ),
    "generic_key_like": (
        "notes.md",
        "hmacSalt := Gs9Zq4Lm7Wx2Kp5Rn8Yv\n",
        ("Gs9Zq4Lm7Wx2Kp5Rn8Yv",),
    ),
}


# issue 20: the classes through the readers of uploads, each file with values of its own.
# A PDF's text is whatever its text layer holds (one line a line here); a DOCX table
# becomes a Markdown pipe table; an HTML page's attributes are dropped, its table kept.
BINARY_LINES = [
    "Deploy notes",
    "db_pw = Pd4Zq8Lm2Wx",
    "Das Passwort lautet Pd5Zq9Lm3Wy.",
    "Use token-ghp_Pd6Zq7Lm1Wx5Kp9Rn2Yv6Bs0Dt4Fg8Hj2KlM in CI.",
    "hmacSalt := Pd7Zq4Lm7Wx2Kp5Rn8Yv",
]
BINARY_SECRETS: dict[str, tuple[str, ...]] = {
    "pdf_upload": ("Pd4Zq8Lm2Wx", "Pd5Zq9Lm3Wy", "Pd6Zq7Lm1Wx5Kp9Rn2Yv6Bs0Dt4Fg8Hj2KlM",
                   "Pd7Zq4Lm7Wx2Kp5Rn8Yv"),
    "docx_upload": ("Dx4Zq8Lm2Wx", "Dx5Zq9Lm3Wy", "Dx6Zq7Lm1Wx5Kp9Rn2Yv6Bs0Dt4Fg8Hj2KlM",
                    "Dx7Zq4Lm7Wx2Kp5Rn8Yv", "Dt3Zq8Lm5Wx", "Dt4Zq9Lm6Wy", "Dz3Zq8Lm5Wx"),
    "html_upload": ("Ht4Zq8Lm2Wx", "Ht5Zq9Lm3Wy", "Ht6Zq7Lm1Wx5Kp9Rn2Yv6Bs0Dt4Fg8Hj2KlM",
                    "Ht7Zq4Lm7Wx2Kp5Rn8Yv", "Hb3Zq8Lm5Wx", "Hm5Zq9Lm3Wx7Kp2T", "Hv8Zq2Lm6Wx"),
}  # fmt: skip


def _lines_for(prefix: str) -> list[str]:
    return [line.replace("Pd", prefix) for line in BINARY_LINES]


def write_binary_uploads(folder: Path) -> list[Path]:
    """A PDF, a DOCX (paragraphs, a password table, 密码 in a paragraph) and an HTML page
    (a password table, a meta api-key, an img alt, a password input) holding
    ``BINARY_SECRETS``."""
    import docx
    import pymupdf

    pdf = pymupdf.open()
    page = pdf.new_page()
    for n, line in enumerate(_lines_for("Pd")):
        page.insert_text((72, 72 + 18 * n), line, fontsize=10)
    (folder / "deploy.pdf").write_bytes(pdf.tobytes())
    document = docx.Document()
    for line in _lines_for("Dx"):
        document.add_paragraph(line)
    document.add_paragraph("生产数据库密码：Dz3Zq8Lm5Wx")
    table = document.add_table(rows=3, cols=2)
    for row, cells in zip(table.rows, [("User", "Password"), ("ann", "Dt3Zq8Lm5Wx"),
                                       ("bob", "Dt4Zq9Lm6Wy")], strict=True):  # fmt: skip
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    document.save(folder / "deploy.docx")
    paragraphs = "".join(f"<p>{line}</p>\n" for line in _lines_for("Ht"))
    (folder / "deploy.html").write_text(
        '<html><head><title>Ops</title><meta name="api-key" content="Hm5Zq9Lm3Wx7Kp2T">'
        f"</head><body><main><h1>Ops</h1>\n{paragraphs}"
        "<table><tr><th>user</th><th>password</th></tr><tr><td>ann</td><td>Hb3Zq8Lm5Wx</td>"
        '</tr></table>\n<p><img src="a.png" alt="password: Hv8Zq2Lm6Wx"></p>\n'
        '<p><input type="password" value="Hv8Zq2Lm6Wx"></p></main></body></html>\n',
        encoding="utf-8",
    )
    return [folder / "deploy.pdf", folder / "deploy.docx", folder / "deploy.html"]


def text_of(result: Any) -> str:
    """Everything a tool result carries: its text blocks and its structured content."""
    blocks = "\n".join(getattr(block, "text", "") for block in result.content)
    return blocks + "\n" + json.dumps(result.structured_content)


def database_text(path: Path) -> tuple[str, set[str]]:
    """Every text value of every table of ``kb.db``, and the FTS vocabulary's terms."""
    conn = apsw.Connection(str(path))
    try:
        tables = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not r[0].startswith("sqlite_")
        ]
        values = []
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                values += [v if isinstance(v, str) else v.decode("utf-8", "replace") for v in row
                           if isinstance(v, str | bytes)]  # fmt: skip
        terms = {r[0] for r in conn.execute("SELECT term FROM chunks_fts_vocab")}
        return "\n".join(values), terms
    finally:
        conn.close()


def distinctive_terms(library: Library, secret: str) -> set[str]:
    """The FTS terms of a secret that no harmless text would produce (6+ characters)."""
    return {t for t in library.fts.tokens(secret) if len(t) >= 6}


async def tool_outputs(client: Any, docs: list[str]) -> list[str]:
    """What an agent can get out: list, search, grep (literal and regex probes), read."""
    outputs = []

    async def call(tool: str, **arguments: Any) -> None:
        output = text_of(await client.call_tool(tool, arguments, raise_on_error=False))
        # A result may echo the caller's own query or pattern: that is no leak.
        for value in arguments.values():
            if isinstance(value, str):
                for form in (repr(value), json.dumps(value), value):
                    output = output.replace(form, "<argument>")
        outputs.append(output)

    async def probe(secret: str) -> None:
        await call("search", query=secret)
        await call("grep", pattern=secret)
        await call("grep", pattern=re.escape(secret[:8]), regex=True)
        await call("grep", pattern="[:=] ?" + re.escape(secret[:3]), regex=True)

    await call("list")
    for source in ("corpus", "agent", "uploads"):
        await call("list", source=source)
    for kind, (_name, text, secrets) in CORPUS.items():
        words = " ".join(re.findall(r"[A-Za-z]{4,}", text)[:6])
        await call("search", query=words or kind)
        for secret in secrets:
            await probe(secret)
    for secrets in BINARY_SECRETS.values():
        for secret in secrets:
            await probe(secret)
    for doc in docs:
        result = await client.call_tool("read", {"doc": doc}, raise_on_error=False)
        outputs.append(text_of(result))
        lines = (result.structured_content or {}).get("total_lines", 0)
        for start in range(1, lines + 1, 2):
            await call("read", doc=f"{doc}#L{start}-L{min(start + 2, lines)}")
        await call("read", doc=doc, start_line=lines + 5)  # an error about this document
    for kind in CORPUS:  # errors that name stored things: a bad regex, an unknown source
        await call("grep", pattern="(" + kind, regex=True)
        await call("search", query=kind, source=f"{kind}-nope")
    return outputs


class RecordingEmbedder(HashEmbedder):
    """The hash embedder, keeping every text it is handed: what would leave for a provider."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        self.seen += texts
        return super().embed(texts, kind)


def hand_edited_file(kind: str, text: str) -> str:
    """A ``docs/`` file as a person would write one with an editor: frontmatter and text."""
    return f"---\nid: hand-{kind}\ntitle: {kind} by hand\nsource_uri: hand://{kind}\n---\n{text}"


def ingest_every_source(home: Path, tmp_path: Path, kb_cli) -> tuple[str, list[str]]:
    """The corpus through a folder sync, uploads and hand-edited ``docs/`` files (then a
    CLI ``reindex``), vectors built; the CLI's output and the texts sent to the embedder."""
    folder, uploads = tmp_path / "corpus", tmp_path / "uploads"
    folder.mkdir()
    uploads.mkdir()
    for name, text, _secrets in CORPUS.values():
        (folder / name).write_text(text, encoding="utf-8")
        # One line more than the folder copy, so dedup keeps it a document of its own.
        (uploads / name).write_text(text + "\nuploaded\n", encoding="utf-8")
    with Library(Settings(home=home, embedder="none")) as library:
        library.folders.add_folder(folder)
        [report] = library.folders.sync()
        assert report.added == len(CORPUS), report.failures
        for name, _text, _secrets in CORPUS.values():
            library.writing.import_file(uploads / name)
        binaries = tmp_path / "binaries"
        binaries.mkdir()
        for path in write_binary_uploads(binaries):
            library.writing.import_file(path)
    for kind, (_name, text, _secrets) in CORPUS.items():
        (home / "docs" / f"hand-{kind}.md").write_text(hand_edited_file(kind, text))
    reindexed = kb_cli("reindex")
    assert reindexed.returncode == 0, reindexed.stderr
    embedder = RecordingEmbedder()
    settings = Settings(home=home, embedder="test", embed_model="hash-64")
    with Library(settings, make_embedder=lambda _p, _m: embedder) as library:
        report = library.vectors.embed_pending()
        assert report is not None and report.error is None, report
    return reindexed.stdout + reindexed.stderr, embedder.seen


def database_bytes(home: Path) -> dict[str, str]:
    """The raw bytes of kb.db and its WAL as they are, then after a checkpoint."""
    found = {"db files (bytes)": _files_bytes(home)}
    conn = apsw.Connection(str(home / DB_FILE))
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    finally:
        conn.close()
    found["db files after checkpoint (bytes)"] = _files_bytes(home)
    return found


def _files_bytes(home: Path) -> str:
    return b"".join(p.read_bytes() for p in sorted(home.glob("kb.db*"))).decode("latin-1")


@pytest.mark.anyio
async def test_no_secret_of_any_kind_is_stored_indexed_or_returned(
    mcp_client, home: Path, tmp_path: Path, server_log: Path, kb_cli, figures
) -> None:
    """issue 7 items 1-5 (done when), widened by issue 11: every kind, through every source
    (folder sync, upload, add_document, a hand-edited ``docs/`` file), out of no path
    (tool results and errors, ``docs/``, audit log, server stderr, CLI output, the texts
    handed to an embedder, every text column of every table, FTS terms, the raw bytes of
    kb.db and its WAL before and after a checkpoint). Entity names join by themselves: the
    table scan reads every table ``sqlite_master`` lists.

    The user's own files are not checked: the folder, the hand-edited ``docs/hand-*.md``
    files and ``originals/`` (the uploaded bytes, kept as the user gave them) are theirs.
    """
    cli_output, embedded = ingest_every_source(home, tmp_path, kb_cli)
    async with mcp_client(allow_agent_writes=True) as client:
        for kind, (name, text, _secrets) in CORPUS.items():
            result = await client.call_tool(
                "add_document",
                {"title": f"{kind} note", "content": text, "source_uri": f"test://{name}"},
                raise_on_error=False,
            )
            assert not result.is_error, text_of(result)
        docs = []
        for source in ("corpus", "agent", "uploads"):
            listed = await client.call_tool("list", {"source": source, "limit": 200})
            docs += [d["doc"] for d in listed.structured_content["documents"]]
        assert len(docs) == 4 * len(CORPUS) + len(BINARY_SECRETS)
        outputs = await tool_outputs(client, docs)

    places: dict[str, str] = {
        "tool output": "\n".join(outputs),
        "docs/": "\n".join(
            p.read_text() for p in (home / "docs").glob("*.md") if not p.name.startswith("hand-")
        ),
        "audit log": (home / AUDIT_FILE).read_text(),
        "stderr": server_log.read_text() if server_log.exists() else "",
        "cli output": cli_output,
        "embedded text": "\n".join(embedded),
        **database_bytes(home),
    }
    places["kb.db tables"], vocab = database_text(home / DB_FILE)
    leaks: dict[str, list[str]] = {}
    every = {kind: secrets for kind, (_n, _t, secrets) in CORPUS.items()} | BINARY_SECRETS
    with Library(Settings(home=home, embedder="none")) as library:
        for kind, secrets in every.items():
            for secret in secrets:
                where = [place for place, text in places.items() if secret in text]
                if distinctive_terms(library, secret) & vocab:
                    where.append("FTS terms")
                found = leaks.setdefault(kind, [])
                found += [place for place in where if place not in found]
    leaks = {kind: where for kind, where in leaks.items() if where}
    assert leaks == {}, "\n".join(f"{kind}: {', '.join(where)}" for kind, where in leaks.items())
    values = sum(len(secrets) for secrets in every.values())
    figures(
        "secrets",
        f"{len(every)} kinds ({values} values) x 4 sources and PDF/DOCX/HTML uploads x "
        f"{len(places) + 1} places "
        f"({len(outputs)} tool outputs, {len(embedded)} embedded texts): 0 leaks",
    )
