"""Document relations: what a document says about another (a correction, an erratum,
a supersession, a withdrawal, an update), from the words it is said in to the rows
search reads. Detected from one document alone (``detect``, its cue words from
``text/lexicon``), matched to the document it names (``references``, ``name_index``),
redone when documents arrive or the rules change (``relink``), read back per document
(``read``) as ``Change`` values and worded (``change``).

Two parts live elsewhere, by the layers (docs/architecture.md, "Modules"): the rows and
their SQL are the store's (``store/relations.py``, ``store/names_log.py``: SQL lives only
in ``store/`` and ``index/``), and what ranking does with relations is a search stage
(``search/relations.py``: it orders search's candidates by the question's words, so it
sits with them, above this package)."""
