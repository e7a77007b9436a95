"""sentence-transformers/all-MiniLM-L6-v2's WordPiece tokenizer, `tokenizer.json` beside this file.

Data only: `loom_core.embedding` reads the file from this package's directory and checks its
SHA-256 before the model loads.
"""
