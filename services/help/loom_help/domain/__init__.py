"""Pure rules of help: splitting pages into sections, terms, the BM25 index, reads and citations."""
