"""Loom's help plane: search and read the documentation this build ships (spec 000, "Loom's documentation")."""
