"""Language-neutral text helpers: the word lists of the languages the library reads
(``lexicon``) and what is read with them (``dates``). Pure."""
