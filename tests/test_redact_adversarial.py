"""issue 7 follow-up: redaction gaps an outside adversarial run found (N1, N9, item 6 leftovers).

Fake credentials are assembled at run time where a scanner could flag them on push.
"""

from __future__ import annotations

import pytest

from kb_mcp.redact import redact

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
