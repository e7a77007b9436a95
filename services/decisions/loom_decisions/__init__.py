"""Loom decisions plane: decision records, the memory rows they write, and search over them."""
