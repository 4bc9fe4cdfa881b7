"""What the Ollama clients share: the host as shown and trusted, and the cooldown.

The embedder (``embed/ollama.py``), the graph's LLM extractor (``graph/llm.py``) and the
reranker (``rerank/ollama.py``) talk to an Ollama server through the official client,
and all must keep an unreachable
host cheap and its credentials out of messages. This module is that common ground, with
no heavy import (the graph side must not pull in numpy):

- ``display_host``: the host for messages, without a ``user:password@`` part;
- ``is_loopback``: a loopback host is reached without the environment's proxies;
- ``Cooldown`` / ``Pause``: consecutive failures pause the client (``first_s``, doubling,
  at most ``max_s``), so N calls to a dead host cost microseconds, not N × timeout. It
  keeps any ``Unavailable`` error (the embedder's or the extractor's) for its messages;
- ``client``: the official client with the connect and read timeouts, proxies off for
  loopback;
- ``json_chat``: one non-streaming chat whose answer follows a JSON schema (the
  extractor's and the reranker's), every transport failure mapped to the caller's
  ``Unavailable`` with a short reason.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from kb_mcp.errors import Unavailable

if TYPE_CHECKING:  # imported where a client is made: the graph side stays light
    import ollama


def split_host(host: str) -> tuple[str, str]:
    """(host name as parsed, the original with a scheme) for any form Ollama accepts."""
    with_scheme = host if "://" in host else f"http://{host}"
    return urlsplit(with_scheme).hostname or "", with_scheme


def display_host(host: str) -> str:
    """The host for messages, without a ``user:password@`` part."""
    _, with_scheme = split_host(host.strip())
    parts = urlsplit(with_scheme)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine (``localhost``, 127.0.0.0/8, ::1, or no name)."""
    name, _ = split_host(host.strip())
    if name == "localhost" or name.endswith(".localhost") or not name:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Pause:
    """A cooldown in force: the failure that started it, seconds left, failures in a row."""

    error: Unavailable
    left_s: float
    failures: int

    def reason(self) -> str:
        """The failure, then when the next attempt is allowed (wall clock and seconds)."""
        until = (datetime.now() + timedelta(seconds=self.left_s)).strftime("%H:%M:%S")
        times = "failure" if self.failures == 1 else f"{self.failures} failures in a row"
        return (
            f"{self.error.message}; paused after {times} until {until} "
            f"(retried in {self.left_s:.0f} s)"
        )


class Cooldown:
    """Consecutive failures pause the client: ``first_s``, doubling, at most ``max_s``.

    Thread-safe. ``clock`` is a monotonic time source (seconds).
    """

    def __init__(
        self, first_s: float, max_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._first_s = first_s
        self._max_s = max(first_s, max_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._until = 0.0
        self._error: Unavailable | None = None

    def active(self) -> Pause | None:
        """The pause in force, or None when a request may go out."""
        with self._lock:
            left = self._until - self._clock()
            if self._error is None or left <= 0:
                return None
            return Pause(self._error, left, self._failures)

    def fail(self, error: Unavailable) -> float:
        """Record a failure; returns the length of the pause it starts."""
        with self._lock:
            self._failures += 1
            pause = min(self._first_s * 2 ** (self._failures - 1), self._max_s)
            self._until = self._clock() + pause
            self._error = error
            return pause

    def succeed(self) -> None:
        with self._lock:
            self._failures = 0
            self._until = 0.0
            self._error = None


def short(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters (for error messages)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def client(host: str, connect_timeout_s: float, read_timeout_s: float) -> ollama.Client:
    """The official client for ``host``. trust_env is off for a loopback host: a proxy
    from HTTP(S)_PROXY cannot reach the user's own localhost (Go's
    ProxyFromEnvironment, which ``ollama`` itself uses, skips loopback likewise)."""
    import httpx
    import ollama

    return ollama.Client(
        host=host,
        timeout=httpx.Timeout(read_timeout_s, connect=connect_timeout_s),
        trust_env=not is_loopback(host),
    )


def json_chat(
    chat_client: ollama.Client,
    model: str,
    messages: Sequence[dict[str, str]],
    schema: dict[str, Any],
    read_timeout_s: float,
    unavailable: Callable[[str], Unavailable],
) -> str:
    """The answer of one deterministic chat constrained to ``schema``; a failure to get
    one is ``unavailable(reason)``, raised."""
    import httpx
    import ollama

    try:
        response = chat_client.chat(
            model=model,
            messages=list(messages),
            format=schema,
            stream=False,
            think=False,
            options={"temperature": 0},
        )
        return str(response.message.content or "")
    except ollama.ResponseError as error:
        raise unavailable(f"HTTP {error.status_code}: {short(str(error.error))}") from error
    except ConnectionError as error:
        raise unavailable("cannot connect") from error
    except httpx.TimeoutException as error:
        if isinstance(error, httpx.ConnectTimeout):
            raise unavailable("no connection within the connect timeout") from error
        raise unavailable(f"no answer within {read_timeout_s:g} s") from error
    except httpx.HTTPError as error:
        raise unavailable(f"request failed ({short(type(error).__name__)})") from error
    except ValueError as error:  # not JSON, not Ollama's shape
        raise unavailable(f"malformed answer: {short(str(error))}") from error
