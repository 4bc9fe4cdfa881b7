"""A loopback HTTP server that speaks Ollama's ``/api/embed``, for the ``ollama`` tests.

Real sockets and the real wire protocol (docs/api.md of ollama/ollama, "Generate
Embeddings"): ``POST /api/embed`` takes ``{model, input (a string or a list), truncate?,
options?, keep_alive?, dimensions?}`` and answers ``{model, embeddings: [[...]],
total_duration, load_duration, prompt_eval_count}``; errors are ``{"error": "..."}`` with
the status code, and an unknown model is Ollama's own 404 ``model "<name>" not found, try
pulling it first``. ``GET /`` answers ``Ollama is running`` as the real server does.

``POST /api/chat`` ("Generate a chat completion", non-streaming) takes ``{model,
messages, format?, options?, stream: false, think?}`` and answers ``{model, created_at,
message: {role: assistant, content}, done: true, done_reason: stop, ...}``. The content
is ``chat_reply(body)``: by default an empty extraction; a test sets its own function
(it plays the model, e.g. one that obeys whatever the fenced text tells it).
``chat_requests`` records every chat request body. ``delay_s`` and ``fail`` apply to
chat requests too. ``in_flight`` counts the requests being answered, so a test can wait
until a killed client's last request has been recorded.

Vectors are deterministic (``vector_for``: a SHA-256 stream of the text), so a test can
check order, prefixes and cuts. Knobs a test may set while the server runs: ``dims``,
``models``, ``delay_s`` (each embed request waits this long, cut short at shutdown) and
``fail(status, message, times)``. ``embed_requests`` records every embed request body.

A gate holds batches of passages at a point the test chooses, instead of a delay: after
``hold_after(n)`` the next ``n`` embed requests of two texts or more are answered and
every later one waits (``held`` is set when the first arrives) until ``release()``, so
a test can act (send a signal, look at the library) while a client is known to be
mid-batch. A request of one text (the client's probe for the model's dimensions, a
question) is never held: other commands keep working meanwhile.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_DIMS = 8
DEFAULT_MODEL = "qwen3-embedding:0.6b"


def vector_for(text: str, dims: int) -> list[float]:
    """The server's (unnormalized) vector for ``text``: bytes of SHA-256(text, i) → [-1, 1]."""
    values: list[float] = []
    block = 0
    while len(values) < dims:
        digest = hashlib.sha256(f"{block}\0{text}".encode()).digest()
        values.extend(byte / 127.5 - 1.0 for byte in digest)
        block += 1
    return values[:dims]


class OllamaServer(ThreadingHTTPServer):
    """The server; ``url`` is its base address (``http://127.0.0.1:<port>``)."""

    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.dims = DEFAULT_DIMS
        self.models = {DEFAULT_MODEL}
        self.delay_s = 0.0
        self.embed_requests: list[dict[str, Any]] = []
        self.chat_requests: list[dict[str, Any]] = []
        self.chat_models = {"qwen3:0.6b"}
        self.chat_reply: Callable[[dict[str, Any]], str] = lambda _body: (
            '{"entities": [], "relations": []}'
        )
        self.in_flight = 0  # requests being answered now (a delayed one counts)
        self.stopping = threading.Event()
        self.held = threading.Event()  # an embed request is waiting at the gate
        self._hold_at: int | None = None  # the arrival (1-based) from which requests wait
        self._arrivals = 0
        self._released = threading.Event()
        self._failures: list[tuple[int, str]] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.embed_requests)

    def hold_after(self, n: int) -> None:
        """Answer the next ``n`` embed requests, then hold every later one (``held``)."""
        with self._lock:
            self._hold_at = self._arrivals + n + 1
            self.held.clear()
            self._released.clear()

    def release(self) -> None:
        """Let the held requests (and every later one) through."""
        with self._lock:
            self._hold_at = None
        self._released.set()

    def wait_at_gate(self, body: dict[str, Any]) -> None:
        """Called as an embed request arrives: waits there while the gate holds it."""
        texts = body.get("input") if isinstance(body, dict) else None
        if not isinstance(texts, list) or len(texts) < 2:
            return
        with self._lock:
            self._arrivals += 1
            holding = self._hold_at is not None and self._arrivals >= self._hold_at
        if holding:
            self.held.set()
            while not (self._released.wait(0.05) or self.stopping.is_set()):
                pass

    def fail(self, status: int, message: str, times: int = 1) -> None:
        """The next ``times`` embed requests answer ``status`` with ``{"error": message}``."""
        with self._lock:
            self._failures.extend([(status, message)] * times)

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Status and JSON for one embed request, as Ollama would answer it."""
        with self._lock:
            self.embed_requests.append(body)
            if self._failures:
                status, message = self._failures.pop(0)
                return status, {"error": message}
        model = body.get("model")
        if not model:
            return 400, {"error": "model is required"}
        if model not in self.models:
            return 404, {"error": f'model "{model}" not found, try pulling it first'}
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        return 200, {
            "model": model,
            "embeddings": [vector_for(text, self.dims) for text in texts],
            "total_duration": 14_143_917,
            "load_duration": 1_019_500,
            "prompt_eval_count": sum(len(text.split()) for text in texts),
        }

    def answer_chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Status and JSON for one non-streaming chat request, as Ollama would answer it."""
        with self._lock:
            self.chat_requests.append(body)
            if self._failures:
                status, message = self._failures.pop(0)
                return status, {"error": message}
        model = body.get("model")
        if model not in self.chat_models:
            return 404, {"error": f'model "{model}" not found, try pulling it first'}
        return 200, {
            "model": model,
            "created_at": "2026-01-01T00:00:00.000000Z",
            "message": {"role": "assistant", "content": self.chat_reply(body)},
            "done": True,
            "done_reason": "stop",
            "total_duration": 14_143_917,
            "eval_count": 42,
        }


class _Handler(BaseHTTPRequestHandler):
    server: OllamaServer

    def do_GET(self) -> None:
        if self.path == "/":
            self._send(200, b"Ollama is running", "text/plain; charset=utf-8")
        else:
            self._send(404, b"404 page not found", "text/plain")

    def do_POST(self) -> None:
        with self.server._lock:
            self.server.in_flight += 1
        try:
            self._post()
        finally:
            with self.server._lock:
                self.server.in_flight -= 1

    def _post(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(length)
        if self.path not in ("/api/embed", "/api/chat"):
            self._send(404, b"404 page not found", "text/plain")
            return
        # A delayed answer is dropped when the server stops: the client has long gone.
        if self.server.delay_s and self.server.stopping.wait(self.server.delay_s):
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send_json(400, {"error": "invalid JSON"})
            return
        if self.path == "/api/chat":
            status, answer = self.server.answer_chat(body)
        else:
            self.server.wait_at_gate(body)
            status, answer = self.server.answer(body)
        self._send_json(status, answer)

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json; charset=utf-8")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        # The client may have given up (a timeout) or been killed: nobody to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read ``embed_requests``, not an access log."""


@contextmanager
def serve_ollama(port: int = 0) -> Iterator[OllamaServer]:
    """Run an ``OllamaServer`` on 127.0.0.1 (``port`` 0: a free one) in a thread."""
    server = OllamaServer(port)
    # A short poll interval: shutdown() waits up to one interval, at every test's teardown.
    thread = threading.Thread(
        target=server.serve_forever, args=(0.02,), name="ollama-server", daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): connecting is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
