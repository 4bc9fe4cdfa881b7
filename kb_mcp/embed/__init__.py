"""Ports to embedding models: ``base`` (the port), ``local`` (in-process, offline),
``ollama`` (an Ollama server through the official client)."""
