"""Provider tokens: secrets recognisable by their own shape, wherever they stand.

Formats come from each provider's documentation and, where marked ``gitleaks``, from
gitleaks' default rules (config/gitleaks.toml, MIT, github.com/gitleaks/gitleaks), narrowed
to the literal prefix so that the scan stays a skip from prefix to prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from kb_mcp.redact._rule import (
    Gated,
    Rule,
    line_span,
    looks_random,
    marker,
    replace_group,
    splice,
)

# The group name is the kind. Order matters where prefixes overlap: sk-ant- (Anthropic)
# before sk- (OpenAI).
_TOKEN_FORMATS: tuple[tuple[str, str], ...] = (
    (
        "slack_webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_+-]{20,}",
    ),
    (
        "discord_webhook",
        r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}",
    ),
    ("anthropic_key", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai_key", r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    (
        "github_token",
        "|".join(f"gh{c}_[A-Za-z0-9]{{36,255}}" for c in "pousr")
        + r"|github_pat_[A-Za-z0-9_]{22,255}",
    ),
    # gitleaks gitlab-*: personal, deploy, feed, runner, SCIM, OAuth, trigger, mail, agent
    (
        "gitlab_token",
        "|".join(
            f"gl{p}-[A-Za-z0-9_.-]{{20,}}"
            for p in ("pat", "dt", "ft", "rt", "soat", "oas", "ptt", "imt", "ffct", "agent", "cbt")
        ),
    ),
    ("grafana_token", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,3}"),
    (
        "slack_token",
        r"xox[abeoprs]-[A-Za-z0-9-]{10,}|xoxe\.xox[bp]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}",
    ),
    (
        "stripe_key",
        r"sk_(?:live|test|prod)_[A-Za-z0-9]{16,}|rk_(?:live|test|prod)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,}",
    ),
    ("google_api_key", r"AIza[A-Za-z0-9_-]{35}"),
    ("huggingface_token", r"hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z]{34}"),
    ("npm_token", r"npm_[A-Za-z0-9]{36}"),
    ("pypi_token", r"pypi-AgEI[A-Za-z0-9_-]{50,}"),
    ("sendgrid_key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
    # gitleaks aws-access-token, artifactory-api-key, aws-amazon-bedrock-api-key-long-lived
    (
        "aws_access_key",
        r"A3T[A-Z0-9]{17}|AKIA[A-Z0-9]{16}|ASIA[A-Z0-9]{16}|ABIA[A-Z0-9]{16}|ACCA[A-Z0-9]{16}",
    ),
    ("artifactory_key", r"AKCp[A-Za-z0-9]{69}"),
    ("bedrock_key", r"ABSK[A-Za-z0-9+/]{109,269}={0,2}"),
    ("age_secret_key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),  # gitleaks
    (
        "discord_token",
        "|".join(
            f"{c}[A-Za-z0-9]{{23,27}}\\.[A-Za-z0-9_-]{{6}}\\.[A-Za-z0-9_-]{{27,40}}" for c in "MN"
        ),
    ),
    ("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    # HashiCorp Vault service / batch / recovery tokens (gitleaks vault-service-token,
    # vault-batch-token; legacy "s." tokens have their own rule below)
    ("vault_token", "|".join(f"hv{c}\\.[A-Za-z0-9_-]{{24,}}" for c in "sbr")),
    # the rest: gitleaks rules of the same names, one literal prefix each
    ("databricks_token", r"dapi[a-f0-9]{32}(?:-\d)?"),
    ("digitalocean_token", r"doo_v1_[a-f0-9]{64}|dop_v1_[a-f0-9]{64}|dor_v1_[a-f0-9]{64}"),
    ("doppler_token", r"dp\.pt\.[A-Za-z0-9]{43}"),
    ("shopify_token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("linear_key", r"lin_api_[A-Za-z0-9]{40}"),
    ("notion_token", r"ntn_[0-9]{11}[A-Za-z0-9]{35}"),
    ("sentry_token", r"sntry[su]_[A-Za-z0-9+/=_]{40,}"),
    ("postman_key", r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    ("pulumi_token", r"pul-[a-f0-9]{40}"),
    ("rubygems_key", r"rubygems_[a-f0-9]{48}"),
    ("perplexity_key", r"pplx-[A-Za-z0-9]{48}"),
    ("planetscale_token", r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,64}"),
    ("newrelic_key", r"NR(?:AK|II)-[A-Za-z0-9-]{27,32}"),
    ("twilio_key", r"SK[0-9a-fA-F]{32}"),
    ("sendinblue_key", r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    ("square_token", r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,60}"),
    ("heroku_key", r"HRKU-AA[A-Za-z0-9_-]{58}"),
    ("openshift_token", r"sha256~[A-Za-z0-9_-]{43}"),
    ("onepassword_token", r"ops_eyJ[A-Za-z0-9+/]{250,}={0,3}"),
    ("alibaba_key", r"LTAI[A-Za-z0-9]{20}"),
    (
        "flyio_token",
        "fo1_[A-Za-z0-9_-]{43}|"
        + "|".join(f"{p}_[A-Za-z0-9+/]{{100,}}={{0,3}}" for p in ("fm1a", "fm1r", "fm2")),
    ),
    ("facebook_token", r"EAA[MC][A-Za-z0-9]{100,}"),
    ("mailgun_key", r"key-[0-9a-f]{32}"),  # gitleaks mailgun-private-api-token, unkeyed
)


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a pattern."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(pattern):
        escaped = i > 0 and pattern[i - 1] == "\\"
        depth += 0 if escaped else {"(": 1, ")": -1, "[": 1, "]": -1}.get(char, 0)
        if char == "|" and depth == 0 and not escaped:
            parts.append(pattern[start:i])
            start = i + 1
    return [*parts, pattern[start:]]


_FORMATS = tuple((kind, alt) for kind, fmt in _TOKEN_FORMATS for alt in _alternatives(fmt))


def _token_pattern() -> str:
    """One pattern over every format, each group named by kind (plus ``__<head>``).

    It is one alternative per first character of the formats, each that literal and then
    the formats of that character, so ``re`` tries only those. A token stands alone: only
    a letter or digit before it makes it part of a longer word, checked by the character
    that leads the search (``_tokens``). ASCII boundaries, not \\b: CJK letters count as
    \\w, and a token glued to Chinese text is still a token. A token right after a joiner
    (``token-ghp_…``, a file named ``stripe-sk_live_….md``, ``KEY_ghp_…``) is still a
    token (issue 20: ``-`` and ``_`` once counted as word characters and kept it whole).
    """
    by_head: dict[str, dict[str, list[str]]] = {}
    for kind, alt in _FORMATS:
        by_head.setdefault(alt[0], {}).setdefault(kind, []).append(alt[1:])
    branches = []
    for n, (head, kinds) in enumerate(sorted(by_head.items())):
        named = "|".join(f"(?P<{kind}__{n}>{'|'.join(alts)})" for kind, alts in kinds.items())
        branches.append(f"{re.escape(head)}(?:{named})")
    return rf"(?:{'|'.join(branches)})(?![A-Za-z0-9_])"


# Led by the character before the token, a class ``re`` skips to in C about once a word;
# led by the formats' first characters (most letters) with the boundary checked behind,
# it stopped at most letters (0.25 s for 5 MB of package text, against 0.18 s). A token
# at the very start of the text has no character before it: matched on its own.
# The lookahead on the formats' first characters lets a position before any other
# character fail in one class test instead of one per branch (provider tokens over the
# 20,000 texts and titles of the 10k real folder: 3.5 s -> 2.9 s).
_HEADS = "".join(sorted({alt[0] for _kind, alt in _FORMATS}))
_FIRST_TOKEN = re.compile(_token_pattern())
_TOKEN = re.compile(f"[^A-Za-z0-9](?=[{re.escape(_HEADS)}])" + _token_pattern())


def _tokens(text: str) -> Iterator[tuple[int, re.Match[str]]]:
    """Where each token starts, and its match (led by the character before it but the
    first), left to right without overlap as ``finditer`` gives them."""
    first = _FIRST_TOKEN.match(text)
    if first:
        yield 0, first
    for match in _TOKEN.finditer(text, first.end() if first else 0):
        yield match.start() + 1, match


def redact_provider_tokens(text: str, kinds: list[str]) -> str:
    """Provider tokens by their formats (see the module)."""
    edits = []
    for start, match in _tokens(text):
        kind = (match.lastgroup or "token").partition("__")[0]
        # Real tokens are random and contain digits; docs write ghp_xxxx… or sk-your-key-here.
        if kind != "jwt" and not any(c.isdigit() for c in match.group(0)):
            continue
        edits.append((start, match.end(), marker(kind)))
        kinds.append(kind)
    return splice(text, edits) if edits else text


# Legacy Vault service tokens: "s." and 24 letters and digits. "s." starts many expressions
# (s.split, s.AbcDef), so the match must stand alone and look random (upper, lower, digit).
_VAULT_LEGACY = re.compile(r"s\.(?<![\w.$/@-]s\.)[A-Za-z0-9]{24}(?![\w.(-])")
VAULT_LEGACY = Rule(
    _VAULT_LEGACY,
    lambda m: ("vault_token", marker("vault_token")) if looks_random(m.group(0)[2:]) else None,
)

# Azure AD client secrets (gitleaks azure-ad-client-secret): 3 characters, a digit, "Q~",
# 31-34 more. The scan starts at the literal "Q~" and the head is checked behind it.
_AZURE_AD = re.compile(r"Q~(?<=(?<![\w~.-])[A-Za-z0-9_~.]{3}\dQ~)[A-Za-z0-9_~.-]{31,34}(?![\w~.-])")


def redact_azure_ad_secret(text: str, kinds: list[str]) -> str:
    edits = [
        (m.start() - 4, m.end(), marker("azure_client_secret")) for m in _AZURE_AD.finditer(text)
    ]
    kinds += ["azure_client_secret"] * len(edits)
    return splice(text, edits) if edits else text


# Azure SAS signatures: sig=<url-encoded base64 HMAC> after ?, & or ; (URLs, connection
# strings). Starts at the literal "sig=" for speed.
_SAS_SIG = re.compile(r"sig=(?<=[?&;]sig=)(?P<sas_signature>[A-Za-z0-9%+/=_-]{20,})")
SAS_SIGNATURE = Rule(
    _SAS_SIG,
    lambda m: (
        ("sas_signature", "sig=" + marker("sas_signature"))
        if any(c.isdigit() or c in "%+/" for c in m["sas_signature"])
        else None
    ),
)

# Docker config.json "auth": "<base64 user:pass>" and .npmrc _auth=<base64>. The config may
# sit inside a JSON string (\"auth\": \"…\", escaped once or more) or a Python repr ('auth').
# Starts at the literal "auth"; the opening quote is checked behind it, so "oauth" stays.
_REGISTRY_AUTH = re.compile(
    r"(?:auth(?<=[\"']auth)\\{0,4}[\"'][ \t]*:[ \t]*\\{0,4}[\"']"
    r"|_auth(?<![\w-]_auth)[ \t]*=[ \t]*\"?)"
    r"(?P<basic_auth>[A-Za-z0-9+/]{8,}={0,2})"
)
REGISTRY_AUTH = Gated(
    ('"auth', "'auth", "_auth"),
    Rule(_REGISTRY_AUTH, lambda m: replace_group(m, "basic_auth", "basic_auth")),
)


# --- AWS secret access keys next to their key id ------------------------------------------------
# A credentials CSV row (User,Password,Access key ID,Secret access key) or any line holding a
# key id: a 40-character base64 run on the same line is its secret.
_AWS_ID_NEEDLES = ("AKIA", "ASIA", "ABIA", "ACCA", "A3T", "[REDACTED:aws_access_key]")
_AWS_ID = re.compile(
    r"(?<![A-Za-z0-9])(?:(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}|\[REDACTED:aws_access_key\])"
)
# 40 characters as AWS issues them; 30-50 so a key cut or mistyped by hand still goes.
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{30,50}(?![A-Za-z0-9+/=])")


def redact_aws_secret_beside_id(text: str, kinds: list[str]) -> str:
    """40-char base64 runs that share a line with an AWS access key id → ``aws_secret_key``."""
    if not any(needle in text for needle in _AWS_ID_NEEDLES):
        return text
    edits, done = [], -1
    for match in _AWS_ID.finditer(text):
        start, end = line_span(text, match.start())
        if start == done:
            continue
        done = start
        for secret in _AWS_SECRET.finditer(text, start, end):
            if looks_random(secret.group(0)):
                edits.append((secret.start(), secret.end(), marker("aws_secret_key")))
    kinds += ["aws_secret_key"] * len(edits)
    return splice(text, edits) if edits else text


# --- password hashes: crypt(3) strings as in /etc/shadow, and Django's pbkdf2 ----------------
# A hash is not the password, but a shadow line is cracked offline, so it goes too. Each
# scheme has its own fixed shape (salt and hash lengths), which keeps "$1$2" (Perl, shell) and
# "$5$ per unit" out. Starts at the literal "$"; the boundary is checked behind it.
_CRYPT_B64 = "[./A-Za-z0-9]"
_CRYPT = re.compile(
    r"\$(?<![\w$]\$)(?:"
    rf"1\${_CRYPT_B64}{{1,8}}\${_CRYPT_B64}{{22}}"
    rf"|2[abxy]\$\d\d\${_CRYPT_B64}{{53}}"
    rf"|[56]\$(?:rounds=\d{{1,9}}\$)?{_CRYPT_B64}{{1,16}}\${_CRYPT_B64}{{43,86}}"
    rf"|(?:y|gy|7)\${_CRYPT_B64}{{1,64}}(?:\${_CRYPT_B64}{{0,86}})?\${_CRYPT_B64}{{43}}"
    r"|argon2(?:id|i|d)\$(?:v=\d{1,3}\$)?m=\d{1,8},t=\d{1,4},p=\d{1,3}"
    r"\$[A-Za-z0-9+/]{8,88}\$[A-Za-z0-9+/]{16,128}"
    r")(?![./A-Za-z0-9+$])"
)
_PBKDF2 = re.compile(
    r"pbkdf2_sha(?:1|256|512)\$\d{1,7}\$[A-Za-z0-9./+]{1,64}\$[A-Za-z0-9+/]{20,}={0,2}"
    r"(?![A-Za-z0-9+/=])"
)
CRYPT_HASH = Rule(_CRYPT, lambda m: ("password_hash", marker("password_hash")))
PBKDF2_HASH = Gated(
    ("pbkdf2_",), Rule(_PBKDF2, lambda m: ("password_hash", marker("password_hash")))
)
