"""Loom's Python SDK (being written)."""
