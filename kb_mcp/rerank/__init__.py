"""The reranker port: a second opinion on the order of a search's first fused passages.

``base.py`` is the port (``Reranker``: a question and passages in, one score each out),
``onnx.py`` and ``ollama.py`` its two implementations, ``factory.py`` the ``reranker``
setting → one of them. What the search engine does with one (the first
``RERANK_PASSAGES`` candidates reordered within the search's deadline, or the ranked order
with the reason the reranker was skipped) is a search stage: ``search/rerank.py``.
"""
