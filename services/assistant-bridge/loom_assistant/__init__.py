"""Loom\x27s assistant bridge (spec 000, "Assistant design")."""
