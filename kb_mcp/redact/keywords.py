"""The words that name a secret: a key-name grammar for identifiers, and the password words
of other languages.

Trigger: a list of literal key names kept missing the next one (``secret_key_base``,
``signing_key``, ``db_pw``, ``credentials``, ``密码``, ``Passwort``; issue 20). Outcome: two
strengths of naming, each a grammar rather than a list of keys.

- A *secret name* (``KEY_WORD``): the value after it is a secret whatever it looks like, as
  in ``DB_PASSWORD=hunter2``. An identifier ends in one of the words that mean a secret by
  themselves (password and its short forms, secret, token, credentials, cookie) or in
  ``key`` after a qualifier that makes a key secret (api, private, encryption, signing,
  master…); ``password_hash`` and ``api_key_name`` do not end so and name something else.
  ``LOCALISED_PASSWORD`` is the same for the password words of other languages.
- A *key-like word* (``key_like``): any identifier one of whose words hints at a secret
  (``cache_key``, ``session_id``, ``auth``), or a secret word of any language. The value
  beside it counts only when it looks generated (``generic``).
"""

from __future__ import annotations

import re
from functools import cache

from kb_mcp.redact._rule import words

# ``<qualifier>_key`` names a secret key; ``cache_key``, ``primary_key``, ``sort_key`` do not.
_KEY_QUALIFIERS = (
    *("api", "access", "account", "private", "encryption", "decryption", "signing", "master"),
    *("hmac", "jwt", "license", "licence", "cipher", "crypto", "app", "shared", "client"),
    *("consumer", "webhook", "deploy", "ssh", "secret"),
)
# Each form spelled from its first letter; ``[_-]?`` between words (api_key, api-key, apiKey).
_FORMS = (
    r"aws[_-]?secret[_-]?access[_-]?key",
    r"secret[_-]?access[_-]?key",
    r"secret[_-]?key[_-]?base",  # Rails
    r"key[_-]?base",
    *(rf"{q}[_-]?key" for q in _KEY_QUALIFIERS),
    r"pass(?:w(?:or)?d|phrase)",
    r"pwd",
    # "pass" and "pw" only as a word of their own (DB_PASS, db_pw): not bypass, not npw
    r"pass(?<=[_.-]pass)",
    r"pw(?<![A-Za-z0-9]pw)",
    r"secret",
    r"token",
    r"credentials?",
    r"cookie",
)


def _key_word() -> str:
    """One pattern over the forms that starts with a class of their first letters and
    dispatches on it with a lookbehind, so that ``re`` skips to those letters in C."""
    by_head: dict[str, list[str]] = {}
    for form in _FORMS:
        by_head.setdefault(form[0], []).append(form[1:])
    heads = "".join(sorted({c for head in by_head for c in (head, head.upper())}))
    branches = "|".join(f"(?<={h})(?:{'|'.join(tails)})" for h, tails in sorted(by_head.items()))
    return f"[{heads}](?i:{branches})"


# A secret name as the last word(s) of a longer key: DB_PASSWORD, clientSecret, X-Api-Key.
KEY_WORD = _key_word()
# One of these (lower-cased) is in every match of KEY_WORD, so a line without any holds no
# secret name (``_rule.LineGated``). Kept with ``_FORMS``: a form holding none of them
# needs its own. Narrower than ``pass``: Python's ``pass`` statement names nothing.
KEY_WORD_NEEDLES = (
    *("key", "passw", "passp", "_pass", ".pass", "-pass", "pw", "secret", "token"),
    *("credential", "cookie"),
)

_KIND_OF_WORD = {
    "token": "token",
    "apikey": "api_key",
    "accesskey": "access_key",
    "accountkey": "account_key",  # Azure storage AccountKey=
    "privatekey": "private_key",
    "pwd": "password",
    "pw": "password",
    "cookie": "session_cookie",
}


def word_kind(word: str) -> str:
    """The kind a key word names: DB_PASSWORD → password, Secret access key → aws_secret_key."""
    letters = re.sub(r"[^a-z]", "", word.lower())
    if letters.endswith("secretaccesskey"):
        return "aws_secret_key"
    if letters.startswith("pass"):
        return "password"
    if letters.startswith("secret"):
        return "secret"
    return _KIND_OF_WORD.get(letters, "secret")


# --- other languages ---------------------------------------------------------------------
# Password words, matched case-insensitively on text folded to NFKC (``confusables``).
PASSWORD_WORDS = (
    *("密码", "密碼", "口令", "パスワード", "暗証番号", "비밀번호", "암호", "пароль", "парола"),
    *("passwort", "kennwort", "contraseña", "contrasena", "mot de passe", "senha"),
    *("palavra-passe", "palavra passe", "wachtwoord", "lösenord", "losenord", "passord"),
    *("adgangskode", "salasana", "hasło", "haslo", "heslo", "jelszó", "şifre", "sifre"),
    *("parolă", "κωδικός", "mật khẩu", "kata sandi", "kata laluan", "пароля", "паролем"),
    *("clave", "parola d'ordine", "비번", "паролю", "пароли"),
)
# Short forms that also mean other things (MDP: a Markov decision process): the value
# after them must look made up, as after ``SECRET_WORDS``.
SHORT_PASSWORD_WORDS = ("mdp",)
# Words for a secret, a key or a token: only a generated-looking value beside them counts.
SECRET_WORDS = (
    *("密钥", "秘钥", "密鑰", "令牌", "凭证", "憑證", "口令", "秘密鍵", "シークレット", "トークン"),
    *("認証", "キー", "비밀키", "토큰", "인증", "секрет", "токен", "ключ", "ключа"),
    *("schlüssel", "geheimnis", "zugangsdaten", "clé", "jeton", "secreto", "llave", "chave"),
    *("segreto", "chiave", "sleutel", "geheim", "klucz", "tajny", "nyckel", "nøgle"),
)
# "the password is X" in each language: copulas and "is called" verbs, after the word.
COPULAS = (
    *("is", "was", "ist", "lautet", "war", "est", "es", "era", "é", "è", "è:", "är", "er"),
    *("jest", "je", "on", "是", "为", "為", "は", "が", "는", "은", "—", "–"),
)


def _alternation(words_: tuple[str, ...]) -> str:
    """The words, case-insensitive, as one pattern that starts with a class of their first
    letters and dispatches on it (as ``KEY_WORD``), longest first within a letter so
    ``пароля`` is not read as ``пароль`` plus a letter."""
    by_head: dict[str, list[str]] = {}
    for word in sorted(set(words_), key=len, reverse=True):
        tail = re.escape(word[1:]).replace(r"\ ", r"[ \t]+")
        by_head.setdefault(word[0].lower(), []).append(tail)
    heads = "".join(sorted({c for head in by_head for c in (head, head.upper())}))
    branches = "|".join(f"(?<={h})(?:{'|'.join(tails)})" for h, tails in sorted(by_head.items()))
    return f"[{re.escape(heads)}](?i:{branches})"


PASSWORD_WORD = _alternation(PASSWORD_WORDS)
SHORT_PASSWORD_WORD = _alternation(SHORT_PASSWORD_WORDS)
SECRET_WORD = _alternation(SECRET_WORDS)
COPULA = _alternation(COPULAS)

# --- key-like identifiers (the generic rule) ------------------------------------------------
# Words of an identifier that hint at a secret without naming one by themselves.
_HINTS = frozenset(
    {
        *("password", "passwd", "pwd", "pw", "pass", "passphrase", "passcode", "secret"),
        *("secrets", "token", "tokens", "credential", "credentials", "creds", "cred", "auth"),
        *("authorization", "bearer", "cookie", "cookies", "session", "sid", "private", "key"),
        *("keys", "apikey", "signature", "sig", "hmac", "jwt", "otp", "pin", "salt", "nonce"),
    }
)


@cache
def key_like(identifier: str) -> bool:
    """Whether an identifier's words hint at a secret (``cache_key``, ``X-Auth``, ``sessionId``)."""
    return any(w.lower() in _HINTS for w in words(identifier))


# Substrings every key-like word or secret name holds one of (lower-cased), so a window of
# text without any is skipped before a regex or an entropy count runs on it.
_HINT_PARTS = tuple(
    sorted(
        {"pass", "pw", "key", "token", "secret", "cred", "auth", "bearer", "cookie", "session"}
        | {"sid", "private", "sig", "hmac", "jwt", "otp", "pin", "salt", "nonce"}
        | {w[:4].lower() for w in PASSWORD_WORDS + SHORT_PASSWORD_WORDS + SECRET_WORDS}
    )
)
# The ASCII parts as one pattern: the only ones an ASCII window can hold, found in one
# search instead of a substring test per part (this cut runs for each of tens of thousands
# of windows in 5 MB of code: 0.06 s against 0.35 s).
_ASCII_HINT = re.compile("|".join(re.escape(part) for part in _HINT_PARTS if part.isascii()))


def may_name_a_secret(window: str) -> bool:
    """False only when ``window`` holds no part of any key word (a cheap first cut)."""
    if not window.isascii():
        return True
    return _ASCII_HINT.search(window.lower()) is not None
