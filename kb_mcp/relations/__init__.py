"""Document relations: what a document says about another (a correction, an erratum,
a supersession, a withdrawal, an update), from the words it is said in to the rows
search reads. Detected from one document alone (``detect``, its cue words from
``text/lexicon``), matched to the document it names (``references``, ``name_index``),
redone when documents arrive or the rules change (``relink``) and read back per
document (``read``). The rows are the store's (``store/relations.py``); what ranking
does with them is search's (``search/relations.py``)."""
