"""Runs Loom: every plane in one process (embedded) or one plane per process (cluster)."""
