"""Ports to embedding models and the work around them: ``base`` (the port), ``registry``
(the ``embedder`` setting → an embedder), ``queue`` (pending chunks → vectors),
``active`` (a library's embedder and the vectors its searches use); the providers
``local`` (in-process, offline) and ``ollama`` (an Ollama server, official client)."""
