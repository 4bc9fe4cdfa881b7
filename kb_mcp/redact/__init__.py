"""Credentials and exfiltration URLs out of text. Pure functions over strings; no I/O.

``redact`` runs before a document is stored or indexed and ``redact_output`` on every tool
result, so a secret that reaches the library is never searchable nor handed back, and a
prompt-injected document cannot smuggle data out through a URL the agent's client fetches.
Secrets become ``[REDACTED:<kind>]``; assignments keep their key and URLs their user and host,
so the text still says *what* was there. Rules run in order, each over the previous output, so
the most specific kind wins (``github_token`` before ``token``). A marker counts as a
placeholder, which makes both functions idempotent.

Both keep every line where it was: the output has exactly as many newlines as the input, and
a line holding no secret comes out unchanged at the same line number (a PEM key becomes one
marker line per key line), so citations made on redacted text point at the same lines of the
original file.

Patterns are linear (no unbounded quantifier nests inside another) and start at a literal
prefix, a key word or a short class, so that secret-free text is mostly skipped in C. The
rules live in ``pem`` (private keys), ``encoded`` (base64 blobs holding a secret),
``joined`` (values cut over lines), ``tokens`` (provider formats, password hashes),
``values`` (secrets named by a key, header, flag, URL, CSV column or HTML attribute),
``pipes`` (Markdown table columns), ``blocks`` (block values under a key), ``localised``
(password words of other languages), ``confusables`` (key words in disguise or in NFKC
forms), ``generic`` (a generated value beside a key-like word: the second line of
defence) and ``exfil`` (output URLs); ``keywords`` holds the words that name a secret.
"""

from __future__ import annotations

from dataclasses import dataclass

from kb_mcp.redact import (
    blocks,
    confusables,
    encoded,
    exfil,
    generic,
    joined,
    localised,
    pipes,
    tokens,
    values,
)
from kb_mcp.redact._rule import Scan
from kb_mcp.redact.pem import redact_pem

__all__ = ["Redaction", "redact", "redact_output"]


@dataclass(frozen=True, slots=True)
class Redaction:
    """Redacted text plus what was taken out, so callers can log kinds without the secrets."""

    text: str
    count: int
    kinds: tuple[str, ...]


_CREDENTIAL_RULES: tuple[Scan, ...] = (
    redact_pem,
    encoded.redact_encoded,
    # lines continued onto the next, redacted as one line by all the rules, on the raw text
    # (a rule below could take one piece alone and hide the rest from the joined line)
    joined.redact_joined,
    # before the provider rule turns the key id into a marker (it accepts the marker too)
    tokens.redact_aws_secret_beside_id,
    values.redact_csv_columns,
    pipes.redact_pipe_columns,
    blocks.redact_blocks,
    tokens.redact_provider_tokens,
    tokens.VAULT_LEGACY,
    tokens.redact_azure_ad_secret,
    tokens.SAS_SIGNATURE,
    tokens.REGISTRY_AUTH,
    values.AUTH_HEADER,
    values.URL_PASSWORD,
    tokens.CRYPT_HASH,
    tokens.PBKDF2_HASH,
    values.CLI_USER,
    values.PASSWORD_FLAGS,
    values.KUBECONFIG,
    values.HTML_NAMED_VALUES,
    values.COOKIE_HEADERS,
    values.ASSIGNMENT,
    values.PROSE_PASSWORD,
    localised.LOCALISED_PASSWORD,
    confusables.redact_disguised_keys,
    # last: it takes what no rule above knew, beside any key-like word
    generic.redact_generated_values,
)
# Exfiltration first: a URL that carries a secret out goes whole, not with a marker inside.
_OUTPUT_RULES: tuple[Scan, ...] = (
    exfil.markdown_images,
    exfil.HTML_RESOURCES,
    exfil.CSS_RESOURCES,
    exfil.LINKS,
    *_CREDENTIAL_RULES,
)


def _apply(text: str, rules: tuple[Scan, ...]) -> Redaction:
    kinds: list[str] = []
    for rule in rules:
        text = rule(text, kinds)
    return Redaction(text=text, count=len(kinds), kinds=tuple(sorted(set(kinds))))


def redact(text: str) -> Redaction:
    """Credentials out of text on the way IN (before storage/indexing) and OUT.

    Kinds:

    - ``private_key``: PEM blocks (RSA/EC/OPENSSH/ENCRYPTED/PGP), every line of the block; a
      truncated block up to its last key-like line; body lines right above an END line with
      no BEGIN in view (see ``pem``).
    - provider tokens by format: ``aws_access_key``, ``github_token``, ``gitlab_token``,
      ``grafana_token``, ``slack_token``, ``slack_webhook``, ``discord_token``,
      ``discord_webhook``, ``stripe_key``, ``google_api_key``, ``openai_key``,
      ``anthropic_key``, ``huggingface_token``, ``npm_token``, ``pypi_token``,
      ``sendgrid_key``, ``mailgun_key`` (``key-`` + 32 hex), ``vault_token`` (``hvs.``,
      ``hvb.``, ``hvr.``, and legacy ``s.`` + 24 random-looking characters),
      ``artifactory_key``, ``bedrock_key``, ``age_secret_key``, ``databricks_token``,
      ``digitalocean_token``, ``doppler_token``, ``shopify_token``, ``linear_key``,
      ``notion_token``, ``sentry_token``, ``postman_key``, ``pulumi_token``,
      ``rubygems_key``, ``perplexity_key``, ``planetscale_token``, ``newrelic_key``,
      ``twilio_key``, ``sendinblue_key``, ``square_token``, ``heroku_key``,
      ``openshift_token``, ``onepassword_token``, ``alibaba_key``, ``flyio_token``,
      ``facebook_token``, ``azure_client_secret``, and ``jwt``. A provider token without a
      digit is a doc stand-in and is kept.
    - ``aws_secret_key``: a 30-50 character base64 run (upper, lower and a digit or ``/+``;
      AWS issues 40) on the same line as an AWS key id, as in a credentials CSV row.
    - ``sas_signature``: an Azure SAS ``sig=`` value after ``?``, ``&`` or ``;``.
    - ``basic_auth``: Docker config ``"auth": "<base64>"`` (also ``'auth'`` and escaped inside
      a JSON string, ``\\"auth\\": \\"…\\"``), ``.npmrc`` ``_auth=``, and
      ``Authorization: Basic``; ``bearer_token`` in ``Authorization: Bearer|Token``.
    - ``password_hash``: crypt(3) hashes as in ``/etc/shadow`` (``$1$``, ``$2a$``/``$2b$``/
      ``$2y$``, ``$5$``, ``$6$``, ``$7$``, ``$y$``, ``$gy$``, ``$argon2id$``…) and Django's
      ``pbkdf2_sha256$…``, each by its exact shape (``$1$2`` in Perl stays).
    - ``url_password`` in ``scheme://user:pass@host`` (the password may hold ``@`` and ``/``).
    - ``password`` after ``curl -u user:`` / ``--user user:`` (not ``1000:1000``, not
      ``www-data:www-data``, not ``$(id -u):…``), and in prose: "the password is X",
      "password for the db: X", "pwd is X", when X is quoted or looks made up (6+
      characters with a digit or symbol, not code or a path); a quoted value may hold spaces
      ("the passphrase was \"correct horse battery staple\""), and with no "is" or ":" at all
      ("root passwd Hk8sLq2Mz9Xw") the value must mix upper, lower and a digit.
    - ``password`` given as a flag: ``mysql``/``mysqldump``/``mariadb`` ``-pX`` (glued; ``-p
      mydb`` names a database), ``sshpass -p X``, ``redis-cli -a X``, and ``--password X``
      when X is quoted or not a plain word (``--password-stdin`` and ``$VAR`` stay).
    - assignment values: ``aws_secret_key``, ``password`` (also ``passphrase``), ``secret``,
      ``token``, ``api_key``, ``access_key``, ``account_key`` (Azure ``AccountKey=``),
      ``private_key`` (also kubeconfig ``client-key-data``), ``client_certificate``
      (kubeconfig ``client-certificate-data``). A key matches when it ends in one of those
      words (``DB_PASSWORD``, ``clientSecret``, ``X-Api-Key``); an unquoted value ends at
      whitespace, a quote, ``,`` or ``;``. Quotes escaped inside a JSON string
      (``\\"password\\": \\"…\\"``) count as quotes. After ``key:`` an unquoted value must
      end its line, or be closed by a quote or emphasis (``"token: 4f8a…"``,
      ``**token: 4f8a…**``) and then mix letters and digits over 8+ characters. The same
      words name CSV/TSV header cells (``Password``, ``Secret access key``): that column of
      the following rows is redacted down to a line without the delimiter; in a ragged
      row the cell is looked for from both ends and taken when it looks generated.

    Values are kept when they are empty, a marker, a template or env reference
    (``<your-password>``, ``${PASSWORD}``, ``$TOKEN``, ``{{ x }}``), one repeated character
    (``****``, ``xxx``), a stand-in (``your_token``, ``TOKEN_HERE``, ``changeme``, ``None``,
    ``str``), or a path (``/etc/ssl/key.pem``). Unquoted values are also kept when they are code
    (``get_token()``, ``self.token``, ``api_key=api_key``: names made of words, not a random
    run that happens to hold a key word such as ``TokenA8f7Gh2kLmQ9``) or when a ``key:`` is
    followed by more words on its line (prose).

    Key words spelled with look-alike characters (Cyrillic ``а``, fullwidth ``ｐａｓｓ``, a
    zero-width space inside, a JSON ``\\u`` escape) are found on a folded copy of their
    line and only the value is replaced in the original (see ``confusables``).

    Issue 20 added whole classes (each module's docstring says what it takes and keeps):
    password words of other languages and NFKC forms (``localised``); the columns of a
    Markdown pipe table under a secret-naming header (``pipes``); block values under a
    secret name: YAML block scalars and items, JSON containers, heredocs (``blocks``);
    lines joined by string concatenation, a ``\\`` continuation or a key ending its line
    (``joined``); base64 blobs whose decoding holds a secret (``encoded``); the key-name
    grammar (``keywords``: ``secret_key_base``, ``signing_key``, ``db_pw``,
    ``credentials``), ``session_cookie`` values of ``Cookie:`` / ``Set-Cookie:`` headers
    and HTML ``content`` / ``value`` attributes named by another attribute (``values``);
    and, last, ``secret`` for a generated-looking value within 64 characters after a
    key-like word in any language (``generic``).
    """
    return _apply(text, _CREDENTIAL_RULES)


def redact_output(text: str) -> Redaction:
    """What leaves through a tool: credentials (as redact) plus data-exfiltration URLs.

    A URL is remote when it is ``http(s)://`` or protocol-relative ``//host`` to a host other
    than loopback (``localhost``, ``*.localhost``, ``127.x.x.x``, ``[::1]``), judged as a
    renderer reads it: HTML entities decoded (``https&#58;//``, ``&colon;``, ``&sol;``),
    backslash escapes, tabs and newlines removed. A remote URL becomes
    ``[REDACTED:exfil_url]`` when

    - a renderer fetches it unasked and it has any query string (``?s=hunter2`` leaks): a
      Markdown image destination (``![alt](url)``, alt text with nested ``[…]``, destination
      with nested parentheses at any depth, ``<url>`` form); an HTML/SVG attribute ``src``,
      ``srcset`` / ``imagesrcset`` (each candidate), ``poster``, ``background``, ``data``,
      ``lowsrc``, or ``href`` / ``xlink:href`` on any tag but ``a``, ``area`` and ``base``
      (``<image href>``, ``<use>``, ``<link>``); a CSS ``url(…)`` or ``@import``; the
      definition (``[r]: url``) a reference-style image (``![x][r]``, ``![x][]``, ``![x]``)
      in the same text uses. Badge images such as ``img.shields.io/…?style=flat`` are
      redacted by this rule as well;
    - such a fetched resource also when its host or path holds a run of 8+ base64 letters
      mixing upper, lower and digits that does not read as words
      (``evil.example/U0VDUkVU.REFUQTU.png``, ``U0VDUkVUREFUQTU.evil.example``), not
      ``app.3f9a8c7b.png``, ``Screenshot2024.png`` or a 7-character id; or
    - it is any other link and its query values and fragment, percent-decoded, hold 48 or
      more characters from ``A-Z a-z 0-9 + / = _ -`` in total, however split (``?a=…&b=…``,
      ``aGVs.bG8g.d29y``): room for a key, more than a page number, a search phrase or a
      tracking tag. Query keys and separators are not counted. Long OAuth or signed links
      (``X-Amz-Signature=…``) are caught too; that is the price.

    Only the URL is replaced; the alt text, brackets, attribute names and trailing
    punctuation stay. Not detected: data in a link's path, data in a fetched path cut into
    runs under 8 characters or written in one case (lowercase hex or base32 look like CDN
    hashes), and a reference image whose definition is outside the text being redacted.
    """
    return _apply(text, _OUTPUT_RULES)
