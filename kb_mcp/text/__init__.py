"""Pure text reading every layer may use: the word lists of the languages the library
reads (``lexicon``) and the dates read with them (``dates``); a document's frontmatter
(``frontmatter``), its status (``status``), its stated dates (``document_dates``) and its
opening lines (``lines``). No I/O, no database: ``ingest/``, ``search/`` and
``relations/`` all read documents with these."""
