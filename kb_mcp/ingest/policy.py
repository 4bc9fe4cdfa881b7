"""Paths that are never read: private keys, credentials, ``.env`` files, credential folders.

A folder source is often a home folder or a repository, and both hold secrets next to
notes. Whatever is read may be indexed and then quoted to an agent, so the only safe
secret is one that is never opened. The rules below are a deny-list by name, matched
case-insensitively; a false positive costs one unindexed file, which the walk reports
under ``sensitive``, while a false negative leaks a key.

The walk checks names as it goes (``sensitive_name_reason``,
``sensitive_folder_reason``) and never enters a credential folder. The reader calls
``check_readable`` right before opening a file, because the walk's answer can be stale
by then: ``notes.md`` may have become a symlink to ``~/.ssh/id_rsa`` in between.

Decisions worth knowing:

- ``.env.example``, ``.env.sample`` and ``.env.template`` are allowed: they are
  documentation of which variables exist, committed on purpose. Every other
  ``.env.*`` is treated as real configuration.
- A name containing ``secret`` or ``credential`` is refused (``client_secret_123.json``,
  ``secrets.yaml``, ``credentials.csv``, ``secrets``) unless it is documentation or
  source code by its suffix (``secrets.py``, ``test_secrets.py``, ``secret-rotation.md``):
  those mention secrets far more often than they hold one, a question about them must
  find them (issue 7 item 8), and what they do hold is redacted on the way in. Shell
  scripts and ``.txt`` stay refused by name: ``secrets.sh`` / ``secrets.txt`` are where
  values are kept. Such a name is a suspicion, not a verdict, when the file is at hand:
  ``check_readable`` and the walk read it when its first bytes open a document (a
  manual page's roff header, a setext or AsciiDoc title, an HTML page:
  ``opens_as_document``), which a file of values never does. git's manual pages
  ``gitcredentials.txt`` and ``git-credential-store.1`` were refused by name (issue 20
  item 10). Exact credential names (``.git-credentials``, ``credentials``, ``.netrc``,
  ``credentials.json``, …) stay refused whatever they hold.
- A file whose content starts as a PEM private key (or a PuTTY key) is refused whatever
  its name (``check_readable`` peeks at its first bytes): keys are often saved as
  ``deploy`` or ``key.txt``.
- ``*.gpg`` is refused whole: it is a keyring or an encrypted file, neither of which
  is readable text.
- ``.config/gcloud`` and ``.config/gh`` (the GitHub CLI keeps its token in
  ``hosts.yml``) are credential folders, though ``.config`` itself is not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from kb_mcp.errors import NotFound, Refused, Unreadable

__all__ = [
    "check_readable",
    "named_for_secrets",
    "opens_as_document",
    "sensitive_content_reason",
    "sensitive_file_reason",
    "sensitive_folder_reason",
    "sensitive_name_reason",
    "sensitive_reason",
]

_PRIVATE_KEY = "private key"
_ENV_FILE = "environment file"
_CREDENTIALS = "credential file"
_BROWSER_STORE = "browser credential store"
_TOKEN = "token file"

# Exact file names, lower case.
_SENSITIVE_NAMES: Mapping[str, str] = {
    **dict.fromkeys(
        ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk"),
        _PRIVATE_KEY,
    ),
    "kubeconfig": _CREDENTIALS,
    ".env": _ENV_FILE,
    ".envrc": _ENV_FILE,
    **dict.fromkeys(
        (
            ".netrc",
            "_netrc",
            ".npmrc",
            ".pypirc",
            ".git-credentials",
            ".pgpass",
            ".s3cfg",
            "credentials",
            "credentials.json",
        ),
        _CREDENTIALS,
    ),
    ".htpasswd": "password file",
    **dict.fromkeys(
        ("login data", "login data-journal", "cookies", "cookies-journal", "web data"),
        _BROWSER_STORE,
    ),
    "token.json": _TOKEN,
}

# File name endings, lower case; checked in order.
_SENSITIVE_SUFFIXES: tuple[tuple[str, str], ...] = (
    *((s, _PRIVATE_KEY) for s in (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk")),
    (".gpg", "GnuPG keyring or encrypted file"),
    (".kdbx", "password database"),
    (".keychain", "keychain"),
    (".keychain-db", "keychain"),
    (".tfstate", "terraform state"),
    (".tfstate.backup", "terraform state"),
    (".token", _TOKEN),
    (".kubeconfig", _CREDENTIALS),
)
# SSH key files go by their key type, often with a suffix (id_rsa_work, id_ed25519.old);
# the public half (.pub) is no secret but is never worth indexing either.
_SSH_KEY_PREFIXES = ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")
_ANY_SENSITIVE_SUFFIX = tuple(suffix for suffix, _ in _SENSITIVE_SUFFIXES)

# Committed on purpose to document which variables exist; they hold no values.
_ENV_DOCS = frozenset({".env.example", ".env.sample", ".env.template"})

_SERVICE_ACCOUNT_MARKERS = ("service-account", "service_account", "serviceaccount")

# Words that, in a name that is not documentation or code, mark a file holding values.
_SECRET_WORDS = ("secret", "credential", "accesskeys", "kubeconfig")
# Documentation and source code: a name mentioning secrets is read (redacted), never
# refused. Shell (.sh, .bash, .zsh, .ps1) and .txt are left out on purpose: they are
# where values are kept.
_DOC_OR_CODE_SUFFIXES = frozenset(
    {
        *(".md", ".markdown", ".mdx", ".rst", ".adoc", ".org", ".html", ".htm", ".pdf"),
        *(".docx", ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go"),
        *(".rs", ".java", ".kt", ".kts", ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rb"),
        *(".php", ".swift", ".scala", ".lua", ".ex", ".exs", ".erl", ".hs", ".ml", ".clj"),
        *(".dart", ".vue", ".svelte"),
    }
)
# What a private key file starts with (after a BOM or blank lines); bytes, as read.
_PEM_KEY_START = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(?:-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    rb"|PuTTY-User-Key-File-)"
)
PEEK_BYTES = 256
_SECRETS_FILE = "secrets file"
# How a document opens, after blank lines: a roff manual page (a comment, ``.TH`` or
# ``.Dd``), a setext title (a line with a letter that is no comment, then a line of
# ``=`` or ``-``: a YAML ``---`` after a ``# comment`` is not one), an AsciiDoc document
# title, or HTML.
_DOCUMENT_START = re.compile(
    r"\A\s*(?:(?:\.\\\"|'\\\"|\.TH\s|\.Dd\s)"
    r"|(?![#;/%!])[^\n]*[^\W\d_][^\n]*\n(?:={3,}|-{3,})[ \t]*(?:\n|\Z)"
    r"|= \S"
    r"|<!doctype html|<html)",
    re.IGNORECASE,
)

# Folders whose whole content is credentials, lower case.
_SENSITIVE_FOLDERS = frozenset(
    {
        ".ssh",
        ".gnupg",
        ".aws",
        ".azure",
        ".gcloud",
        ".kube",
        ".docker",
        ".password-store",
        "keychains",
        ".pki",
        ".terraform.d",
    }
)
# Folders that hold credentials only when they sit in ``.config``.
_SENSITIVE_CONFIG_FOLDERS = frozenset({"gcloud", "gh"})


def sensitive_name_reason(name: str) -> str | None:
    """Why a file called ``name`` is never read, or None if its name is harmless.

    Judged by the name alone; ``named_for_secrets`` says when the file's first bytes may
    still show it is a document (``sensitive_content_reason``)."""
    if reason := _certain_name_reason(name.lower()):
        return reason
    return _SECRETS_FILE if named_for_secrets(name) else None


def named_for_secrets(name: str) -> bool:
    """Whether ``name`` is refused only for a secret word in it (``secrets.txt``,
    ``gitcredentials.txt``): the content decides once the file is at hand."""
    lower = name.lower()
    if _certain_name_reason(lower):
        return False
    return any(word in lower for word in _SECRET_WORDS) and not _is_doc_or_code(lower)


def _certain_name_reason(lower: str) -> str | None:
    """The name rules no content can lift: keys, exact credential names, ``.env``."""
    if reason := _SENSITIVE_NAMES.get(lower):
        return reason
    if lower.endswith(_ANY_SENSITIVE_SUFFIX):
        return next(reason for suffix, reason in _SENSITIVE_SUFFIXES if lower.endswith(suffix))
    if lower.startswith(_SSH_KEY_PREFIXES):
        return "public key" if lower.endswith(".pub") else _PRIVATE_KEY
    if lower.startswith(".env.") and lower not in _ENV_DOCS:
        return _ENV_FILE
    if lower.endswith(".json") and any(m in lower for m in _SERVICE_ACCOUNT_MARKERS):
        return "service-account key"
    return None


def _is_doc_or_code(lower: str) -> bool:
    suffix = lower[lower.rfind(".") :] if "." in lower.lstrip(".") else ""
    return suffix in _DOC_OR_CODE_SUFFIXES


def sensitive_content_reason(head: bytes, name: str = "") -> str | None:
    """Why a file called ``name`` whose first bytes are ``head`` is never read, or None.

    Only a file that *starts* as a private key is refused: a note that quotes a key in
    its middle is read, and the key redacted. A name ``named_for_secrets`` is refused
    unless ``head`` opens a document.
    """
    if _PEM_KEY_START.match(head):
        return "private key (PEM content)"
    if name and named_for_secrets(name) and not opens_as_document(head):
        return _SECRETS_FILE
    return None


def opens_as_document(head: bytes) -> bool:
    """Whether a file's first bytes open a document: a roff manual page, a title
    underlined setext-style (AsciiDoc and reStructuredText), an AsciiDoc ``= Title`` or
    an HTML page. A values file (``KEY=value`` lines, bare tokens, JSON, YAML) opens with
    none of them; a Markdown ``# heading`` is not taken, because ``#`` opens a comment in
    shell, YAML and ``.env`` files too."""
    text = head.decode("utf-8", errors="replace").removeprefix("\ufeff")
    return bool(_DOCUMENT_START.match(text))


def sensitive_folder_reason(name: str, parent: str = "") -> str | None:
    """Why nothing inside a folder called ``name`` (in folder ``parent``) is ever read."""
    lower = name.lower()
    if lower in _SENSITIVE_FOLDERS:
        return f"credential folder {name}"
    if lower in _SENSITIVE_CONFIG_FOLDERS and parent.lower() == ".config":
        return f"credential folder {parent}/{name}"
    return None


def sensitive_reason(path: Path, *, content_decides: bool = False) -> str | None:
    """None if the path may be read; else a short reason ("private key", …).

    Every component is checked as a folder (``a/.ssh/config`` is refused for
    ``.ssh``), and the last one as a file name too. Only names are looked at; the
    path is not touched on disk. ``content_decides``: a name ``named_for_secrets`` passes,
    for a caller that reads the first bytes next (``sensitive_content_reason``).
    """
    parts = path.parts
    for i, part in enumerate(parts):
        if reason := sensitive_folder_reason(part, parts[i - 1] if i else ""):
            return reason
    if not parts:
        return None
    if content_decides:
        return _certain_name_reason(parts[-1].lower())
    return sensitive_name_reason(parts[-1])


def check_readable(path: Path, root: Path, *, root_is_resolved: bool = False) -> Path:
    """The path to open for ``path``, checked right before reading it.

    Symlinks are resolved (strictly: the file must exist), then the policy is
    applied to both the path as given and the resolved path, and the resolved path
    must be a regular file inside ``root.resolve()`` that does not start as a private
    key, nor, under a name ``named_for_secrets``, as anything but a document (its first
    ``PEEK_BYTES`` are read for that). Returns the resolved path, which
    is what the caller should open. ``root_is_resolved`` skips resolving ``root``
    again (a sync resolves it once for all its files). Raises ``Refused`` naming the
    path and the reason, ``NotFound`` if it is gone, ``Unreadable`` if it cannot be
    resolved.
    """
    resolved = _resolve(path)
    if reason := sensitive_reason(path, content_decides=True) or sensitive_reason(
        resolved, content_decides=True
    ):
        raise Refused(
            f"refusing to read {_describe(path, resolved)}: {reason}",
            hint="kb-mcp never reads keys, credentials or .env files",
        )
    root_resolved = root if root_is_resolved else _resolve(root)
    if not resolved.is_relative_to(root_resolved):
        raise Refused(
            f"refusing to read {_describe(path, resolved)}: outside the source folder "
            f"{root_resolved}",
            hint="add the folder it points into as a source of its own if it belongs in the index",
        )
    if not resolved.is_file():
        raise Refused(f"refusing to read {_describe(path, resolved)}: not a regular file")
    head = _peek(resolved)
    if reason := sensitive_content_reason(head, path.name) or sensitive_content_reason(
        head, resolved.name
    ):
        raise Refused(
            f"refusing to read {_describe(path, resolved)}: {reason}",
            hint="kb-mcp never reads keys, credentials or .env files",
        )
    return resolved


def sensitive_file_reason(path: Path) -> str | None:
    """``sensitive_content_reason`` of the file at ``path`` (its first bytes, its name)."""
    return sensitive_content_reason(_peek(path), path.name)


def _peek(path: Path) -> bytes:
    """The first bytes of a file, or none when it cannot be opened (the read says why)."""
    try:
        with path.open("rb") as handle:
            return handle.read(PEEK_BYTES)
    except OSError:
        return b""


def _resolve(path: Path) -> Path:
    """``path.resolve(strict=True)`` with OS errors turned into ours."""
    try:
        return path.resolve(strict=True)
    except FileNotFoundError as err:
        raise NotFound(f"cannot read {path}: it no longer exists") from err
    except (OSError, RuntimeError) as err:  # RuntimeError: symlink loop (Python < 3.13)
        raise Unreadable(f"cannot read {path}: cannot resolve it ({err})") from err


def _describe(path: Path, resolved: Path) -> str:
    """The path, plus where it really leads when a symlink is involved."""
    return str(path) if resolved == path else f"{path} (resolves to {resolved})"
