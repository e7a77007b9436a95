"""all-MiniLM-L6-v2 computing in int8, `model.onnx` beside this file.

Data only: `loom_core.embedding` reads the file from this package's directory and checks its
SHA-256 before the model loads. `scripts/derive_minilm_int8.py` derives it from the pinned PyPI
file and `--check`s the committed copy.
"""
