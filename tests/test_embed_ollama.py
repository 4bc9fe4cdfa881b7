"""The ``ollama`` embedder against a loopback server that speaks Ollama's ``/api/embed``.

Guards: requests over 128 texts (order kept across them), text cut to the signature's
budget, query prefixes, a read timeout that returns in bounded time, a 500, a 404 for a
model not pulled, a model whose vector size changes under the same name, an unreachable
host, and the cooldown that makes the next call cost no network at all, then recovery.
Network use is measured with the server's request count, never with wall-clock asserts
(except the one bound on the timeout test, far from its value).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from ollama_server import OllamaServer, closed_port, serve_ollama, vector_for

from kb_mcp.embed.base import Embedder, EmbedderUnavailable, normalized
from kb_mcp.embed.ollama import (
    DEFAULT_MODEL,
    MAX_BATCH_TEXTS,
    Cooldown,
    OllamaEmbedder,
    prefix_scheme,
)
from kb_mcp.errors import InvalidInput

QWEN_QUERY_PREFIX = "Instruct: Given a question, retrieve passages that answer it\nQuery: "


def expected(texts: list[str], dims: int) -> np.ndarray:
    return normalized(np.array([vector_for(text, dims) for text in texts]))


@pytest.fixture
def embedder(ollama_server: OllamaServer):
    opened = OllamaEmbedder(ollama_server.url, cooldown_s=60)
    yield opened
    opened.close()


def test_embedder_implements_the_port(embedder: OllamaEmbedder) -> None:
    assert isinstance(embedder, Embedder)


def test_embed_splits_requests_at_128_texts_and_keeps_order(
    ollama_server: OllamaServer, embedder: OllamaEmbedder
) -> None:
    texts = [f"passage number {i}" for i in range(300)]
    vectors = embedder.embed(texts)
    sizes = [len(request["input"]) for request in ollama_server.embed_requests]
    assert sizes == [MAX_BATCH_TEXTS, MAX_BATCH_TEXTS, 300 - 2 * MAX_BATCH_TEXTS]
    assert [t for r in ollama_server.embed_requests for t in r["input"]] == texts
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, expected(texts, ollama_server.dims), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)


def test_embed_bounds_a_request_by_characters_too(ollama_server: OllamaServer) -> None:
    with OllamaEmbedder(ollama_server.url, batch_chars=100) as embedder:
        embedder.embed(["x" * 40] * 5)
    assert [len(r["input"]) for r in ollama_server.embed_requests] == [2, 2, 1]


def test_embed_cuts_text_to_the_signature_budget(ollama_server: OllamaServer) -> None:
    with OllamaEmbedder(ollama_server.url, max_chars=50) as embedder:
        vectors = embedder.embed(["a" * 500])
        assert embedder.signature.max_chars == 50
    [request] = ollama_server.embed_requests
    assert request["input"] == ["a" * 50]
    assert request["model"] == DEFAULT_MODEL and request["truncate"] is True
    np.testing.assert_allclose(vectors, expected(["a" * 50], ollama_server.dims), rtol=1e-6)


def test_embed_prefixes_queries_for_qwen3_and_leaves_passages_plain(
    ollama_server: OllamaServer, embedder: OllamaEmbedder
) -> None:
    query = embedder.embed(["how do I roll back a deployment?"], kind="query")
    passage = embedder.embed(["Rolling back a deployment"], kind="passage")
    inputs = [r["input"] for r in ollama_server.embed_requests]
    assert inputs == [
        [QWEN_QUERY_PREFIX + "how do I roll back a deployment?"],
        ["Rolling back a deployment"],
    ]
    np.testing.assert_allclose(
        query, expected([QWEN_QUERY_PREFIX + "how do I roll back a deployment?"], 8), rtol=1e-6
    )
    assert not np.allclose(query, passage)
    assert embedder.signature.prefixes == "qwen3-question"


def test_prefix_scheme_follows_the_model_family() -> None:
    assert prefix_scheme("qwen3-embedding:8b").name == "qwen3-question"
    assert prefix_scheme("library/nomic-embed-text:latest").passage == "search_document: "
    assert prefix_scheme("bge-m3").name == "none"


def test_signature_probes_once_and_stays_stable(
    ollama_server: OllamaServer, embedder: OllamaEmbedder
) -> None:
    ollama_server.dims = 24
    first = embedder.signature
    assert (first.provider, first.model, first.dims) == ("ollama", DEFAULT_MODEL, 24)
    assert ollama_server.request_count == 1
    embedder.embed(["one", "two"])
    assert embedder.signature == first
    assert ollama_server.request_count == 2


def test_signature_learned_from_the_first_embed_needs_no_probe(
    ollama_server: OllamaServer, embedder: OllamaEmbedder
) -> None:
    assert embedder.embed(["kestrel"]).shape == (1, 8)
    assert embedder.signature.dims == 8
    assert ollama_server.request_count == 1


def test_a_changed_dimension_is_refused_not_mixed(
    ollama_server: OllamaServer, embedder: OllamaEmbedder
) -> None:
    ollama_server.dims = 768
    embedder.embed(["before"])
    ollama_server.dims = 1024
    with pytest.raises(EmbedderUnavailable, match="returned 1024 dims, expected 768") as raised:
        embedder.embed(["after"])
    assert "changed under the same name" in raised.value.message
    assert embedder.signature.dims == 768
    assert not embedder.availability().ok


def test_given_dims_are_checked_against_the_first_answer(ollama_server: OllamaServer) -> None:
    with OllamaEmbedder(ollama_server.url, dims=384) as embedder:
        assert embedder.signature.dims == 384
        assert ollama_server.request_count == 0
        with pytest.raises(EmbedderUnavailable, match="returned 8 dims, expected 384"):
            embedder.embed(["x"])


def test_a_read_timeout_fails_fast_with_the_host_and_model(ollama_server: OllamaServer) -> None:
    ollama_server.delay_s = 30
    with OllamaEmbedder(ollama_server.url, read_timeout_s=0.3) as embedder:
        started = time.monotonic()
        with pytest.raises(EmbedderUnavailable, match="did not answer") as raised:
            embedder.embed(["slow"])
        assert time.monotonic() - started < 10  # the server would have taken 30 s
    assert ollama_server.url in raised.value.message and DEFAULT_MODEL in raised.value.message


def test_a_server_error_names_host_model_and_reason(
    ollama_server: OllamaServer, embedder: OllamaEmbedder
) -> None:
    ollama_server.fail(500, "llama runner process has terminated: signal: killed")
    with pytest.raises(EmbedderUnavailable, match="HTTP 500: llama runner process") as raised:
        embedder.embed(["x"])
    assert ollama_server.url in raised.value.message
    assert raised.value.hint and "ollama serve" in raised.value.hint


def test_a_model_not_pulled_says_to_pull_it(ollama_server: OllamaServer) -> None:
    missing = "model nomic-embed-text not found"
    with (
        OllamaEmbedder(ollama_server.url, "nomic-embed-text") as embedder,
        pytest.raises(EmbedderUnavailable, match=missing) as raised,
    ):
        embedder.embed(["x"])
    assert raised.value.hint and "ollama pull nomic-embed-text" in raised.value.hint


def test_a_host_without_the_embed_endpoint_is_not_a_missing_model(
    ollama_server: OllamaServer,
) -> None:
    with (
        OllamaEmbedder(ollama_server.url + "/proxy") as embedder,
        pytest.raises(EmbedderUnavailable, match="has no /api/embed") as raised,
    ):
        embedder.embed(["x"])
    assert raised.value.hint and "Ollama server" in raised.value.hint


def test_an_answer_that_is_not_embeddings_is_unavailable(
    ollama_server: OllamaServer, embedder: OllamaEmbedder
) -> None:
    ollama_server.fail(200, "not a vector")
    with pytest.raises(EmbedderUnavailable, match="not embeddings"):
        embedder.embed(["x"])


def test_a_failed_batch_returns_nothing_partial(
    ollama_server: OllamaServer, embedder: OllamaEmbedder
) -> None:
    embedder.embed(["warm"])
    with pytest.raises(EmbedderUnavailable):
        ollama_server.fail(500, "boom", times=1)
        embedder.embed(["a"] * 200)
    assert ollama_server.request_count == 2  # the first of two requests failed; no second


def test_unreachable_host_cools_down_without_network_then_recovers() -> None:
    port, now = closed_port(), [0.0]
    host = f"http://127.0.0.1:{port}"
    with OllamaEmbedder(host, cooldown_s=30, clock=lambda: now[0]) as embedder:
        with pytest.raises(EmbedderUnavailable, match="cannot connect") as raised:
            embedder.embed(["x"])
        assert raised.value.hint and "ollama serve" in raised.value.hint
        with serve_ollama(port) as server:  # the host comes up during the cooldown
            now[0] = 29.0
            paused = r"paused after failure until .* \(retried in 1 s\)"
            with pytest.raises(EmbedderUnavailable, match=paused):
                embedder.embed(["x"])
            availability = embedder.availability()
            assert not availability.ok and "cannot connect" in (availability.reason or "")
            assert server.request_count == 0
            now[0] = 30.5
            assert embedder.availability().ok
            assert embedder.embed(["x"]).shape == (1, server.dims)
            assert server.request_count == 1
            server.fail(500, "boom")  # the success reset the backoff: 30 s again, not 60
            with pytest.raises(EmbedderUnavailable, match="HTTP 500"):
                embedder.embed(["x"])
            now[0] += 31
            assert embedder.availability().ok


def test_a_failing_server_is_not_asked_again_during_the_cooldown(
    ollama_server: OllamaServer, embedder: OllamaEmbedder
) -> None:
    ollama_server.fail(500, "boom")
    for _ in range(5):
        with pytest.raises(EmbedderUnavailable):
            embedder.embed(["x"])
    assert ollama_server.request_count == 1


def test_cooldown_doubles_up_to_its_cap_and_success_resets_it() -> None:
    now = [0.0]
    cooldown = Cooldown(30, 300, clock=lambda: now[0])
    error = EmbedderUnavailable("down")
    assert [cooldown.fail(error) for _ in range(6)] == [30, 60, 120, 240, 300, 300]
    pause = cooldown.active()
    assert pause is not None and pause.failures == 6
    assert "down; paused after 6 failures in a row" in pause.reason()
    now[0] = 299
    assert cooldown.active() is not None
    now[0] = 301
    assert cooldown.active() is None
    cooldown.succeed()
    assert cooldown.fail(error) == 30


def test_loopback_host_ignores_a_proxy_from_the_environment(
    ollama_server: OllamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed_port()}")
    with OllamaEmbedder(ollama_server.url) as embedder:
        assert embedder.embed(["x"]).shape == (1, 8)


def test_messages_never_show_credentials_in_the_host() -> None:
    with (
        OllamaEmbedder(f"http://user:secret@127.0.0.1:{closed_port()}") as embedder,
        pytest.raises(EmbedderUnavailable) as raised,
    ):
        embedder.embed(["x"])
    assert "secret" not in raised.value.render()
    assert embedder.host.startswith("http://127.0.0.1:")


def test_an_unknown_kind_is_invalid_input(
    ollama_server: OllamaServer, embedder: OllamaEmbedder
) -> None:
    with pytest.raises(InvalidInput, match="passage"):
        embedder.embed(["x"], kind="document")  # type: ignore[arg-type]
    assert ollama_server.request_count == 0


@pytest.mark.parametrize(
    "arguments",
    [{"host": " "}, {"model": ""}, {"batch_size": 129}, {"batch_size": 0}, {"dims": 0}],
)
def test_bad_arguments_are_invalid_input(arguments: dict) -> None:
    with pytest.raises(InvalidInput):
        OllamaEmbedder(**{"host": "http://127.0.0.1:11434", **arguments})
