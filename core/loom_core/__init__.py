"""Loom's shared core. Planes import from here; nothing here imports a plane."""
