"""The entity graph's pure code: extracting entities from a chunk, and resolving names.

No I/O here; the tables live in ``index/graph.py`` and the search leg in
``search/graph.py``.
"""
