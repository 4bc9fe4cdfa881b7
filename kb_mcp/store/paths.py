"""How a file's path is stored: redacted for people, a keyed hash of it for the sync.

Trigger (issue 20 item 3): ``locations.path`` held each file's raw path, so a file named
``password=<value>.txt`` kept the value in ``kb.db``, in ``list``, search hits and the web
view, and ``read '<that name>'`` answered for the right guess only: the path confirmed a
guessed secret. Outcome: a location stores two things, neither of them the raw path:

- ``path``: the path through ``redact`` (the same rules as text), what every listing,
  cite, search hit and "did you mean" shows, and the only form a lookup by name is
  resolved through: ``read`` redacts the name it is given before comparing, so a right
  and a wrong guess of the secret in a path become the same string and get the same
  answer. Two files whose names differ only in a secret show the same path; ``read`` by
  that path then lists both by document id (it does so for any two same-named files).
- ``path_key``: a MAC of the raw path under a random key of the library, the identity
  the sync's diff looks a walked file up by (the walk yields raw paths again). Keyed,
  not a plain hash: a plain hash in ``kb.db`` would let whoever holds the file confirm a
  guessed path by hashing it. The key lives in ``<home>/path.key`` (mode 0600), outside
  ``kb.db``, so a copied database alone confirms nothing. The MAC is BLAKE2b in its
  keyed mode (RFC 7693), 128 bits: a sync computes one per walked file, and from a copy
  of the keyed state it is 1.0-1.4 µs a path where HMAC-SHA256 was 3.6 (a no-change sync of
  10k files is ~0.2 s of CPU in all).

The key is made on first use and never changes. Lost (deleted), a new one is made: no
recorded key matches any more, so the next sync reads every file again as new and drops
the old locations (their documents stay, matched by text). ``kb.db`` is rebuildable from
the files; this keeps that true.

A file whose stored path is redacted cannot be opened from it: ``reader`` finds it again
by walking its folder for the file whose raw path has the recorded key.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from kb_mcp.errors import Unavailable
from kb_mcp.redact import redact

PATH_KEY_FILE = "path.key"  # beside kb.db; never inside it
_KEY_BYTES = 32
_MAC_BYTES = 16
REDACTION_MARKER = "[REDACTED:"


@dataclass(frozen=True, slots=True)
class StoredPath:
    """A path as a location stores it: ``shown`` (redacted) and ``key`` (keyed hash)."""

    shown: str
    key: str


class PathKeys:
    """The library's path key and what it computes; one per ``Database``."""

    def __init__(self, key_file: Path) -> None:
        self.key_file = key_file
        self._keyed: hashlib.blake2b | None = None
        self._lock = threading.Lock()

    def _mac(self) -> hashlib.blake2b:
        if self._keyed is None:
            with self._lock:
                if self._keyed is None:
                    secret = load_or_create_key(self.key_file)
                    self._keyed = hashlib.blake2b(key=secret, digest_size=_MAC_BYTES)
        return self._keyed.copy()

    def key(self, raw: str) -> str:
        """The lookup key of raw path ``raw``: its keyed BLAKE2b, as hex."""
        mac = self._mac()
        mac.update(raw.encode("utf-8", "surrogatepass"))
        return mac.hexdigest()

    def of(self, raw: str) -> StoredPath:
        return StoredPath(shown_path(raw), self.key(raw))

    def raw_if_shown(self, shown: str, key: str) -> str | None:
        """``shown`` when it is the raw path itself (redaction took nothing out), else
        None: then only a walk of the folder can tell which file it is."""
        return shown if hmac.compare_digest(self.key(shown), key) else None


def shown_path(raw: str) -> str:
    """A path as it may be stored and shown: credentials out, like any text."""
    return redact(raw).text


def load_or_create_key(key_file: Path) -> bytes:
    """The key in ``key_file``, made (random, mode 0600) when the file does not exist.

    Two processes opening a new library at once agree: the key is written to a temp file
    and linked into place, which fails for the second one, who then reads the first's.
    """
    try:
        return _parse_key(key_file)
    except FileNotFoundError:
        pass
    key_file.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{key_file.name}.", suffix=".tmp", dir=key_file.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:  # mkstemp: mode 0600
            handle.write(os.urandom(_KEY_BYTES).hex() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first
            os.link(tmp, key_file)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return _parse_key(key_file)


def _parse_key(key_file: Path) -> bytes:
    text = key_file.read_text(encoding="ascii", errors="replace").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != _KEY_BYTES:
        raise Unavailable(
            f"{key_file} is not a path key ({_KEY_BYTES * 2} hex digits)",
            hint=f"delete {key_file.name}: a new one is made, and the next sync reads "
            "every folder file again",
        )
    return key
